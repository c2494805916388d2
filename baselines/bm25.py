"""BM25 over each leaf's section text (rank-bm25), one index per book.

Documents are the ToC leaves of the query's book: the section text, optionally preceded by the
leaf's title path (``title="path"``) or its own title (``title="leaf"``). Documents and queries
go through the same :class:`~searchtome.baselines.text.Analyzer`. Leaves are ranked by score,
ties in document order; leaves scoring 0 (no query word at all) are left out, so a ranking holds
only leaves that match. Defaults were chosen on the dev split of *The Whole Child* by R@1
(``docs/baselines.md`` has the sweep).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from searchtome.baselines.registry import RunContext, register
from searchtome.baselines.termweights import (
    TermCounts,
    TermWeights,
    bm25l,
    bm25plus,
    count_terms,
    okapi,
)
from searchtome.baselines.text import Analyzer

from searchtome.errors import SearchTomeError
from searchtome.limits import MAX_IDS
from searchtome.records import Run
from searchtome.titles import title_path

log = logging.getLogger(__name__)

VARIANTS: tuple[str, ...] = ("okapi", "plus", "l")
TITLE_MODES: tuple[str, ...] = ("none", "leaf", "path")


@dataclass(frozen=True)
class BM25Config:
    k1: float = 1.2
    b: float = 0.3
    # BM25Okapi: floor for negative idf, as a fraction of the mean idf. BM25L/BM25+: delta.
    epsilon: float = 0.25
    delta: float = 0.5
    variant: str = "okapi"
    title: str = "path"
    lowercase: bool = True
    stopwords: str = "english"
    stemmer: str = "english"
    min_token_length: int = 2
    depth: int = MAX_IDS

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            from searchtome.errors import unknown_name

            raise unknown_name("BM25 variant", self.variant, VARIANTS)
        if self.title not in TITLE_MODES:
            from searchtome.errors import unknown_name

            raise unknown_name("title mode", self.title, TITLE_MODES)
        if not 1 <= self.depth <= MAX_IDS:
            raise SearchTomeError(f"depth must be between 1 and {MAX_IDS}, not {self.depth}")

    @property
    def analyzer(self) -> Analyzer:
        return Analyzer(
            lowercase=self.lowercase,
            stopwords=self.stopwords,
            stemmer=self.stemmer,
            min_length=self.min_token_length,
        )


def leaf_document(path: Sequence[str], title: str, text: str, mode: str) -> str:
    """The text indexed for one leaf under a ``title`` mode."""
    if mode == "path":
        return f"{title_path(path)}\n\n{text}"
    if mode == "leaf":
        return f"{title}\n\n{text}"
    return text


class BM25Index:
    """rank-bm25's scores of every document for a query, from weights stored per term.

    The weights are rank-bm25's own float64 expressions, computed once per index and added in
    query-token order (:mod:`~searchtome.baselines.termweights`), so scores equal rank-bm25's bit
    for bit; where that shortcut would not be exact (a zero length norm) rank-bm25 itself scores.
    """

    def __init__(self, docs: Sequence[str], config: BM25Config, analyzer: Analyzer | None = None):
        self.config = config
        self.analyzer = analyzer or config.analyzer
        tokens = self.analyzer.tokenize_many(docs)
        self.size = len(tokens)
        self._empty = all(not t for t in tokens)
        self._weights: TermWeights | None = None
        self._bm25: Any = None
        if self.size and not self._empty:
            self._weights = _term_weights(count_terms(tokens), config)
            if self._weights is None:
                self._bm25 = _rank_bm25(tokens, config)

    def scores(self, query: str) -> np.ndarray:
        if self._weights is None and self._bm25 is None:
            return np.zeros(self.size)
        terms = self.analyzer.tokenize(query)
        if not terms:
            return np.zeros(self.size)
        if self._weights is not None:
            return self._weights.scores(terms)
        return np.asarray(self._bm25.get_scores(terms), dtype=np.float64)


def _term_weights(counts: TermCounts, config: BM25Config) -> TermWeights | None:
    if config.variant == "okapi":
        return okapi(counts, config.k1, config.b, config.epsilon)
    if config.variant == "plus":
        return bm25plus(counts, config.k1, config.b, config.delta)
    return bm25l(counts, config.k1, config.b, config.delta)


def _rank_bm25(tokens: list[list[str]], config: BM25Config) -> Any:
    from rank_bm25 import BM25L, BM25Okapi, BM25Plus

    if config.variant == "okapi":
        return BM25Okapi(tokens, k1=config.k1, b=config.b, epsilon=config.epsilon)
    if config.variant == "plus":
        return BM25Plus(tokens, k1=config.k1, b=config.b, delta=config.delta)
    return BM25L(tokens, k1=config.k1, b=config.b, delta=config.delta)


def rank_desc(scores: np.ndarray) -> np.ndarray:
    """Indices by score descending, ties by position (document order)."""
    return np.lexsort((np.arange(len(scores)), -scores))


@register(
    "bm25",
    summary="BM25 (rank-bm25) over each leaf's section text with its title path; one index per book",
    config=BM25Config,
)
def run_bm25(dataset: Any, split: str, config: BM25Config, ctx: RunContext) -> Run:
    from searchtome.settings import progress

    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    analyzer = config.analyzer
    for book_id in dataset.book_ids():
        queries = dataset.queries(split, book_id)
        if not queries:
            continue
        leaves = dataset.leaves(book_id)
        index = BM25Index(
            [leaf_document(x.path, x.title, x.text, config.title) for x in leaves], config, analyzer
        )
        for q in progress(queries, desc=f"bm25 {book_id}", unit="query"):
            s = index.scores(q.text)
            order = [i for i in rank_desc(s)[: config.depth] if s[i] > 0]
            rankings[q.query_id] = tuple(leaves[i].leaf_id for i in order)
            scores[q.query_id] = tuple(float(s[i]) for i in order)
    ctx.record(tokenizer=str(analyzer))
    return Run(name="bm25", rankings=rankings, scores=scores)


@dataclass(frozen=True)
class BM25PlainConfig(BM25Config):
    """The independent reproduction's BM25: rank-bm25's own defaults (BM25Okapi, k1 1.5, b 0.75,
    epsilon 0.25), lower-cased word tokens of any length, no stopwords, no stemming, the section
    text alone. Its tokens were ``\\b\\w+\\b`` of ``text.lower()``; ours (``[^\\W_]+`` after NFKC
    and casefold) differ only on underscores and on characters that NFKC or casefold change."""

    k1: float = 1.5
    b: float = 0.75
    title: str = "none"
    stopwords: str = "none"
    stemmer: str = "none"
    min_token_length: int = 1


@register(
    "bm25-plain",
    summary="BM25 as the independent reproduction ran it: rank-bm25 defaults, lower-cased words, "
    "section text only (no title, stopwords or stemming)",
    config=BM25PlainConfig,
)
def run_bm25_plain(dataset: Any, split: str, config: BM25PlainConfig, ctx: RunContext) -> Run:
    return replace(run_bm25(dataset, split, config, ctx), name="bm25-plain")
