"""The paper's recipes: Elasticsearch 8's BM25 (standard analyzer, Lucene norms) and one-vector DPR."""

from __future__ import annotations

import math

import numpy as np
import pytest
from searchtome.baselines.paper import (
    BM25PaperConfig,
    LuceneBM25,
    lucene_length,
    standard_analyzer,
)

from searchtome.errors import SearchTomeError


def test_standard_analyzer_keeps_words_as_uax29_does() -> None:
    text = "Erikson's Initiative vs. Guilt (Preschool Years): 3.14, 1,000 U.S.A. e-mail THE"
    assert standard_analyzer(text) == [
        "erikson's", "initiative", "vs", "guilt", "preschool", "years",
        "3.14", "1,000", "u.s.a", "e", "mail", "the",
    ]  # fmt: skip
    assert standard_analyzer("x" * 600) == ["x" * 255, "x" * 255, "x" * 90]
    assert standard_analyzer(" -- ... ") == []


def test_symbols_are_tokens_or_dropped_as_lucene_decides() -> None:
    """Lucene's grammar: © ® ™ and emoji are EMOJI tokens; a vulgar fraction or a superscript is
    Word_Break=Other and dropped (a digit before it stays a number); Ⅻ is a letter."""
    text = "Copyright © 2020, ½ cup, 1½ years, x², Ⅻ, Brand™ ® 😀 🇫🇷"
    assert standard_analyzer(text) == [
        "copyright", "©", "2020", "cup", "1", "years", "x", "ⅻ", "brand", "™", "®", "😀", "🇫🇷",
    ]  # fmt: skip


def test_lengths_round_as_lucene_norms_do() -> None:
    # SmallFloat.byte4ToInt(intToByte4(n)): exact below 24 + 16, then 4 significant bits
    assert [lucene_length(n) for n in (0, 1, 23, 24, 39)] == [0, 1, 23, 24, 39]
    assert [lucene_length(n) for n in (40, 41, 100, 129, 1000)] == [40, 40, 96, 128, 984]
    for n in range(1, 5000):  # monotone, never longer than the real length
        assert lucene_length(n) <= n and lucene_length(n) >= lucene_length(n - 1)


def test_scores_are_lucene_bm25_without_the_k1_plus_1_factor() -> None:
    docs = ["apple banana", "cherry cherry apple", "banana " * 51]
    index = LuceneBM25(docs, k1=1.2, b=0.75)
    avgdl = (2 + 3 + 51) / 3

    def term(tf: int, dl: int, n: int) -> float:
        idf = math.log(1 + (3 - n + 0.5) / (n + 0.5))
        return idf * tf / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))

    got = index.scores("Cherry apple apple")  # a repeated query word counts again
    want = [2 * term(1, 2, 2), term(2, 3, 1) + 2 * term(1, 3, 2), 0.0]
    assert got == pytest.approx(want, rel=1e-12)
    # the long document's length is the one Lucene stored (50), not 51
    assert index.scores("banana")[2] == pytest.approx(term(51, 50, 2), rel=1e-12)
    assert index.scores("durian").tolist() == [0.0, 0.0, 0.0]


def test_config_bounds() -> None:
    with pytest.raises(SearchTomeError, match="depth"):
        BM25PaperConfig(depth=0)
    with pytest.raises(SearchTomeError, match="0 <= b <= 1"):
        BM25PaperConfig(b=1.5)


def test_both_run_through_the_runner(tiny_dataset, tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from searchtome.baselines.runner import execute

    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path / "home"))
    run, meta, _ = execute("bm25-paper", tiny_dataset, "test")
    assert meta.config == {"k1": 1.2, "b": 0.75, "depth": 100}
    assert len(run) and all(run.rankings.values())
    run, meta, _ = execute("dpr-paper", tiny_dataset, "test")
    enc = (meta.config or {})["encoder"]
    assert (enc["passage_max_tokens"], enc["query_max_tokens"]) == (512, 256)
    assert (meta.models or ("",))[0].startswith("sentence-transformers/all-MiniLM-L6-v2")
    # every leaf of the query's book is ranked, by one vector each
    assert all(len(ids) == len(set(ids)) for ids in run.rankings.values())
    scores = np.array([s[0] for s in run.scores.values()])
    assert np.all(scores <= 1 + 1e-6)
