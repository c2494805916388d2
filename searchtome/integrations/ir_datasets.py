"""SearchTome in ir_datasets: ``register(path_or_hub_id)`` adds it to ``ir_datasets.load``.

Registered ids (``NAME`` is the manifest name without a leading ``searchtome-``)::

    searchtome/NAME                   docs only: every leaf of every book
    searchtome/NAME/SPLIT             those docs, that split's queries and qrels (all books)
    searchtome/NAME/BOOK              docs only: one book's leaves (that book's corpus)
    searchtome/NAME/BOOK/SPLIT        those docs, the split's queries and qrels: the SearchTome task

As in ir_datasets' own collections (``msmarco-passage`` and ``msmarco-passage/dev``), a
corpus is one docs object with one ``docs_namespace`` shared by the ids built on it, so a tool
that indexes per corpus (PyTerrier, an ir_datasets docstore) indexes each book once for all its
splits. ``docs_iter()`` slices as ir_datasets' iterators do (``docs_iter()[:3]``,
``[10:20:2]``, fractions such as ``[0:1/3]`` for sharding); ``docs_count()``,
``queries_count()`` and ``qrels_count()`` answer without iterating.

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


class SliceIter:
    """An iterator over a list that slices like ir_datasets' own document iterators.

    ``it[a:b:c]`` (ints, negative ints, or floats in [0, 1] as fractions of what is left) is
    another such iterator, ``it[i]`` one item; the bounds follow ir_datasets'
    ``apply_sub_slice``/``slice_idx``, relative to what has not been consumed yet.
    """

    def __init__(self, items: Sequence[Any], window: slice | None = None) -> None:
        self._items = items
        self._slice = window or slice(0, len(items), 1)

    def __iter__(self) -> SliceIter:
        return self

    def __next__(self) -> Any:
        start, stop, step = self._slice.start, self._slice.stop, self._slice.step or 1
        if start >= stop:
            raise StopIteration
        self._slice = slice(start + step, stop, step)
        return self._items[start]

    def __getitem__(self, key: slice | int) -> Any:
        from ir_datasets.util import apply_sub_slice, slice_idx

        if isinstance(key, slice):
            return SliceIter(self._items, apply_sub_slice(self._slice, key))
        if isinstance(key, int):
            window = slice_idx(self._slice, key)
            if not self._slice.start <= window.start < window.stop:
                raise IndexError(f"document index {key} out of range")
            return self._items[window.start]
        raise TypeError("key must be int or slice")


class LeafDocs(BaseDocs):
    """One corpus (a book's leaves, or every leaf); ``namespace`` names it for ir_datasets."""

    def __init__(self, leaves: Sequence[Leaf], namespace: str = PREFIX) -> None:
        self._docs = [SearchTomeDoc(x.leaf_id, x.title, x.text, x.book_id) for x in leaves]
        self._by_id = {d.doc_id: d for d in self._docs}
        self._namespace = namespace

    def docs_iter(self) -> SliceIter:
        return SliceIter(self._docs)

    def docs_count(self) -> int:
        return len(self._docs)

    def docs_cls(self) -> type:
        return SearchTomeDoc

    def docs_namespace(self) -> str:
        return self._namespace

    def docs_lang(self) -> str:
        return "en"

    def docs_store(self) -> LeafStore:
        return LeafStore(self._by_id)


class LeafStore:
    """The lookups ir_datasets' docstores offer (``get``, ``get_many``), over a dict."""

    def __init__(self, by_id: dict[str, SearchTomeDoc]) -> None:
        self._by_id = by_id

    def __iter__(self) -> SliceIter:
        return SliceIter(list(self._by_id.values()))

    def count(self) -> int:
        return len(self._by_id)

    def built(self) -> bool:
        return True  # held in memory: nothing to build

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

    def queries_count(self) -> int:
        return len(self._queries)

    def queries_namespace(self) -> str:
        return PREFIX

    def queries_lang(self) -> str:
        return "en"


class SplitQrels(BaseQrels):
    """A split's qrels; on the held-back split of a blind release, registered but refused when
    read (its queries are there, its gold is not)."""

    def __init__(self, queries: Sequence[Query], ds: Dataset, split: str) -> None:
        self._qrels = [GenericQrel(q.query_id, q.leaf_id, 1) for q in queries]
        self._ds, self._split = ds, split

    def qrels_iter(self) -> Iterator[GenericQrel]:
        self._ds.check_gold(self._split)
        return iter(self._qrels)

    def qrels_count(self) -> int:
        self._ds.check_gold(self._split)
        return len(self._qrels)

    def qrels_defs(self) -> dict[int, str]:
        return {1: "the ToC leaf whose section answers the question"}


def dataset_name(ds: Dataset) -> str:
    name = str(ds.manifest.name or ds.root.name)
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
    for split in splits:
        if split not in SPLITS:
            from searchtome.errors import unknown_name

            raise unknown_name("split", split, SPLITS)
    # One docs object per corpus, shared by every split built on it.
    corpora = {base: LeafDocs(ds.leaves(), base)}
    corpora |= {f"{base}/{b}": LeafDocs(ds.leaves(b), f"{base}/{b}") for b in ds.book_ids()}
    ids = list(corpora)
    for corpus_id, docs in corpora.items():
        _add(corpus_id, root, docs)
        book = None if corpus_id == base else corpus_id.rsplit("/", 1)[1]
        for split in splits:
            queries = ds.queries(split, book) if book else ds.queries(split)
            _add(
                f"{corpus_id}/{split}",
                root,
                docs,
                SplitQueries(queries),
                SplitQrels(queries, ds, split),
            )
            ids.append(f"{corpus_id}/{split}")
    return sorted(ids)
