"""The adapters in the cache, finished or still training: what ``searchtome ls trainings`` lists.

A long training (STAIR in the paper's setting takes hours on a CPU) is spread over sittings:
after every epoch its state is saved next to the adapter's final folder
(``$SEARCHTOME_HOME/baselines/SYSTEM/adapters/.KEY.work/state.pt``) and the same command resumes
it. This module reads those states and the finished adapters' ``searchtome.json`` so that a user
sees where each training stands (epochs done, dev R@1 per epoch, the best epoch) without
opening a log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.baselines.generative.card import CARD_FILE, read_card

from searchtome.errors import SearchTomeError
from searchtome.submissions.runinfo import TrainingReport

# The cache layout of a training in progress, written by adapters.py and train.py, read here.
WORK_SUFFIX = ".work"
STATE_FILE = "state.pt"


def work_dir(final: Path) -> Path:
    """Where an interrupted training keeps its per-epoch state, next to the final folder."""
    return final.parent / f".{final.name}{WORK_SUFFIX}"


@dataclass(frozen=True)
class TrainingStatus:
    """One adapter: finished (its final folder exists) or in training (only its epoch state)."""

    system: str
    key: str
    finished: bool
    epochs: int
    best_epoch: int
    best_dev_r1: float | None
    stopped: str
    dev_r1: list[float | None] = field(default_factory=list)
    seconds: float = 0.0
    dev_queries: int = 0

    def line(self) -> str:
        """One line for the terminal: where the training stands."""
        state = "finished" if self.finished else "in training (rerun its command to resume)"
        curve = ", ".join("–" if v is None else f"{100 * v:.0f}" for v in self.dev_r1) or "none"
        best = (
            f"best {100 * self.best_dev_r1:.0f} at epoch {self.best_epoch}"
            if self.best_dev_r1 is not None
            else "no dev evaluation"
        )
        hours = self.seconds / 3600
        why = f"; {self.stopped}" if self.stopped else ""
        # A finished report counts its dev questions; an epoch state does not record them.
        sample = f" ({self.dev_queries} dev questions)" if self.dev_queries else ""
        return (
            f"{self.system}  {self.key}  {state}: {self.epochs} epoch(s), {hours:.1f} h; "
            f"dev R@1 % per epoch{sample}: {curve}; {best}{why}"
        )


def _status(system: str, key: str, finished: bool, report: Any, where: Path) -> TrainingStatus:
    """A training's status from its report (``run_info.notes.training``'s shape), typed."""
    if not isinstance(report, Mapping):
        raise SearchTomeError(f"{where}: no training report in it (not written by searchtome?)")
    training = TrainingReport.from_dict(report)
    if training.problems:  # e.g. a history that is not a list of epochs
        raise SearchTomeError(
            f"{where}: training.{training.problems[0]} (not written by searchtome?)"
        )
    history = training.history or ()
    return TrainingStatus(
        system=system,
        key=key,
        finished=finished,
        epochs=training.epochs or len(history),
        best_epoch=training.best_epoch or 0,
        best_dev_r1=training.best_dev_r1,
        stopped=training.stopped or "",
        dev_r1=[row.dev_r1 for row in history],
        seconds=float(training.seconds or 0.0),
        dev_queries=training.dev_queries or 0,
    )


def _in_training(system: str, work: Path) -> TrainingStatus | None:
    state = work / STATE_FILE
    if not state.is_file():
        return None  # a training that was killed before its first epoch ended
    import torch

    try:
        saved = torch.load(state, map_location="cpu", weights_only=False)
    except Exception as exc:  # any unreadable state is reported the same way
        raise SearchTomeError(f"{state}: cannot be read ({type(exc).__name__}: {exc})") from None
    report = saved.get("report") if isinstance(saved, dict) else None
    key = work.name.removeprefix(".").removesuffix(WORK_SUFFIX)
    return _status(system, key, False, report, state)


def trainings(root: Path) -> list[TrainingStatus]:
    """Every adapter under ``root`` (``$SEARCHTOME_HOME/baselines``), by system and key.

    Finished adapters are read from their ``searchtome.json``; unfinished ones from their last
    epoch state (needs torch). Adapters without a training report (``--set adapter=...``
    copies, older caches) are left out.
    """
    out: list[TrainingStatus] = []
    for adapters in sorted(root.glob("*/adapters")):
        system = adapters.parent.name
        for folder in sorted(adapters.iterdir()):
            if folder.name.startswith(".") and folder.name.endswith(WORK_SUFFIX):
                status = _in_training(system, folder)
                if status is not None:
                    out.append(status)
                continue
            card = read_card(folder)
            if card is not None and card.training is not None:
                report = card.training.to_dict()
                out.append(_status(system, folder.name, True, report, folder / CARD_FILE))
    return out
