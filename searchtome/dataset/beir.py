"""BEIR and TREC files from a SearchTome dataset.

BEIR (what ``beir.datasets.data_loader.GenericDataLoader`` reads)::

    OUT/pooled/corpus.jsonl          {"_id", "title", "text", "metadata": {...}} — every leaf
    OUT/pooled/queries.jsonl         {"_id", "text", "metadata": {...}} — every split
    OUT/pooled/queries.{split}.jsonl the same rows, one split only (not part of BEIR's layout)
    OUT/pooled/qrels/{split}.tsv     query-id <TAB> corpus-id <TAB> score, with that header
    OUT/{book_id}/...                the same, restricted to one book

SearchTome scores each query against its own book's leaves, so the per-book folders are the
benchmark; the pooled folder is one corpus for tools that want a single index (a harder task:
other books' leaves compete). The leaf title is the last ToC title; ``metadata.path`` holds the
full path. ``GenericDataLoader`` splits TSV rows on tabs and skips the first line, so ids with
tabs or line breaks are refused here (ours never have them).

TREC::

    OUT/{split}.qrels                qid 0 docno rel      (trec_eval / ir_measures / ranx)
    OUT/{split}.queries.tsv          qid <TAB> text
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from searchtome.dataset.loader import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.io import (
    PathLike,
    atomic_dir,
    atomic_write,
    commit_dir,
    read_json,
    write_json,
    write_jsonl,
)
from searchtome.records import SPLITS, Query

log = logging.getLogger(__name__)

POOLED = "pooled"
MARKER = "searchtome-export.json"


def check_id(item_id: str, what: str) -> str:
    if any(c in item_id for c in "\t\r\n"):
        raise SearchTomeError(
            f"{what} {item_id!r} contains a tab or line break; BEIR cannot hold it"
        )
    return item_id


def prepare_out(out: Path, fmt: str) -> Path:
    """A temporary folder that will replace ``out``; refuse to replace anything but an export."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        marker = out / MARKER
        if not marker.is_file() or read_json(marker).get("format") != fmt:
            raise SearchTomeError(
                f"{out}: exists and is not an earlier `searchtome export {fmt}` folder; "
                "choose an empty or new --out"
            )
    return atomic_dir(out)


@contextlib.contextmanager
def export_folder(out: Path, summary: dict[str, Any], ds: Dataset) -> Iterator[Path]:
    """A temporary folder to write an export of ``ds`` into. When the block ends it gets its
    marker (``summary`` and the dataset's source) and replaces ``out``; on any failure,
    Ctrl-C included, it is removed and ``out`` stays as it was."""
    tmp = prepare_out(out, summary["format"])
    try:
        yield tmp
        summary["source"] = source_info(ds)
        write_json(tmp / MARKER, summary)
        commit_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def selected_books(ds: Dataset, books: Sequence[str] | None) -> list[str]:
    if not books:
        return ds.book_ids()
    from searchtome.errors import unknown_name

    for b in books:
        if b not in ds.books:
            raise unknown_name("book", b, ds.book_ids())
    return sorted(set(books))


def _write_beir_folder(
    folder: Path, ds: Dataset, book_ids: Sequence[str], splits: Sequence[str]
) -> dict[str, Any]:
    leaves = [leaf for b in book_ids for leaf in ds.leaves(b)]
    write_jsonl(
        folder / "corpus.jsonl",
        (
            {
                "_id": check_id(leaf.leaf_id, "leaf id"),
                "title": leaf.title,
                "text": leaf.text,
                "metadata": {
                    "book_id": leaf.book_id,
                    "domain": ds.domain(leaf.book_id),
                    "path": list(leaf.path),
                    "page_start": leaf.page_start,
                    "page_end": leaf.page_end,
                },
            }
            for leaf in leaves
        ),
    )
    queries: list[Query] = [q for s in splits for b in book_ids for q in ds.queries(s, b)]
    write_jsonl(folder / "queries.jsonl", (_query_row(ds, q) for q in queries))
    counts = {}
    for split in splits:
        rows = [q for q in queries if q.split == split]
        # BEIR's one queries file holds every split; tools that iterate a split's queries
        # (ir_datasets, PyTerrier) need that split's alone.
        write_jsonl(folder / f"queries.{split}.jsonl", (_query_row(ds, q) for q in rows))
        with atomic_write(folder / "qrels" / f"{split}.tsv") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for q in rows:
                fh.write(f"{q.query_id}\t{q.leaf_id}\t1\n")
        counts[split] = len(rows)
    return {"corpus": len(leaves), "queries": counts}


