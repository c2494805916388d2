"""Learning curves: each trained baseline's dev R@1 per epoch, read from its ``meta.json``.

The generative baselines (stair, dsi, dsi-constrained) pick the epoch they keep by R@1 on a
fixed sample of dev questions and record every epoch in ``run_info.notes.training.history``.
A curve shows whether the kept epoch is a peak or the run stopped while still climbing, which
the test score alone cannot. Systems that reuse one adapter share one curve: the tables and the
figure show it once, under every name (:func:`~searchtome.leaderboard.results.curve_groups`).

A submission without a history has no curve; a history that is there but malformed stops the
build with the file and the field, since a curve drawn from half-read rows would mislead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.leaderboard.costs import fmt_seconds
from searchtome.leaderboard.results import Entry, LearningCurve, curve_groups
from searchtome.leaderboard.text import md_escape, percent
from searchtome.submissions.meta import RunMeta, parse_run_meta
from searchtome.submissions.runinfo import HISTORY_FIELD as TRAINING_FIELD
from searchtome.submissions.schema import META_FILE

CURVES_HEADING = "Learning curves (dev R@1 %, per epoch)"
NOT_EVALUATED = "–"  # a table cell for an epoch without a dev evaluation
TABLE_NOTE = (
    f"Bold: the kept epoch, whose adapter made the test predictions. {NOT_EVALUATED}: no dev "
    "evaluation after that epoch; empty: the run stopped before it."
)


def _fail(where: str, problem: str) -> SearchTomeError:
    return SearchTomeError(f"{where}: {problem}")


# The training fields a curve is drawn from: a value of the wrong type in one of them stops it.
_CURVE_FIELDS = tuple(f"{TRAINING_FIELD}.{f}" for f in ("history", "best_epoch", "dev_queries"))


def curve_from_meta(
    system: str, meta: RunMeta | Mapping[str, Any], where: str
) -> LearningCurve | None:
    """One system's curve, None without a history; ``where`` names the file in errors."""
    doc = parse_run_meta(meta)
    notes = doc.report
    training = notes.training
    if training is None:
        return None  # not a trained run, or free-form notes that are not a training report
    problems = [p for p in training.problems if p.startswith(_CURVE_FIELDS)]
    history_problem = any(p.startswith(_CURVE_FIELDS[0]) for p in problems)
    if not training.history and not history_problem:
        return None  # a training that recorded no epoch
    if problems:
        raise _fail(where, problems[0])
    rows = training.history or ()
    decode = (doc.config or {}).get("dev_decode")  # the baseline's own config
    return LearningCurve(
        system=system,
        epochs=[row.epoch for row in rows],
        dev_r1=[_real(row.dev_r1) for row in rows],
        train_loss=[_real(row.train_loss) for row in rows],
        seconds=[_real(row.seconds) for row in rows],
        best_epoch=training.best_epoch,
        dev_queries=training.dev_queries,
        stopped=training.stopped or "",
        adapter=notes.adapter or "",
        dev_decode=decode if isinstance(decode, str) else "",
    )


def _real(value: float | None) -> float | None:
    return None if value is None else float(value)


def learning_curves(entries: Sequence[Entry], root: PathLike = "") -> dict[str, LearningCurve]:
    """System → curve for every entry whose ``meta.json`` records a training history.

    In the entries' (rank) order. ``root``: the submissions folder the entries' paths are relative
    to, so that an error names the file to fix.
    """
    curves = {}
    for e in entries:
        where = str(Path(root, e.path, META_FILE)) if e.path else f"{e.system}: {META_FILE}"
        curve = curve_from_meta(e.system, e.meta, where)
        if curve is not None:
            curves[e.system] = curve
    return curves


# -- the table and the notes, shared by leaderboard.md and index.html -----------------------


def group_label(group: Sequence[str]) -> str:
    """One column or line per distinct training: ``dsi = dsi-constrained`` when shared."""
    return " = ".join(group)


def curve_grid(
    curves: Mapping[str, LearningCurve],
) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """(column labels, rows): per epoch, each distinct curve's dev R@1 in % and whether it is
    the kept epoch. Epochs are the union over the curves; "" where a run stopped before it."""
    groups = curve_groups(dict(curves))
    firsts = [curves[g[0]] for g in groups]
    epochs = sorted({epoch for c in firsts for epoch in c.epochs})
    rows = []
    for epoch in epochs:
        row = [(str(epoch), False)]
        for c in firsts:
            if epoch not in c.epochs:
                row.append(("", False))
                continue
            value = c.dev_r1[c.epochs.index(epoch)]
            row.append((NOT_EVALUATED if value is None else percent(value), epoch == c.best_epoch))
        rows.append(row)
    return ["Epoch", *(group_label(g) for g in groups)], rows


def curve_table(curves: Mapping[str, LearningCurve]) -> str:
    """The markdown table of :func:`curve_grid`, the kept epoch in bold."""
    header, rows = curve_grid(curves)
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "---:|" * len(header)]
    for row in rows:
        cells = [
            f"**{md_escape(text)}**" if best and text else md_escape(text) for text, best in row
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def curve_intro(split: str) -> str:
    """Where the curve numbers come from and what they are not (the test split)."""
    return (
        "From each trained submission's meta.json (run_info.notes.training.history): after every "
        "epoch the run decodes a fixed sample of dev questions (shown per system below) and "
        "keeps the adapter of the epoch with the best dev R@1 for its test predictions. These "
        f"are dev values, not the {split} split's."
    )


def _adapter_name(adapter: str) -> str:
    """The adapter's cache key: the last part of its path (the folder it sits in is local)."""
    return Path(adapter).name or adapter


def _summary(c: LearningCurve) -> str:
    """What one curve measured, where it peaked, why it ended and what the training took."""
    questions = "dev questions" if c.dev_queries is None else f"{c.dev_queries:,} dev questions"
    decode = f" ({c.dev_decode} decoding)" if c.dev_decode else ""
    n = len(c.epochs)
    kept = "not recorded" if c.best_epoch is None else str(c.best_epoch)
    best = c.best_dev_r1
    kept += "" if best is None else f" (dev R@1 {percent(best)})"
    wall = "not recorded" if c.train_seconds is None else fmt_seconds(c.train_seconds)
    return (
        f"{questions}{decode}, {n} epoch{'s' if n != 1 else ''} run, best epoch {kept}; "
        f"why it stopped: {c.stopped or 'not recorded'}; training wall time {wall}."
    )


def curve_notes(curves: Mapping[str, LearningCurve]) -> list[tuple[str, str]]:
    """(system, one sentence) per system: how its curve was measured and why the run stopped;
    a system sharing another's adapter points to it instead of repeating it."""
    notes = []
    for first, *others in curve_groups(dict(curves)):
        notes.append((first, _summary(curves[first])))
        key = _adapter_name(curves[first].adapter)
        notes += [
            (s, f"same adapter as {first} ({key}): one training, the same curve.") for s in others
        ]
    return notes
