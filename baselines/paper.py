"""The STAIR paper's own BM25 and DPR recipes, beside our tuned ``bm25`` and ``dpr``.

The paper ran BM25 in Elasticsearch 8.11.2 with one document per leaf, and DPR as NV-Embed-v2
off the shelf with passages truncated to 512 tokens and queries to 256. These two baselines
follow those recipes so that a leaderboard row answers "what did the paper's baselines get
here", and the gap to ``bm25`` / ``dpr`` says what our tuned choices add.

``bm25-paper`` scores with Lucene 9's formula (Elasticsearch 8's engine) and its defaults, in
float64 where Lucene computes in float32 (so near-ties may order differently):

* the ``standard`` analyzer: Unicode word segmentation (UAX #29, as Lucene's
  ``StandardTokenizer``; the ``regex`` package's word boundaries implement the same rules), of
  which the segments with a letter or a ``Word_Break=Numeric`` digit are words and the emoji
  characters (``©``, ``®``, ``™`` among them) are tokens of their own, as Lucene's grammar has
  it (so ``½`` and ``²`` are dropped); tokens longer than 255 characters split, lower-cased; no
  stop words (``_none_`` by default since Elasticsearch 5) and no stemming;
* ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))`` over the book's leaves (one index per book, one shard);
* ``score = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with k1 1.2, b 0.75: Lucene
  dropped the constant ``(k1 + 1)`` numerator factor in 8.0 (LUCENE-8563), which changes no
  ranking;
* ``dl`` is the field length as Lucene stores it, one byte per document
  (``SmallFloat.intToByte4``: exact below 24 tokens, then 4 significant bits), while
  ``avgdl`` is the exact mean;
* a ``match`` query: the sum over the query's tokens (a repeated token counts again); leaves
  that match no token are not returned; ties by index order (document order).

``dpr-paper`` encodes each leaf once, its text cut at the encoder's first 512 tokens (the
special tokens included), and queries cut at 256; MiniLM stands in for NV-Embed-v2 offline, as in
``dpr`` (``--set encoder=nv-embed-v2`` runs the paper's model where a GPU and the hub are).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from searchtome.baselines.encoders import Encoder, EncoderConfig
from searchtome.baselines.registry import RunContext, register
from searchtome.baselines.termweights import TermWeights, count_terms, df_table, positive

from searchtome.errors import SearchTomeError
from searchtome.limits import MAX_IDS
from searchtome.records import Run

# Lucene's StandardTokenizer default maxTokenLength: longer tokens are split at this length.
MAX_TOKEN_LENGTH = 255
# SmallFloat.NUM_FREE_VALUES = 255 - longToInt4(Integer.MAX_VALUE): lengths below are exact.
_NUM_FREE_VALUES = 24


def _check_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_IDS:
        raise SearchTomeError(f"depth must be between 1 and {MAX_IDS}, not {depth}")


@dataclass(frozen=True)
class BM25PaperConfig:
    k1: float = 1.2
    b: float = 0.75
    depth: int = MAX_IDS

    def __post_init__(self) -> None:
        _check_depth(self.depth)
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise SearchTomeError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, not {self.k1}, {self.b}")


# What makes a UAX #29 segment a token in Lucene's StandardTokenizer (its grammar's word, number,
# Katakana, Hangul, Han, Hiragana and South East Asian rules): a letter or a Word_Break=Numeric
# digit. A vulgar fraction (½) or a superscript (²) is a number to Unicode but Word_Break=Other,
# so Lucene drops it; a letter-like number (Ⅻ) is ALetter and kept.
_WORD_CHAR = (
    r"(?V1)[\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\p{WB=Katakana}\p{Script=Han}"
    r"\p{Script=Hiragana}\p{LB=Complex_Context}[\p{Block=Halfwidth_And_Fullwidth_Forms}&&\p{Nd}]]"
)
# Lucene's EMOJI tokens: an Extended_Pictographic character (©, ®, ™ are) or another Emoji
# character that is not a digit, #, *, a regional indicator or a skin-tone modifier alone.
_EMOJI = (
    r"(?V1)[\p{Extended_Pictographic}[\p{Emoji}--[0-9#*\p{Regional_Indicator}\p{Emoji_Modifier}]]]"
    r"|\p{Regional_Indicator}{2}"  # a flag
)


def standard_analyzer(text: str) -> list[str]:
    """Elasticsearch's ``standard`` analyzer: UAX #29 words, lower-cased, nothing removed."""
    import regex

    tokens: list[str] = []
    for segment in regex.split(r"(?V1w)\b", text):
        if not (regex.search(_WORD_CHAR, segment) or regex.match(_EMOJI, segment)):
            continue  # spaces, punctuation, ½ or ²: StandardTokenizer emits no token for them
        word = segment.lower()
        tokens += [word[i : i + MAX_TOKEN_LENGTH] for i in range(0, len(word), MAX_TOKEN_LENGTH)]
    return tokens


def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    shift = (i >> 3) - 1
    return i & 0x07 if shift == -1 else ((i & 0x07) | 0x08) << shift


@lru_cache(maxsize=4096)
def lucene_length(n: int) -> int:
    """A field length as Lucene's norms keep it (``byte4ToInt(intToByte4(n))``)."""
    if n < _NUM_FREE_VALUES:
        return n
    return _NUM_FREE_VALUES + _int4_to_long(_long_to_int4(n - _NUM_FREE_VALUES))


