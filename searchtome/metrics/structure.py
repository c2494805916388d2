"""Structural flags: does a ranking hold ids that are not leaves of the query's book?

Retrieval targets are the leaves of a book's table of contents. A submitted id is a ``leaf``, a
``non_leaf`` (a ToC node of the book that has children) or ``invalid`` (no node of that book).
``NonLeaf@k`` and ``Invalid@k`` flag, per query, such an id in the top k. They read the dataset's
ToC instead of relevance judgements, so they are scored only against a dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from searchtome.metrics.family import Family

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset
    from searchtome.records import TocNode


class NodeKind(StrEnum):
    """What a submitted id is in the query's book (:func:`classify`)."""

    LEAF = "leaf"
    NON_LEAF = "non_leaf"  # a ToC node of the book that has children
    INVALID = "invalid"  # no node of the book


# Bound once: classify runs for every submitted id, and a module global is read faster than
# an attribute of the enum class.
_LEAF, _NON_LEAF, _INVALID = NodeKind.LEAF, NodeKind.NON_LEAF, NodeKind.INVALID


def classify(doc: str, book_id: str, nodes: Mapping[str, TocNode]) -> NodeKind:
    """``leaf``, ``non_leaf`` (a ToC node of the book, not a leaf) or ``invalid`` (not in the book)."""
    node = nodes.get(doc)
    if node is None or node.book_id != book_id:
        return _INVALID
    return _LEAF if node.is_leaf else _NON_LEAF


class StructureFamily(Family):
    """A flag: 1 if an id of the flagged kind is among the top k, else 0."""

    kind: ClassVar[NodeKind]  # the kind of id it flags
    needs_dataset = True

    def flag(self, kinds: Sequence[NodeKind], cutoff: int) -> bool:
        return self.kind in kinds[:cutoff]


class NonLeaf(StructureFamily):
    """NonLeaf@k = 1 if a ToC node of the query's book that is not a leaf is in the top k, else 0."""

    name = "NonLeaf"
    aliases = ("nonleaf", "non_leaf")
    kind = NodeKind.NON_LEAF
    description = "non-leaf at {k}: a ToC node with children in the top {k}"


class Invalid(StructureFamily):
    """Invalid@k = 1 if an id that is no node of the query's book is in the top k, else 0."""

    name = "Invalid"
    aliases = ("invalid",)
    kind = NodeKind.INVALID
    description = "invalid at {k}: an id that is not in the book in the top {k}"


NON_LEAF = NonLeaf()
INVALID = Invalid()
STRUCTURE_FAMILIES: tuple[StructureFamily, ...] = (NON_LEAF, INVALID)
_FLAGS: tuple[tuple[StructureFamily, int], ...] = (
    (NON_LEAF, 1),
    (NON_LEAF, 3),
    (INVALID, 1),
    (INVALID, 3),
)
# The flags every dataset-backed score reports, in this order.
STRUCTURE_MEASURES: tuple[str, ...] = tuple(f"{f.name}@{k}" for f, k in _FLAGS)


def structure_flags(
    rankings: Mapping[str, Sequence[str]], dataset: Dataset, query_ids: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per-query 0/1 values of :data:`STRUCTURE_MEASURES` (0 for unanswered queries)."""
    nodes = dataset.nodes
    queries = dataset.query_by_id
    depth = max(k for _, k in _FLAGS)
    out = {name: np.zeros(len(query_ids)) for name in STRUCTURE_MEASURES}
    for i, qid in enumerate(query_ids):
        ranking = rankings.get(qid)
        if not ranking:
            continue
        book = queries[qid].book_id
        kinds = [classify(doc, book, nodes) for doc in ranking[:depth]]
        for (family, k), name in zip(_FLAGS, STRUCTURE_MEASURES, strict=True):
            out[name][i] = family.flag(kinds, k)
    return out