def _query_row(ds: Dataset, q: Query) -> dict[str, Any]:
    return {
        "_id": check_id(q.query_id, "query id"),
        "text": q.text,
        "metadata": {
            "book_id": q.book_id,
            "domain": ds.domain(q.book_id),
            "split": q.split,
            "model_generated": q.model_generated,
        },
    }


def export_beir(
    data: PathLike | Dataset,
    out_dir: PathLike,
    *,
    books: Sequence[str] | None = None,
    splits: Sequence[str] = SPLITS,
    per_book: bool = True,
    pooled: bool = True,
) -> dict[str, Any]:
    """Write BEIR folders (per book and pooled) into ``out_dir``; return the counts written."""
    ds = data if isinstance(data, Dataset) else load(data)
    splits = check_splits(splits, ds)
    book_ids = selected_books(ds, books)
    if POOLED in book_ids and per_book:
        raise SearchTomeError(f"book id {POOLED!r} collides with the pooled folder's name")
    out = Path(out_dir)
    summary: dict[str, Any] = {"format": "beir", "splits": list(splits), "folders": {}}
    with export_folder(out, summary, ds) as tmp:
        if pooled:
            summary["folders"][POOLED] = _write_beir_folder(tmp / POOLED, ds, book_ids, splits)
        if per_book:
            for b in book_ids:
                summary["folders"][b] = _write_beir_folder(tmp / b, ds, [b], splits)
    log.info("wrote BEIR files for %d book(s) to %s", len(book_ids), out)
    return summary


def export_trec(
    data: PathLike | Dataset,
    out_dir: PathLike,
    *,
    books: Sequence[str] | None = None,
    splits: Sequence[str] = SPLITS,
) -> dict[str, Any]:
    """Write TREC qrels (``qid 0 docno rel``) and query TSVs per split into ``out_dir``."""
    ds = data if isinstance(data, Dataset) else load(data)
    splits = check_splits(splits, ds)
    book_ids = selected_books(ds, books)
    out = Path(out_dir)
    summary: dict[str, Any] = {"format": "trec", "splits": list(splits), "queries": {}}
    with export_folder(out, summary, ds) as tmp:
        for split in splits:
            rows = [q for b in book_ids for q in ds.queries(split, b)]
            _write_lines(
                tmp / f"{split}.qrels",
                (
                    f"{check_id(q.query_id, 'query id')} 0 {check_id(q.leaf_id, 'leaf id')} 1"
                    for q in rows
                ),
            )
            _write_lines(
                tmp / f"{split}.queries.tsv",
                (f"{q.query_id}\t{' '.join(q.text.split())}" for q in rows),
            )
            summary["queries"][split] = len(rows)
    return summary


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with atomic_write(path) as fh:
        for line in lines:
            fh.write(line + "\n")


def check_splits(splits: Sequence[str], ds: Dataset | None = None) -> list[str]:
    """``splits`` as a list; refused when one is unknown or, in ``ds``, has its gold held back
    (a blind release's public half: its qrels would name no leaf)."""
    from searchtome.errors import unknown_name

    for s in splits:
        if s not in SPLITS:
            raise unknown_name("split", s, SPLITS)
        if ds is not None and ds.held_back(s):
            others = ",".join(x for x in SPLITS if x != s and ds.queries(x))
            raise SearchTomeError(
                f"{ds.root}: the {s} split's gold is held back in this blind release, so its "
                f"qrels cannot be exported; leave it out (--splits {others})"
            )
    return list(splits)


def source_info(ds: Dataset) -> dict[str, Any]:
    """Which dataset the export came from (name and the manifest's own hash of its corpus)."""
    corpus = ds.manifest.files.get("corpus.parquet")
    return {
        "name": ds.manifest.name,
        "corpus_sha256": corpus.sha256 if corpus is not None else None,
        "books": ds.book_ids(),
    }
