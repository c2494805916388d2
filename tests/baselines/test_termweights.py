"""The stored-weight BM25 scorer equals rank-bm25 bit for bit, on random corpora and queries."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from rank_bm25 import BM25L, BM25Okapi, BM25Plus
from searchtome.baselines.bm25 import BM25Config, BM25Index
from searchtome.baselines.termweights import bm25l, bm25plus, count_terms, okapi

VARIANTS = {
    "okapi": (okapi, lambda toks, k1, b, x: BM25Okapi(toks, k1=k1, b=b, epsilon=x)),
    "l": (bm25l, lambda toks, k1, b, x: BM25L(toks, k1=k1, b=b, delta=x)),
    "plus": (bm25plus, lambda toks, k1, b, x: BM25Plus(toks, k1=k1, b=b, delta=x)),
}


def corpus(rng: random.Random) -> list[list[str]]:
    # A small vocabulary with a skewed draw: common words sit in more than half the documents
    # (negative idf: the Okapi floor), rare ones in one; some documents are empty.
    words = [f"w{i}" for i in range(rng.randint(1, 40))]
    weights = [1 / (i + 1) for i in range(len(words))]
    docs = []
    for _ in range(rng.randint(1, 30)):
        size = 0 if rng.random() < 0.1 else rng.randint(1, 60)
        docs.append(rng.choices(words, weights, k=size))
    if not any(docs):
        docs[0] = [words[0]]
    return docs


def queries(rng: random.Random, docs: list[list[str]]) -> list[list[str]]:
    known = sorted({t for d in docs for t in d})
    out = [[], ["unknown"], [known[0]] * 3]
    for _ in range(20):
        q = rng.choices(known, k=rng.randint(1, 8))
        q += [q[0]] * rng.randint(0, 2) + ["zz-unknown"] * rng.randint(0, 1)  # repeats, unknown
        rng.shuffle(q)
        out.append(q)
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype == np.float64 and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_stored_weights_equal_rank_bm25_bit_for_bit(variant):
    build, reference = VARIANTS[variant]
    rng = random.Random(f"termweights-{variant}")
    floored = 0
    for _ in range(150):
        docs = corpus(rng)
        k1, b = rng.choice([0.9, 1.2, 1.5, rng.uniform(0.1, 3)]), rng.choice([0.0, 0.3, 0.75, 0.99])
        extra = rng.choice([0.25, 0.5, 1.0, rng.uniform(0, 1)])
        ours, ref = build(count_terms(docs), k1, b, extra), reference(docs, k1, b, extra)
        assert ours is not None
        counts = count_terms(docs)
        floored += bool(np.any(2 * counts.df > len(docs)))  # idf < 0: in over half the docs
        for q in queries(rng, docs):
            expected = np.asarray(ref.get_scores(q), dtype=np.float64)
            assert same_bits(ours.scores(q), expected), (docs, q, k1, b, extra)
    assert floored > 10  # the Okapi idf floor for common words was exercised


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_index_falls_back_to_rank_bm25_where_a_norm_is_zero():
    # b = 1 and an empty document: rank-bm25 divides 0 by 0 there (NaN); the index must agree.
    docs = ["cats purr", "", "dogs bark at cats"]
    cfg = BM25Config(k1=1.2, b=1.0, stopwords="none", stemmer="none", min_token_length=1)
    index = BM25Index(docs, cfg)
    ref = BM25Okapi([d.split() for d in docs], k1=1.2, b=1.0, epsilon=0.25)
    got, want = index.scores("cats"), np.asarray(ref.get_scores(["cats"]))
    assert np.isnan(got[1]) and same_bits(got, want)


def test_index_uses_the_stored_weights_and_matches_rank_bm25():
    rng = random.Random(7)
    docs = [" ".join(d) for d in corpus(rng)]
    for variant in ("okapi", "l", "plus"):
        cfg = BM25Config(variant=variant, stopwords="none", stemmer="none", min_token_length=1)
        index = BM25Index(docs, cfg)
        assert index._weights is not None
        extra = cfg.epsilon if variant == "okapi" else cfg.delta
        ref = VARIANTS[variant][1]([d.split() for d in docs], cfg.k1, cfg.b, extra)
        q = "w0 w1 w0 nothing"
        assert same_bits(index.scores(q), np.asarray(ref.get_scores(q.split()), dtype=np.float64))


def test_lucene_stored_weights_equal_the_term_by_term_loop():
    from searchtome.baselines.paper import LuceneBM25, standard_analyzer

    rng = random.Random("lucene")
    for _ in range(60):
        docs = [" ".join(d) for d in corpus(rng)]
        index = LuceneBM25(docs, k1=rng.choice([0.9, 1.2, rng.uniform(0.1, 3)]), b=0.75)
        assert index._weights is not None
        loop = LuceneBM25(docs, k1=index.k1, b=1.0 if "" in docs else 0.75)  # the loop path
        assert (loop._weights is None) == ("" in docs)
        index.tf = [Counter(standard_analyzer(d)) for d in docs]
        for q in queries(rng, [d.split() for d in docs]):
            text = " ".join(q)
            want = np.zeros(index.size)  # the loop as written before the stored weights
            for term in standard_analyzer(text):
                if term in index.df:
                    freq = np.array([tf.get(term, 0) for tf in index.tf], dtype=np.float64)
                    want += index.idf(term) * freq / (freq + index.norm)
            assert same_bits(index.scores(text), want), (docs, text)
