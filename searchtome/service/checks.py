"""An upload checked by the project's validator, its first error as one line, and its scores.

Two checks, one cheap and one full. Web processes run :func:`quick_check` before the 202: the
``meta.json`` checks and the first line of the predictions (a JSON object of the right fields,
or a TREC line), what a wrong file or a wrong format shows at once. Scoring workers validate
the whole upload once, in memory (:func:`validate`), against the public half with the private
gold put back, and score it. Per-query values are packed for the database, in the order of the
sorted query ids, and never leave the server.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from searchtome.dataset.loader import Dataset
from searchtome.leaderboard.results import MAIN_MEASURES
from searchtome.leaderboard.scoring import score_runs
from searchtome.metrics.structure import STRUCTURE_MEASURES
from searchtome.submissions import Limits, ValidationReport
from searchtome.submissions.jsonl import LineParser
from searchtome.submissions.meta import parse_run_meta
from searchtome.submissions.problems import Problem, ProblemLog
from searchtome.submissions.reader import upload_files
from searchtome.submissions.schema import PREDICTION_FILES
from searchtome.submissions.validate import validate_upload

log = logging.getLogger(__name__)
FOLDER = "submission"
STORED_MEASURES = (*MAIN_MEASURES, *STRUCTURE_MEASURES)


def predictions_name(filename: str | None, head: bytes) -> str:
    """The file name the upload is stored under: the client's if it is a known one."""
    name = Path(filename or "").name
    if name in PREDICTION_FILES:
        return name
    return "predictions.jsonl.gz" if head[:2] == b"\x1f\x8b" else "predictions.jsonl"


def first_error(report: ValidationReport) -> str | None:
    """The validator's first error as one line, with how many more there were."""
    errors = report.errors
    if not errors:
        return None
    return _one_line(errors[0], report.error_count - 1)


def _one_line(problem: Problem, more: int) -> str:
    line = " ".join(str(problem).split())
    return f"{line} (and {more} more error{'s' if more > 1 else ''})" if more > 0 else line


def validate(
    meta: bytes, name: str, predictions: bytes, dataset: Dataset, split: str, limits: Limits
) -> tuple[ValidationReport, str | None]:
    """The whole upload validated in memory: the report and its first error as one line."""
    try:
        report = validate_upload(meta, name, predictions, dataset, split, limits=limits)
    except (RecursionError, OverflowError, ValueError, TypeError, MemoryError) as exc:
        # Content the validator did not expect (deep nesting, 10**400 as a score: the
        # hostile-inputs issue) is refused here, and the process goes on serving.
        log.warning("validator raised on an upload: %r", exc)
        return ValidationReport(Path(FOLDER), "unnamed", split, "jsonl", []), _unexpected(exc)
    return report, first_error(report)


def _unexpected(exc: BaseException) -> str:
    kind = "JSON nested too deeply" if isinstance(exc, RecursionError) else "unreadable value"
    return (
        f"{FOLDER}: {kind} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
        "predictions are flat objects of strings and finite numbers (docs/submissions.md)"
    )


def quick_check(meta: bytes, name: str, predictions: bytes, limits: Limits) -> str | None:
    """What must be refused before the 202, cheaply: ``meta.json``, and the predictions' first
    non-blank line (one line of the size cap at most is decompressed). ``None`` when both pass;
    the rest of the file is the scoring worker's to validate."""
    files = upload_files(meta, name, b"", limits=limits)
    errors = [p for p in files.meta_problems if p.severity == "error"]
    if errors:
        return _one_line(errors[0], len(errors) - 1)
    if not predictions:
        return f"{name}: empty file; one line per test query is expected (docs/submissions.md)"
    if len(predictions) > limits.max_file_bytes:
        return (
            f"{name}: {len(predictions):,} bytes exceeds the {limits.max_file_bytes:,}-byte limit"
        )
    try:
        return _first_line_problem(name, predictions, limits)
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:
        return _unexpected(exc)


def _first_line_problem(name: str, predictions: bytes, limits: Limits) -> str | None:
    raw: Any = io.BytesIO(predictions)
    if predictions[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=raw, mode="rb")
    cap = limits.max_line_bytes
    for lineno in range(1, 101):  # blank lines first are allowed; a hundred of them are not
        try:
            chunk = raw.readline(cap + 1)
        except (OSError, EOFError, zlib.error) as exc:
            return f"{name}: corrupt compressed data ({exc})"
        if not chunk:
            return f"{name}: no predictions; one line per test query is expected"
        if len(chunk) > cap:
            return f"{name}:{lineno}: line: longer than the {cap:,}-byte limit"
        try:
            text = chunk.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            return f"{name}:{lineno}: encoding: not valid UTF-8 (byte {exc.start + 1})"
        if text.strip():
            return _line_problem(name, lineno, text)
    return f"{name}: starts with 100 blank lines; one line per test query is expected"


def _line_problem(name: str, lineno: int, text: str) -> str | None:
    stripped = text.strip()
    if not stripped.startswith("{") and len(stripped.split()) == 6:
        return None  # a TREC line: the worker's reader checks it with the rest
    problems = ProblemLog()
    LineParser(name, problems).check_line(lineno, text)
    errors = [p for p in problems if p.severity == "error"]
    return _one_line(errors[0], len(errors) - 1) if errors else None


def pack_scores(report: ValidationReport, dataset: Dataset, split: str) -> bytes:
    """Per-query values of the stored measures, in sorted query-id order, as ``.npz`` bytes."""
    assert report.submission is not None
    board = score_runs([report.submission], data=dataset, split=split, measures=MAIN_MEASURES)
    system = board.systems[0]
    order = np.argsort(np.asarray(board.query_ids, dtype=object), kind="stable")
    arrays: dict[str, Any] = {m: system.per_query[m][order] for m in STORED_MEASURES}
    arrays["answered"] = system.answered[order]
    arrays["query_ids"] = np.asarray(board.query_ids, dtype=str)[order]
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def unpack_scores(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def system_name(meta: bytes) -> str:
    """The system an uploaded ``meta.json`` names, ``unnamed`` when it names none."""
    try:
        raw = json.loads(meta)
    except (ValueError, RecursionError):
        return "unnamed"
    return (parse_run_meta(raw).system if isinstance(raw, dict) else None) or "unnamed"
