"""An upload checked by the project's validator, its first error as one line, and its scores.

Web processes validate against the public half (query ids, books and ToC: everything the
validator needs, no gold); scoring workers validate again and score against the public half
with the private gold put back. Per-query values are packed for the database, in the order of
the sorted query ids, and never leave the server.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from searchtome.dataset.loader import Dataset
from searchtome.leaderboard.results import MAIN_MEASURES
from searchtome.leaderboard.scoring import score_runs
from searchtome.metrics.structure import STRUCTURE_MEASURES
from searchtome.submissions import Limits, ValidationReport, validate_submission
from searchtome.submissions.meta import parse_run_meta
from searchtome.submissions.schema import META_FILE, PREDICTION_FILES

log = logging.getLogger(__name__)
FOLDER = "submission"
STORED_MEASURES = (*MAIN_MEASURES, *STRUCTURE_MEASURES)


def predictions_name(filename: str | None, head: bytes) -> str:
    """The file name the upload is stored under: the client's if it is a known one."""
    name = Path(filename or "").name
    if name in PREDICTION_FILES:
        return name
    return "predictions.jsonl.gz" if head[:2] == b"\x1f\x8b" else "predictions.jsonl"


@contextmanager
def submission_folder(
    meta: bytes, name: str, predictions: Path | bytes, scratch: Path | None = None
) -> Iterator[Path]:
    """A temporary submission folder holding ``meta.json`` and the predictions file."""
    tmp = Path(tempfile.mkdtemp(prefix="upload-", dir=scratch))
    try:
        folder = tmp / FOLDER
        folder.mkdir()
        (folder / META_FILE).write_bytes(meta)
        target = folder / name
        if isinstance(predictions, bytes):
            target.write_bytes(predictions)
        else:
            shutil.move(predictions, target)
        yield folder
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def first_error(report: ValidationReport, folder: Path) -> str | None:
    """The validator's first error as one line, the temporary folder left out of its path."""
    errors = report.errors
    if not errors:
        return None
    line = str(errors[0]).replace(f"{folder}/", "").replace(str(folder), FOLDER)
    line = " ".join(line.split())
    more = len(errors) - 1
    return f"{line} (and {more} more error{'s' if more > 1 else ''})" if more else line


def validate(
    folder: Path, dataset: Dataset, split: str, limits: Limits
) -> tuple[ValidationReport, str | None]:
    try:
        report = validate_submission(folder, dataset, split, limits=limits)
    except (RecursionError, OverflowError, ValueError, TypeError, MemoryError) as exc:
        # Content the validator did not expect (deep nesting, 10**400 as a score: the
        # hostile-inputs issue) is refused here, and the process goes on serving.
        log.warning("validator raised on an upload: %r", exc)
        kind = "JSON nested too deeply" if isinstance(exc, RecursionError) else "unreadable value"
        return ValidationReport(folder, "unnamed", split, "jsonl", []), (
            f"{FOLDER}: {kind} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
            "predictions are flat objects of strings and finite numbers (docs/submissions.md)"
        )
    return report, first_error(report, folder)


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
