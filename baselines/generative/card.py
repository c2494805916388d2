"""``searchtome.json``: the card beside a saved LoRA adapter, a typed and versioned document.

The card says what trained the adapter: the system, whether the prompt prefix was read by the
frozen base model, the seed, the settings that shaped it (its cache key's) and the training
report. ``searchtome run`` reads it when it reuses a cached adapter or loads one given with
``--set adapter=``, and ``searchtome ls trainings`` lists finished trainings from it.

Versions (:data:`CARD`, on the document kernel): 2 writes ``"format":
"searchtome-adapter-card-v2"``. Version 1 wrote an integer ``version`` instead; cards from
before it have neither (version 0) and may lack ``frozen_prefix``, which their readers took as
false. Both upgrade on reading; a card is only ever written fresh, by a training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.document import (
    FieldError,
    Format,
    Record,
    expected,
    read_document,
    write_document,
)
from searchtome.io import read_json
from searchtome.submissions.runinfo import TrainingReport

CARD_FILE = "searchtome.json"
CARD_VERSION = 2


@dataclass(frozen=True, kw_only=True)
class AdapterCard(Record):
    """What trained a saved adapter (``searchtome.json``), read strictly (searchtome wrote it)."""

    system: str | None = None
    frozen_prefix: bool | None = None
    seed: int | None = None
    config: Mapping[str, Any] | None = None  # the settings in the adapter's cache key
    training: TrainingReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return write_document(CARD, self)


def _told_version(raw: Mapping[str, Any]) -> int | None:
    """Versions 0 and 1 have no ``format``: 1 wrote ``version``, 0 nothing."""
    if "format" in raw:
        return None
    version = raw.get("version", 0)
    if version not in (0, 1) or isinstance(version, bool):
        raise FieldError("version", expected("0 or 1 (later cards write format)", version))
    return version


def _upgrade_from_0(raw: dict[str, Any]) -> dict[str, Any]:
    return {"frozen_prefix": False, **raw}


def _upgrade_from_1(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != "version"}


CARD = Format(
    "searchtome-adapter-card",
    CARD_VERSION,
    upgrades=(_upgrade_from_0, _upgrade_from_1),
    shape=_told_version,
)


def read_card(folder: Path) -> AdapterCard | None:
    """The card of the adapter in ``folder``, upgraded; None when it has none. A card that cannot
    be read raises one line naming the file and the field."""
    path = folder / CARD_FILE
    if not path.is_file():
        return None
    raw = read_json(path)  # bad JSON: one line naming the file and the line
    return read_document(CARD, AdapterCard, raw, path, "delete the adapter folder to retrain")


def new_card(
    system: str, frozen_prefix: bool, seed: int, config: Mapping[str, Any], training: Mapping
) -> AdapterCard:
    """The card of an adapter trained now (the current version)."""
    return AdapterCard(
        system=system,
        frozen_prefix=frozen_prefix,
        seed=seed,
        config=dict(config),
        training=TrainingReport.from_dict(training, "training"),
    )
