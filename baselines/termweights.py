"""Term-major BM25 weights: each term's per-document score computed once per index.

rank-bm25 (and the Lucene formula in :mod:`~searchtome.baselines.paper`) score a query by
building, for every query token, the term's frequency in every document and its BM25 weight
from scratch, then adding that row into the scores. Here every (term, document) weight is
computed once, with the same float64 expression, and a query adds the stored rows in its token
order: the same additions in the same order, so scores, rankings and ties are bit-identical.

Only the documents that hold a term are stored for it. A document without the term gets
``idf × 0.0 / norm`` = ±0.0 from rank-bm25, and adding ±0.0 to a sum that started at +0.0 never
changes it, so leaving those additions out is exact. It stops being exact when that division is
0/0 (``k1 = 0``, or ``b = 1`` and an empty document): the callers check :func:`positive` and keep
the reference arithmetic then. BM25+ adds ``idf × delta`` to every document without the term;
that per-term constant is kept (``absent``) and added as a whole row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TermCounts:
    """Term frequencies of a tokenised corpus, term-major (terms in first-appearance order)."""

    vocab: dict[str, int]
    lengths: np.ndarray  # tokens per document (int64)
    indptr: np.ndarray  # term t's documents are docs[indptr[t]:indptr[t + 1]], ascending
    docs: np.ndarray
    tf: np.ndarray  # the term's count in that document (int64)

    @property
    def size(self) -> int:
        return len(self.lengths)

    @property
    def df(self) -> np.ndarray:
        return np.diff(self.indptr)

    @property
    def terms(self) -> np.ndarray:
        """The term of every stored (term, document) entry."""
        return np.repeat(np.arange(len(self.vocab)), self.df)


def count_terms(tokens: Sequence[Sequence[str]]) -> TermCounts:
    # First-appearance order is the order rank-bm25's document-frequency dict is filled in, and
    # so the order its mean idf is summed in.
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(t, len(vocab)) for doc in tokens for t in doc]
    n = len(tokens)
    lengths = np.fromiter((len(d) for d in tokens), dtype=np.int64, count=n)
    key = np.asarray(ids, dtype=np.int64) * n + np.repeat(np.arange(n, dtype=np.int64), lengths)
    pairs, tf = np.unique(key, return_counts=True)
    terms, docs = np.divmod(pairs, n) if n else (pairs, pairs)
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=len(vocab)), out=indptr[1:])
    return TermCounts(vocab, lengths, indptr, docs, tf.astype(np.int64))


def df_table(size: int, fn: Callable[[int], float]) -> np.ndarray:
    """``fn(df)`` for every document frequency 0..size, in Python floats (``math.log`` is not
    always the same function as ``np.log``, and the reference uses ``math.log``)."""
    return np.array([fn(f) for f in range(size + 1)], dtype=np.float64)


def positive(values: np.ndarray) -> bool:
    """Whether every divisor is > 0, so that a document without the term adds exactly ±0.0."""
    return bool(np.all(values > 0))


class TermWeights:
    """Stored per-term rows; ``scores(tokens)`` adds them in token order into float64 zeros."""

    def __init__(self, counts: TermCounts, weights: np.ndarray, absent: np.ndarray | None = None):
        self.size = counts.size
        ptr = counts.indptr.tolist()
        # One dict look-up per query token: the term's documents and their weights (views).
        self._rows = {
            term: (counts.docs[ptr[t] : ptr[t + 1]], weights[ptr[t] : ptr[t + 1]])
            for term, t in counts.vocab.items()
        }
        self._absent = (
            None if absent is None else dict(zip(counts.vocab, absent.tolist(), strict=True))
        )

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(self.size)
        rows, absent = self._rows, self._absent
        for token in tokens:
            row = rows.get(token)
            if row is None:
                continue  # rank-bm25 adds idf 0 × 0.0 = 0.0 for an unknown token
            docs, weights = row
            if absent is None:
                out[docs] += weights  # docs are distinct: one addition per document
            else:
                full = np.full(self.size, absent[token])
                full[docs] = weights
                out += full
        return out


def okapi(counts: TermCounts, k1: float, b: float, epsilon: float) -> TermWeights | None:
    """rank-bm25's ``BM25Okapi``; None where the shortcut would not be exact."""
    n = counts.size
    df = counts.df
    idf = (
        df_table(n, lambda f: math.log(n - f + 0.5))[df]
        - df_table(n, lambda f: math.log(f + 0.5))[df]
    )
    idf_sum = 0.0
    for x in idf.tolist():  # one by one, in vocabulary order, as rank-bm25 sums them
        idf_sum += x
    eps = epsilon * (idf_sum / len(idf))
    idf[idf < 0] = eps
    norm = k1 * (1 - b + b * counts.lengths / (int(counts.lengths.sum()) / n))
    if not positive(norm):
        return None
    tf = counts.tf
    return TermWeights(counts, idf[counts.terms] * (tf * (k1 + 1) / (tf + norm[counts.docs])))


def bm25l(counts: TermCounts, k1: float, b: float, delta: float) -> TermWeights | None:
    """rank-bm25's ``BM25L``; None where the shortcut would not be exact."""
    n = counts.size
    df = counts.df
    idf = math.log(n + 1) - df_table(n, lambda f: math.log(f + 0.5))[df]
    base = 1 - b + b * counts.lengths / (int(counts.lengths.sum()) / n)
    if not positive(base) or k1 + 0.0 + delta == 0:
        return None
    tf = counts.tf
    ctd = tf / base[counts.docs]
    weights = idf[counts.terms] * tf * (k1 + 1) * (ctd + delta) / (k1 + ctd + delta)
    return TermWeights(counts, weights)


def bm25plus(counts: TermCounts, k1: float, b: float, delta: float) -> TermWeights | None:
    """rank-bm25's ``BM25Plus``; None where the shortcut would not be exact."""
    n = counts.size
    df = counts.df
    idf = df_table(n, lambda f: math.log((n + 1) / f) if f else 0.0)[df]
    norm = k1 * (1 - b + b * counts.lengths / (int(counts.lengths.sum()) / n))
    if not positive(norm):
        return None
    tf = counts.tf
    weights = idf[counts.terms] * (delta + (tf * (k1 + 1)) / (norm[counts.docs] + tf))
    return TermWeights(counts, weights, absent=idf * (delta + 0.0))
