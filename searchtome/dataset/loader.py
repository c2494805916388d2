"""Reading a dataset folder: the typed, read-only :class:`Dataset` and :func:`load`.

The files and their schemas are described in :mod:`searchtome.dataset.layout`; ``hf://`` sources
are downloaded by :mod:`searchtome.dataset.hub` first and then read like any local folder.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from searchtome.dataset.layout import (
    BOOKS_FILE,
    CORPUS_FILE,
    MANIFEST_FILE,
    PARAGRAPHS_FILE,
    TOC_FILE,
    UNITS_FILE,
    BookInfo,
    qrels_file,
    queries_file,
)
from searchtome.dataset.manifest import DatasetManifest, read_manifest
from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import PathLike, read_parquet
from searchtome.records import SPLITS, Book, Leaf, Paragraph, Qrel, Query, TocNode, Unit


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
    manifest: DatasetManifest = field(default_factory=DatasetManifest.missing)

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

    def held_back(self, split: str) -> bool:
        """Whether ``split``'s gold is held back: the public half of a blind release.

        Its queries are here with an empty ``leaf_id``; the gold is in the private half.
        """
        return split == self.manifest.blind_split and any(
            not q.leaf_id for q in self.queries(split)
        )

    def check_gold(self, split: str) -> None:
        """Raise :class:`SearchTomeError` when ``split``'s gold is held back (:meth:`held_back`)."""
        if self.held_back(split):
            raise SearchTomeError(
                f"{self.root}: the {split} split of this blind release has no gold here (it is "
                "held back in the release's private half); score against the private half with "
                f"`searchtome score RUN --qrels PRIVATE --split {split}` or on the scoring service"
            )

    def qrels(self, split: str) -> list[Qrel]:
        """The gold leaf of every query of ``split``; refused where the gold is held back."""
        self.check_gold(split)
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


def open_dataset(source: PathLike | Dataset) -> Dataset:
    """A loaded dataset as it is; otherwise :func:`load` it, reading a bare ``ORG/NAME`` that
    is not a local folder as a Hub id (how the MTEB and ir_datasets bridges name datasets)."""
    if isinstance(source, Dataset):
        return source
    text = str(source)
    if not text.startswith("hf://") and not Path(text).exists() and text.count("/") == 1:
        text = "hf://" + text
    return load(text)


def load(source: PathLike) -> Dataset:
    """Open a dataset: a local folder, or ``hf://ORG/NAME[@REVISION]`` on the Hugging Face Hub."""
    text = str(source)
    if text.startswith("hf://"):
        from searchtome.dataset.hub import download_dataset  # huggingface_hub only when needed

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
    has_manifest = (root / MANIFEST_FILE).exists()
    manifest = read_manifest(root / MANIFEST_FILE) if has_manifest else DatasetManifest.missing()
    queries = _read_queries(root, manifest.blind_split)
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


def _read_queries(root: Path, blind: str | None) -> list[Query]:
    """Every split's queries with their gold leaf (``""`` for the held-back ``blind`` split)."""
    queries: list[Query] = []
    for split in SPLITS:
        qpath, rpath = root / queries_file(split), root / qrels_file(split)
        if not qpath.exists():
            continue
        gold: dict[str, str] = {}
        # A blind release holds its blind split's qrels back: those queries have no gold ("").
        for r in read_parquet(rpath) if split != blind or rpath.exists() else []:
            if r["score"] > 0:
                gold[r["query-id"]] = r["corpus-id"]
        for r in read_parquet(qpath):
            if split != blind and r["query_id"] not in gold:
                raise SearchTomeError(f"{rpath}: no relevant leaf for query {r['query_id']!r}")
            queries.append(
                Query(
                    query_id=r["query_id"],
                    book_id=r["book_id"],
                    text=r["text"],
                    leaf_id=gold.get(r["query_id"], ""),
                    split=split,
                    unit_id=r.get("unit_id"),
                    model_generated=bool(r.get("model_generated", True)),
                )
            )
    return queries
