"""Measures the registry does not hold, computed by ir_measures (the optional ``ir`` extra).

The built-in families (:mod:`searchtome.metrics.measures`) are the fast path and always win; any
other name ir_measures can parse (``AP``, ``Judged@10``, ``P(rel=2)@5``, ``Bpref``...) is
computed by ir_measures over the same run and qrels. The run is handed over with synthetic,
strictly decreasing scores (:func:`~searchtome.metrics.ties.to_ir_measures_dict`), so
ir_measures scores exactly the order searchtome scores (the tie rule), and a query the run does
not answer is a miss (0), as for the built-ins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from searchtome.errors import SearchTomeError
from searchtome.metrics.family import Family, Ranked
from searchtome.metrics.qrels import Qrels
from searchtome.metrics.ties import to_ir_measures_dict
from searchtome.records import Run

EXTRA = "ir"
INSTALL_HINT = f"pip install 'searchtome[{EXTRA}]'"


class External(Family):
    """Whatever ir_measures computes under this name (see the ir_measures documentation)."""

    needs_cutoff = False
    # Unknown to us: assume any reordering of the ranking may change it (used by the tie check).
    order_sensitive = True
    description = "computed by ir_measures"

    def __init__(self, name: str) -> None:
        self.name = name  # type: ignore[misc]  # per instance: one family per ir_measures name

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        raise SearchTomeError(f"{self.name} is computed by ir_measures, not from rank arrays")

    def describe(self, cutoff: int | None) -> str:
        return f"{self.name}, computed by ir_measures"


def _ir_measures() -> Any | None:
    try:
        import ir_measures
    except ImportError:
        return None
    return ir_measures


def available() -> bool:
    """Whether ir_measures is installed (the ``ir`` extra)."""
    return _ir_measures() is not None


def canonical_name(text: str) -> str | None:
    """ir_measures' own spelling of ``text`` (``"P(rel=2) @5"`` → ``"P(rel=2)@5"``), else ``None``.

    Raises :class:`SearchTomeError` naming the extra when ir_measures is not installed.
    """
    module = _ir_measures()
    if module is None:
        raise SearchTomeError(
            f"measure {text!r} is not built in; other ir_measures measures need the "
            f"{EXTRA!r} extra: {INSTALL_HINT}"
        )
    try:
        return str(module.parse_measure(text))
    except Exception:  # ir_measures raises NameError, ValueError, SyntaxError... on bad names
        return None


def cutoff_of(name: str) -> float | None:
    """The cut-off ir_measures parses from ``name`` (``AP@10`` → 10), ``None`` when it has none."""
    module = _ir_measures()
    if module is None:
        return None
    try:
        value = module.parse_measure(name).params.get("cutoff")
    except Exception:  # as in canonical_name: ir_measures raises many kinds on bad names
        return None
    return float(value) if isinstance(value, int | float) else None


def external_values(
    run: Run, qrels: Qrels, names: Sequence[str], query_ids: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per-query values of ir_measures measures, aligned with ``query_ids`` (missing = 0)."""
    if not names:
        return {}
    module = _ir_measures()
    if module is None:
        raise SearchTomeError(f"{', '.join(names)}: ir_measures is not installed; {INSTALL_HINT}")
    wanted = set(query_ids)
    index = {qid: i for i, qid in enumerate(query_ids)}
    judged = {q: dict(docs) for q, docs in qrels.items() if q in wanted}
    ranked = {q: docs for q, docs in to_ir_measures_dict(run).items() if q in wanted and docs}
    by_name = {str(module.parse_measure(n)): n for n in names}
    out = {n: np.zeros(len(query_ids), dtype=np.float64) for n in names}
    for value in module.iter_calc(list(map(module.parse_measure, names)), judged, ranked):
        row = index.get(value.query_id)
        if row is not None:
            out[by_name[str(value.measure)]][row] = float(value.value)
    return out
