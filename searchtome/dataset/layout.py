"""The on-disk dataset layout: file names, parquet schemas, writing, and the manifest.

A SearchTome dataset folder (what ``build`` and ``import repro`` write, what ``publish`` uploads)::

    DATA/
      README.md                 dataset card; its YAML ``configs`` make datasets.load_dataset work
      manifest.json             versions, settings and the SHA-256 of every other file
      corpus.parquet            config "corpus":  one row per ToC leaf (the retrieval targets)
      queries/{split}.parquet   config "queries": train / dev / test questions
      qrels/{split}.parquet     config "default": query-id, corpus-id, score (MTEB/BEIR names)
      books.parquet             config "books":   catalog entry, licence, restrictions, counts
      toc.parquet               config "toc":     every ToC node, leaf or not
      paragraphs.parquet        config "paragraphs": extracted paragraphs of every leaf
      units.parquet             config "units":   generation units (paragraph groups)

Rows are written in a fixed order (books by id, nodes in document order, queries by id) with
fixed parquet settings, so the same records always give the same bytes. Reading the folder back
is :mod:`searchtome.dataset.loader`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.dataset.manifest import FORMAT_VERSION as FORMAT_VERSION
from searchtome.dataset.manifest import MANIFEST_FILE as MANIFEST_FILE
from searchtome.dataset.manifest import diff_hashes as diff_hashes
from searchtome.dataset.manifest import file_hashes as file_hashes
from searchtome.dataset.manifest import verify_manifest as verify_manifest
from searchtome.dataset.manifest import write_manifest as write_manifest
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, write_parquet
from searchtome.records import SPLITS, Book, Leaf, Paragraph, Query, TocNode, Unit

# The manifest (its reader, writer and file hashes) is searchtome.dataset.manifest; the names
# stay importable from here, where callers have always found them.

CORPUS_FILE = "corpus.parquet"
BOOKS_FILE = "books.parquet"
TOC_FILE = "toc.parquet"
PARAGRAPHS_FILE = "paragraphs.parquet"
UNITS_FILE = "units.parquet"
CARD_FILE = "README.md"


def queries_file(split: str) -> str:
    return f"queries/{split}.parquet"


def qrels_file(split: str) -> str:
    return f"qrels/{split}.parquet"


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    s, i32, i64, f64, b = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()
    strs = pa.list_(pa.string())
    return {
        "corpus": pa.schema(
            [
                ("leaf_id", s),
                ("book_id", s),
                ("domain", s),
                ("path", strs),
                ("title", s),
                ("text", s),
                ("page_start", i32),
                ("page_end", i32),
            ]
        ),
        "queries": pa.schema(
            [
                ("query_id", s),
                ("book_id", s),
                ("domain", s),
                ("text", s),
                ("unit_id", s),
                ("model_generated", b),
            ]
        ),
        "qrels": pa.schema([("query-id", s), ("corpus-id", s), ("score", i32)]),
        "books": pa.schema(
            [
                ("book_id", s),
                ("domain", s),
                ("title", s),
                ("authors", strs),
                ("edition", s),
                ("publisher", s),
                ("landing_url", s),
                ("pdf_urls", strs),
                ("sha256", s),
                ("size", i64),
                ("license", s),
                ("license_url", s),
                ("restrictions", strs),
                ("notes", s),
                ("n_pages", i32),
                ("toc_source", s),
                ("n_nodes", i32),
                ("n_leaves", i32),
                ("n_paragraphs", i32),
                ("n_units", i32),
                ("n_queries_train", i32),
                ("n_queries_dev", i32),
                ("n_queries_test", i32),
            ]
        ),
        "toc": pa.schema(
            [
                ("node_id", s),
                ("book_id", s),
                ("parent_id", s),
                ("level", i32),
                ("title", s),
                ("path", strs),
                ("page", i32),
                ("is_leaf", b),
                ("y", f64),
                ("text", s),
            ]
        ),
        "paragraphs": pa.schema(
            [("paragraph_id", s), ("leaf_id", s), ("book_id", s), ("text", s), ("page", i32)]
        ),
        "units": pa.schema(
            [("unit_id", s), ("leaf_id", s), ("book_id", s), ("paragraph_ids", strs), ("text", s)]
        ),
    }


def schema(name: str) -> Any:
    """The pyarrow schema of one file kind: corpus, queries, qrels, books, toc, paragraphs, units."""
    return _schemas()[name]


BLIND_QUERY_COLUMNS = ("query_id", "book_id", "domain", "text")  # a blind split's public columns


def _ordinal_key(item_id: str) -> tuple[Any, ...]:
    """Natural document order for ``book/2.10.1`` style ids (2.10 after 2.9)."""
    book, _, rest = item_id.partition("/")
    head, _, tail = rest.partition("#")
    parts = tuple(int(p) for p in head.split(".") if p.isdigit())
    return (book, parts, len(tail), tail)


@dataclass(frozen=True)
class BookInfo:
    """A book as it appears inside a dataset: the catalog entry plus what extraction found."""

    book: Book
    n_pages: int | None = None
    toc_source: str = "outline"


def write_dataset(
    out_dir: PathLike,
    *,
    books: Sequence[BookInfo],
    toc: Iterable[TocNode],
    leaves: Iterable[Leaf],
    queries: Iterable[Query],
    paragraphs: Iterable[Paragraph] = (),
    units: Iterable[Unit] = (),
) -> list[Path]:
    """Write the parquet files of a dataset into ``out_dir``; return the paths written.

    Qrels are derived from each query's gold leaf. The card and manifest are written separately
    (:mod:`searchtome.dataset.manifest`, ``searchtome.dataset.card``) because they depend on
    build settings.
    """
    out = Path(out_dir)
    schemas = _schemas()
    info = {b.book.book_id: b for b in books}
    domain = {bid: b.book.domain for bid, b in info.items()}
    toc = sorted(toc, key=lambda n: _ordinal_key(n.node_id))
    leaves = sorted(leaves, key=lambda x: _ordinal_key(x.leaf_id))
    paragraphs = sorted(paragraphs, key=lambda p: _ordinal_key(p.paragraph_id))
    units = sorted(units, key=lambda u: _ordinal_key(u.unit_id))
    queries = sorted(queries, key=lambda q: (q.book_id, q.query_id))
    _check_queries(queries, set(info), {leaf.leaf_id for leaf in leaves})

    written = [write_parquet(out / CORPUS_FILE, _corpus_rows(leaves, domain), schemas["corpus"])]
    written += _write_splits(out, queries, domain, schemas)
    written += [
        write_parquet(
            out / BOOKS_FILE,
            _book_rows(info, toc, leaves, paragraphs, units, queries),
            schemas["books"],
        ),
        write_parquet(out / TOC_FILE, [_toc_row(n) for n in toc], schemas["toc"]),
        write_parquet(
            out / PARAGRAPHS_FILE, [_paragraph_row(p) for p in paragraphs], schemas["paragraphs"]
        ),
        write_parquet(out / UNITS_FILE, [_unit_row(u) for u in units], schemas["units"]),
    ]
    return written


def _check_queries(queries: Sequence[Query], book_ids: set[str], leaf_ids: set[str]) -> None:
    """Every query names a known book, split and leaf, and has a unique id no leaf can share."""
    seen: set[str] = set()
    for q in queries:
        if q.book_id not in book_ids:
            raise SearchTomeError(f"query {q.query_id}: book {q.book_id!r} is not among the books")
        if q.split not in SPLITS:
            raise SearchTomeError(f"query {q.query_id}: unknown split {q.split!r}")
        if q.leaf_id not in leaf_ids:
            raise SearchTomeError(f"query {q.query_id}: gold leaf {q.leaf_id!r} is not a leaf")
        if "/" in q.query_id or q.query_id in leaf_ids:
            raise SearchTomeError(
                f"query id {q.query_id!r} may not contain '/' (it could equal a leaf id)"
            )
        if q.query_id in seen:
            raise SearchTomeError(f"query id {q.query_id!r} occurs twice")
        seen.add(q.query_id)


def _corpus_rows(leaves: Sequence[Leaf], domain: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "leaf_id": x.leaf_id,
            "book_id": x.book_id,
            "domain": domain[x.book_id],
            "path": list(x.path),
            "title": x.title,
            "text": x.text,
            "page_start": x.page_start,
            "page_end": x.page_end,
        }
        for x in leaves
    ]


def _write_splits(
    out: Path, queries: Sequence[Query], domain: Mapping[str, str], schemas: Mapping[str, Any]
) -> list[Path]:
    """``queries/{split}.parquet`` and ``qrels/{split}.parquet`` for every split, empty or not."""
    by_split: dict[str, list[Query]] = {s: [] for s in SPLITS}
    for q in queries:
        by_split[q.split].append(q)
    written = []
    for split, rows in by_split.items():
        query_rows = [
            {
                "query_id": q.query_id,
                "book_id": q.book_id,
                "domain": domain[q.book_id],
                "text": q.text,
                "unit_id": q.unit_id,
                "model_generated": q.model_generated,
            }
            for q in rows
        ]
        qrel_rows = [{"query-id": q.query_id, "corpus-id": q.leaf_id, "score": 1} for q in rows]
        written.append(write_parquet(out / queries_file(split), query_rows, schemas["queries"]))
        written.append(write_parquet(out / qrels_file(split), qrel_rows, schemas["qrels"]))
    return written


_BOOK_COUNTS = (
    "n_nodes",
    "n_leaves",
    "n_paragraphs",
    "n_units",
    "n_queries_train",
    "n_queries_dev",
    "n_queries_test",
)


def _book_rows(
    info: Mapping[str, BookInfo],
    toc: Sequence[TocNode],
    leaves: Sequence[Leaf],
    paragraphs: Sequence[Paragraph],
    units: Sequence[Unit],
    queries: Sequence[Query],
) -> list[dict[str, Any]]:
    """One row per book (by id): the catalog entry, what extraction found, and the counts."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node in toc:
        counts[node.book_id]["n_nodes"] += 1
    for leaf in leaves:
        counts[leaf.book_id]["n_leaves"] += 1
    for p in paragraphs:
        counts[p.leaf_id.split("/", 1)[0]]["n_paragraphs"] += 1
    for u in units:
        counts[u.book_id]["n_units"] += 1
    for q in queries:
        counts[q.book_id][f"n_queries_{q.split}"] += 1
    rows = []
    for bid in sorted(info):
        b = info[bid]
        row = b.book.to_dict()
        row.update(n_pages=b.n_pages, toc_source=b.toc_source)
        for key in _BOOK_COUNTS:
            row[key] = counts[bid][key]
        rows.append(row)
    return rows


def _toc_row(n: TocNode) -> dict[str, Any]:
    return {
        "node_id": n.node_id,
        "book_id": n.book_id,
        "parent_id": n.parent_id,
        "level": n.level,
        "title": n.title,
        "path": list(n.path),
        "page": n.page,
        "is_leaf": n.is_leaf,
        "y": n.y,
        "text": n.text,
    }


def _paragraph_row(p: Paragraph) -> dict[str, Any]:
    return {
        "paragraph_id": p.paragraph_id,
        "leaf_id": p.leaf_id,
        "book_id": p.leaf_id.split("/", 1)[0],
        "text": p.text,
        "page": p.page,
    }


def _unit_row(u: Unit) -> dict[str, Any]:
    return {
        "unit_id": u.unit_id,
        "leaf_id": u.leaf_id,
        "book_id": u.book_id,
        "paragraph_ids": list(u.paragraph_ids),
        "text": u.text,
    }
