"""Reading a submission: a folder (predictions + ``meta.json``) or a bare predictions/TREC file.

:func:`load_submission` collects every problem and never raises on content (the validator's
entry); :func:`read_submission` raises on the first problem that makes the run ill-defined (the
scorer's entry). The predictions format is told from the content unless forced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.runs import Run, Submission
from searchtome.submissions.lines import (
    DEFAULT_LIMITS,
    InMemory,
    Limits,
    Source,
    as_source,
    detect_format,
)
from searchtome.submissions.problems import Predictions, Problem, ProblemLog, counts_of, quote
from searchtome.submissions.schema import META_FILE, PREDICTION_FILES, RunFormat

if TYPE_CHECKING:
    from searchtome.submissions.meta import RunMeta

# Parsers and the meta.json reader are imported where used: ``score RUN.trec`` needs neither
# the JSON-lines parser nor meta.json's typed documents (about 12 ms of a 0.2 s start).

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
    path: PathLike | InMemory,
    run_format: RunFormat = "auto",
    name: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Predictions:
    """Parse a predictions file (JSON lines or TREC, gzip or not) without raising on bad content."""
    path = as_source(path)
    if run_format not in ("auto", "jsonl", "trec"):
        raise SearchTomeError(f"unknown run format {run_format!r}; use auto, jsonl or trec")
    from searchtome.submissions.trec import looks_like_trec, parse_trec

    fmt = detect_format(path, limits) if run_format == "auto" else run_format
    if fmt == "jsonl" and run_format == "auto" and looks_like_trec(path, limits):
        fmt = "trec"  # a TREC run with a field too many or too few: one clear problem
    if fmt == "trec":
        return parse_trec(path, name, limits)
    from searchtome.submissions.jsonl import parse_jsonl

    return parse_jsonl(path, name or _default_name(path), limits)


def _default_name(path: Source) -> str:
    if path.name in PREDICTION_FILES:
        return path.parent.name
    return path.name.split(".")[0]


def find_predictions(folder: PathLike) -> Path:
    """The one predictions file inside a submission folder."""
    folder = Path(folder)
    found = [folder / n for n in PREDICTION_FILES if (folder / n).is_file()]
    for file in found:
        refuse_outside_link(folder, file)

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


@dataclass
class SubmissionFiles:
    """A submission's files located and its ``meta.json`` read, predictions not yet parsed."""

    path: Path
    predictions_path: Source
    meta: dict[str, Any]
    meta_path: Path | None
    meta_lines: dict[str, int]
    meta_problems: list[Problem]
    default_name: str | None
    in_memory: bool = False  # an upload's bytes (upload_files): no folder on disk

    @property
    def document(self) -> RunMeta:
        """``meta.json`` typed (fields of the wrong type read as not given)."""
        from searchtome.submissions.meta import parse_run_meta

        return parse_run_meta(self.meta)

    @property
    def system(self) -> str | None:
        """The name ``meta.json`` gives, when it gives a usable one."""
        return (self.document.system or None) if self.meta else None

    def name_warnings(self) -> list[Problem]:
        """``meta.json`` naming a system other than its folder."""
        system, path = self.system, self.path
        if not (system and not self.in_memory and path.is_dir() and system != path.name):
            return []
        message = f"{quote(system)} differs from the folder name {path.name!r}; the meta.json name is used"
        shown = str(self.meta_path or path)
        line = self.meta_lines.get("system")
        return [Problem(shown, line, "system", message, "system-name", "warning")]


