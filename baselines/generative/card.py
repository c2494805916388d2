"""``searchtome.json``: the card beside a saved LoRA adapter, a typed and versioned document.

The card says what trained the adapter: the system, whether the prompt prefix was read by the
frozen base model, the seed, the settings that shaped it (its cache key's) and the training
report. ``searchtome run`` reads it when it reuses a cached adapter or loads one given with
``--set adapter=``, and ``searchtome ls trainings`` lists finished trainings from it.

Versions: 1 writes ``version``. Cards written before it have no ``version`` (read as 0) and
may lack ``frozen_prefix``, which their readers took as false; the upgrade fills it in so, as
a derived field (read, never written back: the file stays as it was).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import read_json
from searchtome.submissions.runinfo import Part, TrainingReport, all_problems

CARD_FILE = "searchtome.json"
CARD_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class AdapterCard(Part):
    """What trained a saved adapter (``searchtome.json``)."""

    # JSON key "version" (a Part's own ``version`` is bookkeeping); None: before versions, 0.
    card_version: int | None = field(default=None, metadata={"key": "version"})
    system: str | None = None
    frozen_prefix: bool | None = None
    seed: int | None = None
    config: Mapping[str, Any] | None = None  # the settings in the adapter's cache key
    training: TrainingReport | None = None


def _upgrade_from_0(card: AdapterCard) -> AdapterCard:
    if card.frozen_prefix is not None:
        return card
    return dataclasses.replace(card, frozen_prefix=False, derived=card.derived | {"frozen_prefix"})


_UPGRADES: dict[int, Callable[[AdapterCard], AdapterCard]] = {0: _upgrade_from_0}


def upgrade(card: AdapterCard) -> AdapterCard:
    """``card`` at :data:`CARD_VERSION`, one step per version (the written version kept)."""
    version = card.card_version or 0
    while version < CARD_VERSION:
        card = _UPGRADES[version](card)
        version += 1
    return card


def read_card(folder: Path) -> AdapterCard | None:
    """The card of the adapter in ``folder``, upgraded; None when it has none. A card that cannot
    be read raises one line naming the file and the field."""
    path = folder / CARD_FILE
    if not path.is_file():
        return None
    raw = read_json(path)  # bad JSON: one line naming the file and the line
    if not isinstance(raw, dict):
        raise SearchTomeError(f"{path}: expected a JSON object; delete it")
    card = AdapterCard.from_dict(raw)
    problems = all_problems(card)
    if problems:
        raise SearchTomeError(f"{path}: {problems[0]}; delete the adapter folder to retrain")
    if (card.card_version or 0) > CARD_VERSION:
        raise SearchTomeError(
            f"{path}: card version {card.card_version}, this searchtome reads up to {CARD_VERSION}; "
            "upgrade searchtome"
        )
    return upgrade(card)


def new_card(
    system: str, frozen_prefix: bool, seed: int, config: Mapping[str, Any], training: Mapping
) -> AdapterCard:
    """The card of an adapter trained now (the current version)."""
    return AdapterCard(
        card_version=CARD_VERSION,
        system=system,
        frozen_prefix=frozen_prefix,
        seed=seed,
        config=dict(config),
        training=TrainingReport.from_dict(training, "training"),
    )
