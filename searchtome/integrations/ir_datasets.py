"""SearchTome in ir_datasets: ``register(path_or_hub_id)`` adds it to ``ir_datasets.load``.

Registered ids (``NAME`` is the manifest name without a leading ``searchtome-``)::

    searchtome/NAME                   docs only: every leaf of every book
    searchtome/NAME/SPLIT             docs, that split's queries and qrels (all books)
    searchtome/NAME/BOOK/SPLIT        one book's leaves, queries and qrels: the SearchTome task

Docs are ``SearchTomeDoc(doc_id, title, text, book_id)`` (the leaf's own ToC title), queries
``GenericQuery(query_id, text)``, qrels ``GenericQrel(query_id, doc_id, relevance=1)``. Everything
is served from the loaded dataset in memory; nothing is downloaded or cached by ir_datasets.
SearchTome ranks each query against its own book, so the per-book ids are the benchmark; the
all-books split ids are one pooled index (a harder task).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

try:
    import ir_datasets
    from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries, GenericQrel, GenericQuery
except ImportError as exc:
    raise ImportError(
        f"searchtome.ir_datasets needs ir_datasets ({exc}); "
        "install it with: pip install 'searchtome[ir_datasets]'"
    ) from exc

from searchtome.dataset.loader import Dataset, open_dataset
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.records import SPLITS, Leaf, Query

PREFIX = "searchtome"
# id -> the dataset folder it was registered from, so a second register() of it is a no-op.
_REGISTERED: dict[str, str] = {}


class SearchTomeDoc(NamedTuple):
    doc_id: str
    title: str
    text: str
    book_id: str

    def default_text(self) -> str:
        """Title and text, the way ir_datasets' own docs offer one text field."""
        return f"{self.title}\n{self.text}"


class LeafDocs(BaseDocs):
    def __init__(self, leaves: Sequence[Leaf]) -> None:
        self._docs = [SearchTomeDoc(x.leaf_id, x.title, x.text, x.book_id) for x in leaves]
        self._by_id = {d.doc_id: d for d in self._docs}

    def docs_iter(self) -> Iterator[SearchTomeDoc]:
        return iter(self._docs)

    def docs_count(self) -> int:
        return len(self._docs)

    def docs_cls(self) -> type:
        return SearchTomeDoc

    def docs_namespace(self) -> str:
        return PREFIX

    def docs_lang(self) -> str:
        return "en"

    def docs_store(self) -> LeafStore:
        return LeafStore(self._by_id)


class LeafStore:
    """The lookups ir_datasets' docstores offer (``get``, ``get_many``), over a dict."""

    def __init__(self, by_id: dict[str, SearchTomeDoc]) -> None:
        self._by_id = by_id

    def get(self, doc_id: str) -> SearchTomeDoc:
        return self._by_id[doc_id]

    def get_many(self, doc_ids: Sequence[str]) -> dict[str, SearchTomeDoc]:
        return {d: self._by_id[d] for d in doc_ids if d in self._by_id}

    def get_many_iter(self, doc_ids: Sequence[str]) -> Iterator[SearchTomeDoc]:
        return iter(self.get_many(doc_ids).values())


class SplitQueries(BaseQueries):
    def __init__(self, queries: Sequence[Query]) -> None:
        self._queries = [GenericQuery(q.query_id, q.text) for q in queries]

    def queries_iter(self) -> Iterator[GenericQuery]:
        return iter(self._queries)

    def queries_namespace(self) -> str:
        return PREFIX

    def queries_lang(self) -> str:
        return "en"


class SplitQrels(BaseQrels):
    def __init__(self, queries: Sequence[Query]) -> None:
        self._qrels = [GenericQrel(q.query_id, q.leaf_id, 1) for q in queries]

    def qrels_iter(self) -> Iterator[GenericQrel]:
        return iter(self._qrels)

    def qrels_defs(self) -> dict[int, str]:
        return {1: "the ToC leaf whose section answers the question"}


def dataset_name(ds: Dataset) -> str:
    name = str(ds.manifest.get("name") or ds.root.name)
    return name.removeprefix(f"{PREFIX}-")


def _add(dataset_id: str, root: str, *components: Any) -> None:
    if dataset_id in _REGISTERED:
        if _REGISTERED[dataset_id] != root:
            raise SearchTomeError(
                f"{root}: ir_datasets id {dataset_id!r} is already registered for "
                f"{_REGISTERED[dataset_id]}; pass name= to register this dataset under another"
            )
        return
    ir_datasets.registry.register(dataset_id, ir_datasets.Dataset(*components))
    _REGISTERED[dataset_id] = root


def register(
    source: PathLike | Dataset, *, name: str | None = None, splits: Sequence[str] = SPLITS
) -> list[str]:
    """Register a dataset folder, ``hf://`` id or bare ``ORG/NAME``; return the ids, sorted.

    Registering the same folder again is a no-op; another folder under a taken name is an error.
    """
    ds = open_dataset(source)
    base = f"{PREFIX}/{name or dataset_name(ds)}"
    root = str(Path(ds.root).resolve())
    every = LeafDocs(ds.leaves())
    ids = [base]
    _add(base, root, every)
    for split in splits:
        if split not in SPLITS:
            from searchtome.errors import unknown_name

            raise unknown_name("split", split, SPLITS)
        queries = ds.queries(split)
        _add(f"{base}/{split}", root, every, SplitQueries(queries), SplitQrels(queries))
        ids.append(f"{base}/{split}")
        for book in ds.book_ids():
            book_queries = ds.queries(split, book)
            book_id = f"{base}/{book}/{split}"
            docs = LeafDocs(ds.leaves(book))
            _add(book_id, root, docs, SplitQueries(book_queries), SplitQrels(book_queries))
            ids.append(book_id)
    return sorted(ids)