class LuceneBM25:
    """One Lucene index over ``docs`` with ``BM25Similarity(k1, b)``; scores every document.

    Each (term, leaf) weight is computed once and a query adds them in token order
    (:mod:`~searchtome.baselines.termweights`): the same float64 sums as scoring term by term.
    """

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        tokens = [standard_analyzer(d) for d in docs]
        self.size = len(tokens)
        self.k1, self.b = k1, b
        total = sum(len(t) for t in tokens)
        avgdl = total / self.size if self.size and total else 1.0
        lengths = np.array([lucene_length(len(t)) for t in tokens], dtype=np.float64)
        self.norm = k1 * ((1 - b) + b * lengths / avgdl)
        counts = count_terms(tokens)
        self.df: dict[str, int] = dict(zip(counts.vocab, counts.df.tolist(), strict=True))
        self._weights: TermWeights | None = None
        self.tf: list[Counter[str]] = []
        if positive(self.norm):
            idf = df_table(self.size, self._idf)[counts.df]
            tf = counts.tf
            self._weights = TermWeights(
                counts, idf[counts.terms] * tf / (tf + self.norm[counts.docs])
            )
        else:  # a zero norm: a leaf without the term scores 0/0, which only the loop reproduces
            self.tf = [Counter(t) for t in tokens]

    def _idf(self, n: int) -> float:
        return math.log(1 + (self.size - n + 0.5) / (n + 0.5))

    def idf(self, term: str) -> float:
        return self._idf(self.df.get(term, 0))

    def scores(self, query: str) -> np.ndarray:
        if self._weights is not None:
            return self._weights.scores(standard_analyzer(query))
        out = np.zeros(self.size)
        for term in standard_analyzer(query):
            if term not in self.df:
                continue
            freq = np.array([tf.get(term, 0) for tf in self.tf], dtype=np.float64)
            out += self.idf(term) * freq / (freq + self.norm)
        return out


@register(
    "bm25-paper",
    summary="BM25 as the paper ran it: Elasticsearch 8 defaults (standard analyzer, Lucene "
    "BM25 k1 1.2 b 0.75), one document per leaf, section text only",
    config=BM25PaperConfig,
)
def run_bm25_paper(dataset: Any, split: str, config: BM25PaperConfig, ctx: RunContext) -> Run:
    from searchtome.baselines.bm25 import rank_desc

    from searchtome.settings import progress

    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    for book_id in dataset.book_ids():
        queries = dataset.queries(split, book_id)
        if not queries:
            continue
        leaves = dataset.leaves(book_id)
        index = LuceneBM25([x.text for x in leaves], config.k1, config.b)
        for q in progress(queries, desc=f"bm25-paper {book_id}", unit="query"):
            s = index.scores(q.text)
            order = [i for i in rank_desc(s)[: config.depth] if s[i] > 0]
            rankings[q.query_id] = tuple(leaves[i].leaf_id for i in order)
            scores[q.query_id] = tuple(float(s[i]) for i in order)
    ctx.record(
        tokenizer="Elasticsearch standard analyzer (UAX #29 words, lowercase)",
        similarity="Lucene 9 BM25Similarity, one-byte length norms",
    )
    return Run(name="bm25-paper", rankings=rankings, scores=scores)


@dataclass(frozen=True)
class DPRPaperConfig:
    # The encoder's own limits are the paper's: passages 512 tokens, queries 256.
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    depth: int = MAX_IDS

    def __post_init__(self) -> None:
        _check_depth(self.depth)


@register(
    "dpr-paper",
    summary="DPR as the paper ran it: one vector per leaf from its first 512 tokens, queries at "
    "256, pre-trained encoder (MiniLM offline; NV-Embed-v2 by config)",
    config=DPRPaperConfig,
    needs=("ml",),
)
def run_dpr_paper(dataset: Any, split: str, config: DPRPaperConfig, ctx: RunContext) -> Run:
    from searchtome.baselines.bm25 import rank_desc

    encoder = Encoder(config.encoder)
    books = [b for b in dataset.book_ids() if dataset.queries(split, b)]
    # A leaf without text is its title, so that it still has a vector.
    texts = {b: [x.text or x.title for x in dataset.leaves(b)] for b in books}
    vectors = encoder.encode_passages([t for b in books for t in texts[b]])
    queries = [q for b in books for q in dataset.queries(split, b)]
    qvec = encoder.encode_queries([q.text for q in queries])
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    start = row = 0
    for b in books:
        leaves = dataset.leaves(b)
        book_vecs = vectors[start : start + len(leaves)]
        start += len(leaves)
        book_queries = dataset.queries(split, b)
        sims = qvec[row : row + len(book_queries)] @ book_vecs.T
        row += len(book_queries)
        for q, s in zip(book_queries, sims.astype(np.float64), strict=True):
            order = rank_desc(s)[: config.depth]
            rankings[q.query_id] = tuple(leaves[i].leaf_id for i in order)
            scores[q.query_id] = tuple(float(s[i]) for i in order)
    ctx.record(
        models=(encoder.model_label(),),
        encoder=encoder.describe(),
        parameters=encoder.parameter_count(),  # run_info.parameters
        dtype=encoder.config.dtype,
        leaf_score="one vector per leaf: its first passage_max_tokens tokens",
    )
    return Run(name="dpr-paper", rankings=rankings, scores=scores)
