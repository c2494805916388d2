"""A run and a submission: the two records a scorer needs (ranx/ir_measures style).

Kept apart from :mod:`searchtome.records`, which re-exports both, so that ``searchtome score``
defines two record classes at start-up rather than every record of the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Run:
    """A ranked list of ids per query (ranx/ir_measures style).

    ``rankings[qid]`` is best first. ``scores`` is optional and, when given, parallel to the
    rankings. The order of ``rankings`` is authoritative: see ``searchtome.metrics.measures`` for the tie
    rule applied when a run is built from scores.
    """

    name: str
    rankings: Mapping[str, tuple[str, ...]]
    scores: Mapping[str, tuple[float, ...]] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rankings)

    def query_ids(self) -> list[str]:
        return list(self.rankings)


@dataclass(frozen=True)
class Submission:
    """A run plus the metadata that says what produced it."""

    system: str
    run: Run
    meta: Mapping[str, Any]
    path: str | None = None
