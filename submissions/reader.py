"""Reading a submission: a folder (predictions + ``meta.json``) or a bare predictions/TREC file.

:func:`load_submission` collects every problem and never raises on content (the validator's
entry); :func:`read_submission` raises on the first problem that makes the run ill-defined (the
scorer's entry). The predictions format is told from the content unless forced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.submissions.jsonl import parse_jsonl
from searchtome.submissions.lines import DEFAULT_LIMITS, Limits, detect_format
from searchtome.submissions.meta import read_meta
from searchtome.submissions.problems import Predictions, Problem
from searchtome.submissions.schema import META_FILE, PREDICTION_FILES, RunFormat
from searchtome.submissions.trec import looks_like_trec, parse_trec

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.records import Run, Submission

log = logging.getLogger(__name__)

# meta.json errors that make even a bare scoring run impossible (the rest are the validator's).
_FATAL_META_CODES = ("json", "encoding", "too-large")


@dataclass
class LoadedSubmission:
    """A submission with every problem found while reading it (nothing raised)."""

    submission: Submission
    predictions: Predictions | None
    meta_path: Path | None
    meta_lines: dict[str, int]
    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def read_predictions(
    path: PathLike,
    run_format: RunFormat = "auto",
    name: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Predictions:
    """Parse a predictions file (JSON lines or TREC, gzip or not) without raising on bad content."""
    path = Path(path)
    if run_format not in ("auto", "jsonl", "trec"):
        raise SearchTomeError(f"unknown run format {run_format!r}; use auto, jsonl or trec")
    fmt = detect_format(path, limits) if run_format == "auto" else run_format
    if fmt == "jsonl" and run_format == "auto" and looks_like_trec(path, limits):
        fmt = "trec"  # a TREC run with a field too many or too few: one clear problem
    if fmt == "trec":
        return parse_trec(path, name, limits)
    return parse_jsonl(path, name or _default_name(path), limits)


def _default_name(path: Path) -> str:
    if path.name in PREDICTION_FILES:
        return path.parent.name
    return path.name.split(".")[0]


def find_predictions(folder: PathLike) -> Path:
    """The one predictions file inside a submission folder."""
    folder = Path(folder)
    found = [folder / n for n in PREDICTION_FILES if (folder / n).is_file()]
    if not found:
        raise SearchTomeError(
            f"{folder}: no predictions file; expected one of {', '.join(PREDICTION_FILES)}"
        )
    if len(found) > 1:
        raise SearchTomeError(
            f"{folder}: {len(found)} predictions files ({', '.join(p.name for p in found)}); "
            "keep exactly one"
        )
    return found[0]


def load_submission(
    path: PathLike,
    run_format: RunFormat = "auto",
    *,
    limits: Limits = DEFAULT_LIMITS,
    require_meta: bool = True,
) -> LoadedSubmission:
    """Read a submission folder or a bare predictions / TREC run file, collecting every problem."""
    path = Path(path)
    problems: list[Problem] = []
    meta: dict[str, Any] = {}
    meta_lines: dict[str, int] = {}
    meta_path: Path | None = None
    if path.is_dir():
        pred_path = find_predictions(path)
        meta_path = path / META_FILE
        if meta_path.exists() or require_meta:
            parsed, meta_lines, meta_problems = read_meta(meta_path, limits)
            problems.extend(meta_problems)
            meta = parsed or {}
        if not meta_path.exists():
            meta_path = None
        default_name = path.name
    elif path.is_file():
        pred_path = path
        default_name = None
    else:
        raise SearchTomeError(f"{path}: no such submission folder or run file")
    named = meta.get("system")
    system = named if isinstance(named, str) and named else None
    preds = read_predictions(pred_path, run_format, name=system or default_name, limits=limits)
    problems[:0] = preds.problems  # predictions problems first, then meta.json's
    if system and path.is_dir() and system != path.name:
        problems.append(
            Problem(
                str(meta_path or path),
                meta_lines.get("system"),
                "system",
                f"{system!r} differs from the folder name {path.name!r}; the meta.json name is used",
                "system-name",
                "warning",
            )
        )
    name = preds.run.name
    run = Run(name=name, rankings=preds.run.rankings, scores=preds.run.scores, meta=dict(meta))
    submission = Submission(system=name, run=run, meta=dict(meta), path=str(path))
    return LoadedSubmission(submission, preds, meta_path, meta_lines, problems)


def read_submission(
    path: PathLike,
    run_format: RunFormat = "auto",
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> Submission:
    """A submission ready to score; raises :class:`SearchTomeError` when it cannot be read.

    Errors that make the run ill-defined (bad JSON, wrong types, duplicate queries or ids,
    oversized files) raise; the first one is in the message. Leaderboard rules (all queries
    present, known ids, complete meta data) are the validator's business, so a bare TREC run or
    a folder without ``meta.json`` reads fine. Warnings are logged, except tied scores, which
    the scorer reports where they can change a measure.
    """
    loaded = load_submission(path, run_format, limits=limits, require_meta=False)
    fatal = [p for p in loaded.errors if not p.path.endswith(META_FILE)]
    fatal += [
        p for p in loaded.errors if p.path.endswith(META_FILE) and p.code in _FATAL_META_CODES
    ]
    if fatal:
        more = (
            f" (and {len(fatal) - 1} more problems; run `searchtome validate`)"
            if len(fatal) > 1
            else ""
        )
        raise SearchTomeError(f"{fatal[0]}{more}")
    for p in loaded.problems:
        # Ties are the scorer's to report: only it knows which ones can change a measure.
        if p.severity == "warning" and p.code != "tied-scores":
            log.warning("%s", p)
    return loaded.submission
