"""The on-disk dataset layout and the typed object that reads it.

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
fixed parquet settings, so the same records always give the same bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, read_json, read_parquet, sha256_file, write_json, write_parquet
from searchtome.records import SPLITS, Book, Leaf, Paragraph, Qrel, Query, TocNode, Unit

FORMAT_VERSION = "searchtome-dataset-v1"

CORPUS_FILE = "corpus.parquet"
BOOKS_FILE = "books.parquet"
TOC_FILE = "toc.parquet"
PARAGRAPHS_FILE = "paragraphs.parquet"
UNITS_FILE = "units.parquet"
MANIFEST_FILE = "manifest.json"
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
    (:func:`write_manifest`, ``searchtome.dataset.card``) because they depend on build settings.
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

    leaf_ids = {leaf.leaf_id for leaf in leaves}
    seen: set[str] = set()
    for q in queries:
        if q.book_id not in info:
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

    written = [
        write_parquet(
            out / CORPUS_FILE,
            [
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
            ],
            schemas["corpus"],
        )
    ]
    by_split: dict[str, list[Query]] = {s: [] for s in SPLITS}
    for q in queries:
        by_split[q.split].append(q)
    for split, rows in by_split.items():
        written.append(
            write_parquet(
                out / queries_file(split),
                [
                    {
                        "query_id": q.query_id,
                        "book_id": q.book_id,
                        "domain": domain[q.book_id],
                        "text": q.text,
                        "unit_id": q.unit_id,
                        "model_generated": q.model_generated,
                    }
                    for q in rows
                ],
                schemas["queries"],
            )
        )
        written.append(
            write_parquet(
                out / qrels_file(split),
                [{"query-id": q.query_id, "corpus-id": q.leaf_id, "score": 1} for q in rows],
                schemas["qrels"],
            )
        )

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
    book_rows = []
    for bid in sorted(info):
        b = info[bid]
        row = b.book.to_dict()
        row.update(n_pages=b.n_pages, toc_source=b.toc_source)
        for key in (
            "n_nodes",
            "n_leaves",
            "n_paragraphs",
            "n_units",
            "n_queries_train",
            "n_queries_dev",
            "n_queries_test",
        ):
            row[key] = counts[bid][key]
        book_rows.append(row)
    written.append(write_parquet(out / BOOKS_FILE, book_rows, schemas["books"]))
    written.append(
        write_parquet(
            out / TOC_FILE,
            [
                {
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
                for n in toc
            ],
            schemas["toc"],
        )
    )
    written.append(
        write_parquet(
            out / PARAGRAPHS_FILE,
            [
                {
                    "paragraph_id": p.paragraph_id,
                    "leaf_id": p.leaf_id,
                    "book_id": p.leaf_id.split("/", 1)[0],
                    "text": p.text,
                    "page": p.page,
                }
                for p in paragraphs
            ],
            schemas["paragraphs"],
        )
    )
    written.append(
        write_parquet(
            out / UNITS_FILE,
            [
                {
                    "unit_id": u.unit_id,
                    "leaf_id": u.leaf_id,
                    "book_id": u.book_id,
                    "paragraph_ids": list(u.paragraph_ids),
                    "text": u.text,
                }
                for u in units
            ],
            schemas["units"],
        )
    )
    return written


def file_hashes(out_dir: PathLike) -> dict[str, dict[str, Any]]:
    """``{relative path: {"sha256", "bytes"}}`` for every file except the manifest itself."""
    out = Path(out_dir)
    result = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if rel == MANIFEST_FILE or any(part.startswith(".") for part in Path(rel).parts):
            continue
        result[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return result


def write_manifest(out_dir: PathLike, info: Mapping[str, Any]) -> Path:
    """``manifest.json``: the given build information plus the hash of every other file."""
    manifest = {"format": FORMAT_VERSION, **info, "files": file_hashes(out_dir)}
    return write_json(Path(out_dir) / MANIFEST_FILE, manifest)


def diff_hashes(
    expected: Mapping[str, Mapping[str, Any]],
    actual: Mapping[str, Mapping[str, Any]],
    *,
    missing: str = "listed in the manifest but missing",
    extra: str = "present but not in the manifest",
    changed: str = "SHA-256 differs from the manifest",
) -> list[str]:
    """``path: problem`` for every file whose presence or SHA-256 differs between two listings."""
    problems = []
    for rel in sorted(set(expected) | set(actual)):
        if rel not in actual:
            problems.append(f"{rel}: {missing}")
        elif rel not in expected:
            problems.append(f"{rel}: {extra}")
        elif expected[rel]["sha256"] != actual[rel]["sha256"]:
            problems.append(f"{rel}: {changed}")
    return problems


def verify_manifest(out_dir: PathLike) -> list[str]:
    """Differences between the files on disk and ``manifest.json`` (empty when they agree)."""
    out = Path(out_dir)
    return diff_hashes(read_json(out / MANIFEST_FILE).get("files", {}), file_hashes(out))


@dataclass
class Dataset:
    """Typed, read-only access to a dataset folder (see :func:`load`)."""

    root: Path
    books: dict[str, BookInfo]
    _toc: list[TocNode]
    _leaves: list[Leaf]
    _queries: list[Query]
    _paragraphs: list[Paragraph] = field(default_factory=list)
    _units: list[Unit] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)

    # -- books and structure -------------------------------------------------------------------
    def book_ids(self) -> list[str]:
        return sorted(self.books)

    def domain(self, book_id: str) -> str:
        return self.books[book_id].book.domain

    def toc(self, book_id: str) -> list[TocNode]:
        """Every ToC node of a book in document order."""
        return self._toc_by_book.get(book_id, [])

    @cached_property
    def _toc_by_book(self) -> dict[str, list[TocNode]]:
        out: dict[str, list[TocNode]] = defaultdict(list)
        for node in self._toc:
            out[node.book_id].append(node)
        return dict(out)

    @cached_property
    def nodes(self) -> dict[str, TocNode]:
        return {n.node_id: n for n in self._toc}

    def leaves(self, book_id: str | None = None) -> list[Leaf]:
        """Retrieval targets in document order, for one book or all."""
        if book_id is None:
            return list(self._leaves)
        return self._leaves_by_book.get(book_id, [])

    @cached_property
    def _leaves_by_book(self) -> dict[str, list[Leaf]]:
        out: dict[str, list[Leaf]] = defaultdict(list)
        for leaf in self._leaves:
            out[leaf.book_id].append(leaf)
        return dict(out)

    @cached_property
    def leaf_by_id(self) -> dict[str, Leaf]:
        return {x.leaf_id: x for x in self._leaves}

    def leaf(self, leaf_id: str) -> Leaf:
        try:
            return self.leaf_by_id[leaf_id]
        except KeyError:
            raise SearchTomeError(f"{self.root}: no leaf {leaf_id!r}") from None

    def paragraphs(self, leaf_id: str | None = None) -> list[Paragraph]:
        if leaf_id is None:
            return list(self._paragraphs)
        return [p for p in self._paragraphs if p.leaf_id == leaf_id]

    def units(self) -> list[Unit]:
        return list(self._units)

    # -- queries -------------------------------------------------------------------------------
    def queries(self, split: str, book_id: str | None = None) -> list[Query]:
        if split not in SPLITS:
            from searchtome.errors import unknown_name

            raise unknown_name("split", split, SPLITS)
        return [
            q
            for q in self._queries
            if q.split == split and (book_id is None or q.book_id == book_id)
        ]

    @cached_property
    def query_by_id(self) -> dict[str, Query]:
        return {q.query_id: q for q in self._queries}

    def gold(self, query_id: str) -> str:
        """The gold leaf id of a query."""
        return self.query_by_id[query_id].leaf_id

    def qrels(self, split: str) -> list[Qrel]:
        return [Qrel(q.query_id, q.leaf_id) for q in self.queries(split)]

    def training_questions(
        self, leaf_id: str | None = None, split: str = "train"
    ) -> dict[str, list[Query]]:
        """Training questions grouped by gold leaf (every leaf present, possibly with none)."""
        out: dict[str, list[Query]] = {x.leaf_id: [] for x in self._leaves}
        for q in self.queries(split):
            out.setdefault(q.leaf_id, []).append(q)
        if leaf_id is not None:
            return {leaf_id: out.get(leaf_id, [])}
        return out

    def __repr__(self) -> str:
        counts = ", ".join(f"{s}={len(self.queries(s))}" for s in SPLITS)
        return (
            f"Dataset({self.root}, books={len(self.books)}, leaves={len(self._leaves)}, {counts})"
        )


def load(source: PathLike) -> Dataset:
    """Open a dataset: a local folder, or ``hf://ORG/NAME[@REVISION]`` on the Hugging Face Hub."""
    text = str(source)
    if text.startswith("hf://"):
        from searchtome.dataset.publish import download_dataset

        return load(download_dataset(text))
    root = Path(source)
    if not (root / CORPUS_FILE).is_file():
        raise SearchTomeError(
            f"{root}: not a SearchTome dataset folder (no {CORPUS_FILE}); "
            "create one with `searchtome build` or `searchtome import repro`"
        )
    books = {}
    for row in read_parquet(root / BOOKS_FILE):
        book = Book.from_dict(row)
        books[book.book_id] = BookInfo(
            book=book, n_pages=row.get("n_pages"), toc_source=row.get("toc_source") or "outline"
        )
    toc = [TocNode.from_dict(r) for r in read_parquet(root / TOC_FILE)]
    leaves = [Leaf.from_dict(r) for r in read_parquet(root / CORPUS_FILE)]
    queries: list[Query] = []
    for split in SPLITS:
        qpath, rpath = root / queries_file(split), root / qrels_file(split)
        if not qpath.exists():
            continue
        gold: dict[str, str] = {}
        for r in read_parquet(rpath):
            if r["score"] > 0:
                gold[r["query-id"]] = r["corpus-id"]
        for r in read_parquet(qpath):
            queries.append(
                Query(
                    query_id=r["query_id"],
                    book_id=r["book_id"],
                    text=r["text"],
                    leaf_id=gold[r["query_id"]],
                    split=split,
                    unit_id=r.get("unit_id"),
                    model_generated=bool(r.get("model_generated", True)),
                )
            )
    paragraphs = (
        [Paragraph.from_dict(r) for r in read_parquet(root / PARAGRAPHS_FILE)]
        if (root / PARAGRAPHS_FILE).exists()
        else []
    )
    units = (
        [Unit.from_dict(r) for r in read_parquet(root / UNITS_FILE)]
        if (root / UNITS_FILE).exists()
        else []
    )
    manifest = read_json(root / MANIFEST_FILE) if (root / MANIFEST_FILE).exists() else {}
    return Dataset(
        root=root,
        books=books,
        _toc=toc,
        _leaves=leaves,
        _queries=queries,
        _paragraphs=paragraphs,
        _units=units,
        manifest=manifest,
    )
