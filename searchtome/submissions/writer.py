"""Writing submissions: predictions JSON lines, TREC run files, and whole submission folders.

Files are written atomically, and gzip output is reproducible (no time stamp, no file name), so
rewriting the same run gives the same bytes.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write
from searchtome.metrics.ties import order_by_score
from searchtome.runs import Run
from searchtome.submissions.meta import (
    RunMeta,
    check_meta,
    meta_dict,
    parse_run_meta,
    write_meta,
)
from searchtome.submissions.schema import MAX_IDS, META_FILE, PREDICTION_FILES

log = logging.getLogger(__name__)


def prediction_rows(run: Run, max_ids: int | None = MAX_IDS) -> list[dict[str, Any]]:
    """One predictions line per query, sorted by id; raises when the run breaks the format."""
    rows = []
    for qid in sorted(run.rankings):
        ranking = list(run.rankings[qid])
        if not isinstance(qid, str) or not qid:
            raise SearchTomeError(f"run {run.name}: query id {qid!r} is not a non-empty string")
        if max_ids is not None and len(ranking) > max_ids:
            raise SearchTomeError(
                f"run {run.name}: query {qid!r} has {len(ranking)} ids; a submission holds at most "
                f"{max_ids} (cut the ranking before writing)"
            )
        if len(set(ranking)) != len(ranking):
            raise SearchTomeError(f"run {run.name}: query {qid!r} lists an id twice")
        row: dict[str, Any] = {"query_id": qid, "leaf_ids": ranking}
        if run.scores is not None and qid in run.scores:
            values = [float(s) for s in run.scores[qid]]
            if len(values) != len(ranking):
                raise SearchTomeError(
                    f"run {run.name}: query {qid!r} has {len(values)} scores for {len(ranking)} ids"
                )
            if not all(math.isfinite(v) for v in values):
                raise SearchTomeError(f"run {run.name}: query {qid!r} has a non-finite score")
            row["scores"] = values
        rows.append(row)
    return rows


def write_predictions(path: PathLike, run: Run, max_ids: int | None = MAX_IDS) -> Path:
    """Write ``run`` as predictions JSON lines (``.gz`` compresses), queries sorted by id."""
    path = Path(path)
    rows = prediction_rows(run, max_ids)  # checked in full before anything is written
    if path.suffix == ".gz":
        with (
            atomic_write(path, "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
        ):
            for row in rows:
                gz.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    else:
        with atomic_write(path) as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def _trec_keeps_order(ranking: tuple[str, ...], given: tuple[float, ...] | None) -> bool:
    """Whether a TREC reader, sorting by score with ties by id descending, keeps this order."""
    if given is None:
        return False
    pairs = list(zip(ranking, (float(v) for v in given), strict=True))
    return order_by_score(pairs) == pairs


def rank_scored_queries(run: Run) -> list[str]:
    """Queries whose own scores cannot go into a TREC file (none, or ties in another order)."""
    scores = run.scores or {}
    return [
        q for q in sorted(run.rankings) if not _trec_keeps_order(run.rankings[q], scores.get(q))
    ]


def write_trec(path: PathLike, run: Run, tag: str | None = None) -> Path:
    """Write ``run`` as a TREC run file whose scores reproduce the run's order under any tool.

    A query keeps its own scores (written exactly: ``repr`` round-trips a float) when sorting
    them as trec_eval does — score descending, ties by id descending — gives the run's order;
    otherwise (no scores, or tied ids in another order) rank-derived scores ``n, n-1, ... 1``
    are written so that no tool can reorder its ids (:func:`rank_scored_queries` lists them).
    """
    tag = tag or run.name or "run"
    with atomic_write(path) as fh:
        for qid in sorted(run.rankings):
            ranking = tuple(run.rankings[qid])
            given = run.scores.get(qid) if run.scores else None
            own = _trec_keeps_order(ranking, given)
            for i, doc in enumerate(ranking):
                score = float(given[i]) if own and given is not None else float(len(ranking) - i)
                fh.write(f"{qid} Q0 {doc} {i + 1} {score!r} {tag}\n")
    return Path(path)


def write_submission(
    out_dir: PathLike,
    run: Run,
    meta: RunMeta | Mapping[str, Any],
    *,
    compress: bool = False,
) -> Path:
    """Write ``predictions.jsonl[.gz]`` and ``meta.json`` into ``out_dir``; return the folder.

    ``meta`` is checked first (required fields, types; see
    :data:`~searchtome.submissions.schema.META_REQUIRED`), so a bad call writes nothing. Each
    file is written atomically, predictions first and ``meta.json`` last (by
    :func:`~searchtome.submissions.meta.write_meta`, its one writer); a stale predictions file of
    the other compression is removed.
    """
    out = Path(out_dir)
    raw = meta_dict(meta)
    problems = check_meta(raw, f"{out / META_FILE}")
    if problems:
        raise SearchTomeError("; ".join(str(p) for p in problems))
    name = "predictions.jsonl.gz" if compress else "predictions.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    write_predictions(out / name, run)
    for other in PREDICTION_FILES:
        if other != name and (out / other).exists():
            (out / other).unlink()
    write_meta(out / META_FILE, raw)
    log.info("wrote submission %s (%d queries) to %s", parse_run_meta(raw).system, len(run), out)
    return out
