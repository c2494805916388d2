"""Token budgets: what a reader of the ranked sections pays, counted with a declared tokenizer.

R@k counts a 13-token leaf and a 4,233-token one alike (the smallest and the largest of *The
Whole Child*); a reader who reads the returned
sections in rank order pays for each in tokens. ``InBudget@B`` and ``TokensToGold`` (their
formulas are in :mod:`searchtome.metrics.measures`) read the arrays built here: per query, the
rank of the gold leaf, the tokens read up to the end of it, and the tokens of the whole book.

**The tokenizer** (:data:`TOKENIZER`): a token is a maximal run of ASCII letters and digits, or
any other single character that is not ASCII whitespace. It is defined on code points alone, so
the counts are identical on every machine, Python and library version (no Unicode tables, no
model files); it needs nothing beyond the standard library, so scoring stays in the light core.
On the whole-child book it counts 1.17 tokens per whitespace-separated word
(``benchmarks/budget.py`` prints the figure).

**What each ranked id costs**: a leaf, the tokens of its section text; a ToC node with children,
the tokens of its whole subtree (its own introduction and every node below it: what a reader of
that section reads); an id that is no node of the query's book, 0 (there is nothing to read).
Every rank is paid for, in the submitted order (the tie rule: scores never re-sort), so an id
repeated in a ranking is paid for again (a valid submission repeats none).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from searchtome.metrics.family import Family

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset


@dataclass(frozen=True)
class Tokenizer:
    """A named, versioned token counter; its record goes into every score that uses it."""

    name: str
    pattern: str
    description: str
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    def count(self, text: str) -> int:
        return len(self._regex.findall(text))

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "pattern": self.pattern, "description": self.description}


TOKENIZER = Tokenizer(
    name="searchtome-words-1",
    pattern=r"[A-Za-z0-9]+|[^A-Za-z0-9 \t\n\r\f\v]",
    description="a maximal run of ASCII letters and digits, or any other single character "
    "that is not ASCII whitespace",
)


@dataclass(frozen=True)
class SectionTokens:
    """Tokens of every ToC node (a non-leaf: its whole subtree) and of every book."""

    node: Mapping[str, int]
    book: Mapping[str, int]
    node_book: Mapping[str, str]

    def cost(self, doc: str, book_id: str) -> int:
        """Tokens a reader pays for ``doc`` when answering a query on ``book_id`` (0: invalid)."""
        if self.node_book.get(doc) != book_id:
            return 0
        return self.node[doc]


def section_tokens(dataset: Dataset) -> SectionTokens:
    """The dataset's :class:`SectionTokens`, counted once and kept on the dataset object."""
    cached = getattr(dataset, "_section_tokens", None)
    if cached is None:
        cached = _count_sections(dataset)
        dataset._section_tokens = cached  # type: ignore[attr-defined]
    return cached


def _count_sections(dataset: Dataset) -> SectionTokens:
    count = TOKENIZER.count
    texts = {leaf.leaf_id: leaf.text for leaf in dataset.leaves()}
    nodes = dataset.nodes
    own = {nid: count(texts.get(nid, n.text)) for nid, n in nodes.items()}
    children: dict[str, list[str]] = defaultdict(list)
    for nid, n in nodes.items():
        if n.parent_id is not None and n.parent_id in nodes:
            children[n.parent_id].append(nid)
    # Deepest nodes first, so each child's subtree is complete before its parent adds it up.
    total = dict(own)
    for nid in sorted(nodes, key=lambda i: -nodes[i].level):
        total[nid] += sum(total[c] for c in children.get(nid, ()))
    book: dict[str, int] = defaultdict(int)
    for nid, n in nodes.items():
        book[n.book_id] += own[nid]
    # A leaf missing from the ToC still belongs to its book and costs its text.
    for leaf in dataset.leaves():
        if leaf.leaf_id not in nodes:
            total[leaf.leaf_id] = count(leaf.text)
            book[leaf.book_id] += total[leaf.leaf_id]
    node_book = {nid: n.book_id for nid, n in nodes.items()}
    node_book.update({x.leaf_id: x.book_id for x in dataset.leaves() if x.leaf_id not in nodes})
    return SectionTokens(total, dict(book), node_book)


@dataclass(frozen=True)
class Reading:
    """Per query: where the gold is ranked and what reading down to it costs."""

    rank: np.ndarray  # 1-based rank of the gold leaf; 0 = not in the ranking
    tokens: np.ndarray  # tokens read through the end of the gold section (0 for a miss)
    book: np.ndarray  # tokens of the query's whole book: the cap of a miss

    @property
    def n_queries(self) -> int:
        return self.rank.shape[0]

    def found(self, depth: int | None) -> np.ndarray:
        """Whether the gold lies within the first ``depth`` ranks (any rank when None)."""
        if depth is None:
            return self.rank > 0
        return (self.rank > 0) & (self.rank <= depth)


def reading(
    rankings: Mapping[str, Sequence[str]], dataset: Dataset, query_ids: Sequence[str]
) -> Reading:
    """The :class:`Reading` of one run's rankings (a query without one is a miss)."""
    tokens = section_tokens(dataset)
    queries = dataset.query_by_id
    n = len(query_ids)
    rank = np.zeros(n, dtype=np.int64)
    read = np.zeros(n, dtype=np.float64)
    book = np.zeros(n, dtype=np.float64)
    for i, qid in enumerate(query_ids):
        query = queries[qid]
        book[i] = tokens.book.get(query.book_id, 0)
        ranking = rankings.get(qid)
        if not ranking or query.leaf_id not in ranking:
            continue
        # index() runs at C speed; only the ids ranked down to the gold are priced.
        pos = ranking.index(query.leaf_id)
        rank[i] = pos + 1
        read[i] = sum(tokens.cost(doc, query.book_id) for doc in ranking[: pos + 1])
    return Reading(rank, read, book)


class BudgetFamily(Family):
    """A measure of what reading the ranking costs: computed from a :class:`Reading`, so only
    when a dataset (its section texts) is at hand. The order of the ranked ids matters."""

    needs_dataset = True
    order_sensitive = True

    def budget_values(self, read: Reading, cutoff: int | None) -> np.ndarray:
        """Per-query values, aligned with the rows of ``read``."""
        raise NotImplementedError