def open_submission(
    path: PathLike, *, limits: Limits = DEFAULT_LIMITS, require_meta: bool = True
) -> SubmissionFiles:
    """Find a submission's predictions file and read its ``meta.json`` (problems collected).

    Raises :class:`SearchTomeError` when there is nothing to read: no such path, no or several
    predictions files, or a file that links outside the submission folder.
    """
    path = Path(path)
    meta: dict[str, Any] = {}
    meta_lines: dict[str, int] = {}
    meta_problems: list[Problem] = []
    meta_path: Path | None = None
    if path.is_dir():
        pred_path = find_predictions(path)
        meta_path = path / META_FILE
        refuse_outside_link(path, meta_path)
        if meta_path.exists() or require_meta:
            from searchtome.submissions.meta import read_meta

            parsed, meta_lines, meta_problems = read_meta(meta_path, limits)
            meta = parsed or {}
        if not meta_path.exists():
            meta_path = None
        default_name: str | None = path.name
    elif path.is_file():
        pred_path = path
        default_name = None
    else:
        raise SearchTomeError(f"{path}: no such submission folder or run file")
    return SubmissionFiles(
        path, pred_path, meta, meta_path, meta_lines, meta_problems, default_name
    )


def upload_files(
    meta: bytes, predictions_name: str, predictions: bytes, *, limits: Limits = DEFAULT_LIMITS
) -> SubmissionFiles:
    """An uploaded submission held in memory: ``meta.json``'s bytes and the predictions file's.

    Problems name the files bare (``predictions.jsonl:3: ...``, ``meta.json: ...``); the run is
    named by ``meta.json``, else ``submission``.
    """
    from searchtome.submissions.meta import parse_meta

    parsed, meta_lines, meta_problems = parse_meta(META_FILE, meta, limits)
    source = InMemory(PurePosixPath(predictions_name), predictions)
    return SubmissionFiles(
        path=Path("submission"),
        predictions_path=source,
        meta=parsed or {},
        meta_path=Path(META_FILE),
        meta_lines=meta_lines,
        meta_problems=meta_problems,
        default_name="submission",
        in_memory=True,
    )


def refuse_outside_link(folder: Path, file: Path) -> None:
    """Raise when ``file`` inside ``folder`` is a link to somewhere outside the folder.

    A submission is the folder's own content: following a link out would let an upload read
    (and the leaderboard publish) any file the scoring machine can see.
    """
    if not file.is_symlink():
        return
    target = file.resolve()
    if not target.is_relative_to(folder.resolve()):
        raise SearchTomeError(
            f"{file}: a symbolic link to {target}, outside the submission folder; "
            "copy the file into the folder instead"
        )


def load_submission(
    path: PathLike,
    run_format: RunFormat = "auto",
    *,
    limits: Limits = DEFAULT_LIMITS,
    require_meta: bool = True,
) -> LoadedSubmission:
    """Read a submission folder or a bare predictions / TREC run file, collecting every problem."""
    files = open_submission(path, limits=limits, require_meta=require_meta)
    system = files.system
    preds = read_predictions(
        files.predictions_path, run_format, name=system or files.default_name, limits=limits
    )
    # Predictions problems first, then meta.json's; each kind capped (see ProblemLog).
    problems = ProblemLog(preds.problems, keep_per_kind=limits.max_problems_per_kind)
    problems.extend(files.meta_problems)
    problems.extend(files.name_warnings())
    name = preds.run.name
    meta = files.meta
    run = Run(name=name, rankings=preds.run.rankings, scores=preds.run.scores, meta=dict(meta))
    submission = Submission(system=name, run=run, meta=dict(meta), path=str(files.path))
    return LoadedSubmission(submission, preds, files.meta_path, files.meta_lines, problems)


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
        # Counted, not only kept: a file of 5,000 bad lines says 4,999 more, not 999.
        ignored = len(loaded.errors) - len(fatal)  # meta.json problems left to the validator
        n_fatal = sum(n for (sev, _), n in counts_of(loaded.problems).items() if sev == "error")
        n_fatal -= ignored
        more = (
            f" (and {n_fatal - 1:,} more problems; run `searchtome validate`)"
            if n_fatal > 1
            else ""
        )
        raise SearchTomeError(f"{fatal[0]}{more}")
    for p in loaded.problems:
        # Ties are the scorer's to report: only it knows which ones can change a measure.
        if p.severity == "warning" and p.code != "tied-scores":
            log.warning("%s", p)
    return loaded.submission
