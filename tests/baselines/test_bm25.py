"""The tokenizer, sentence splitter, chunk packer and the BM25 baseline."""

from __future__ import annotations

import random

import numpy as np
import pytest
from searchtome.baselines.bm25 import BM25Config, BM25Index, leaf_document, rank_desc, run_bm25
from searchtome.baselines.registry import RunContext
from searchtome.baselines.text import (
    Analyzer,
    pack_sentences,
    split_long,
    split_sentences,
    word_counter,
)

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from searchtome.metrics import Qrels, evaluate, mean_scores


def test_analyzer_rules():
    a = Analyzer()
    # NFKC folds the ligature, casefold lowers, possessive "s" is too short, "_" separates.
    assert a.tokenize("The child's ﬁrst 2-year-old STAGE_two") == [
        "the",
        "child",
        "first",
        "year",
        "old",
        "stage",
        "two",
    ]
    assert Analyzer(min_length=1).tokenize("a 2-year") == ["a", "2", "year"]
    assert Analyzer(stopwords="english").tokenize("The role of the family") == ["role", "family"]
    assert Analyzer(stemmer="english").tokenize("running developments") == ["run", "develop"]
    assert Analyzer(lowercase=False).tokenize("Piaget said") == ["Piaget", "said"]
    assert Analyzer().tokenize("Ünïcödé naïve café") == ["ünïcödé", "naïve", "café"]


def test_analyzer_rejects_unknown_settings():
    with pytest.raises(SearchTomeError, match="did you mean 'english'"):
        Analyzer(stopwords="englsh")
    with pytest.raises(SearchTomeError, match="stemmer"):
        Analyzer(stemmer="porter2000")


def test_split_sentences():
    text = (
        "Dr. Smith studied infants, e.g. newborns. They grow fast! Do they?\n"
        "Yes: J. Piaget said so.\n\nA new paragraph begins here"
    )
    assert split_sentences(text) == [
        "Dr. Smith studied infants, e.g. newborns.",
        "They grow fast!",
        "Do they?",
        "Yes: J. Piaget said so.",
        "A new paragraph begins here",
    ]
    assert split_sentences("   \n\n ") == []
    assert split_sentences('He said "Stop." Then left.') == ['He said "Stop."', "Then left."]


def test_pack_sentences_respects_the_cap_and_keeps_every_word():
    rng = random.Random(3)
    sentences = [
        " ".join("w" * rng.randint(1, 5) for _ in range(rng.randint(1, 30))) for _ in range(60)
    ]
    chunks = pack_sentences(sentences, 25, word_counter)
    assert all(sum(len(s.split()) for s in c) <= 25 for c in chunks)
    assert " ".join(" ".join(c) for c in chunks).split() == " ".join(sentences).split()
    # Greedy: no two neighbouring chunks could have been merged.
    sizes = [sum(len(s.split()) for s in c) for c in chunks]
    firsts = [len(c[0].split()) for c in chunks]
    assert all(a + f > 25 for a, f in zip(sizes, firsts[1:], strict=False))
    with pytest.raises(SearchTomeError):
        pack_sentences(["x"], 0)


def test_split_long_cuts_at_word_boundaries():
    text = " ".join(f"w{i}" for i in range(23))
    pieces = split_long(text, 5, word_counter)
    assert [len(p.split()) for p in pieces] == [5, 5, 5, 5, 3]
    assert " ".join(pieces) == text


def test_leaf_document():
    assert leaf_document(("A", "B"), "B", "body", "path") == "A > B\n\nbody"
    assert leaf_document(("A", "B"), "B", "body", "leaf") == "B\n\nbody"
    assert leaf_document(("A", "B"), "B", "body", "none") == "body"


def test_index_scores_equal_rank_bm25():
    from rank_bm25 import BM25Okapi

    docs = ["cats purr loudly", "dogs bark at cats", "birds sing", "", "cats cats cats"]
    cfg = BM25Config(k1=1.1, b=0.6, stopwords="none", stemmer="none", min_token_length=1)
    ours = BM25Index(docs, cfg).scores("cats bark")
    ref = BM25Okapi([d.split() for d in docs], k1=1.1, b=0.6, epsilon=0.25)
    assert np.allclose(ours, ref.get_scores(["cats", "bark"]))
    assert BM25Index(docs, cfg).scores("!!").tolist() == [0.0] * 5
    assert BM25Index([], cfg).scores("cats").shape == (0,)


def test_rank_desc_breaks_ties_by_position():
    assert rank_desc(np.array([1.0, 3.0, 1.0, 3.0])).tolist() == [1, 3, 0, 2]


def test_config_validation():
    with pytest.raises(SearchTomeError, match="variant"):
        BM25Config(variant="bm99")
    with pytest.raises(SearchTomeError, match="depth"):
        BM25Config(depth=101)


def _run(data, split="test", **kw):
    ds = load(data)
    ctx = RunContext(cache_dir=data.parent / "cache")
    return ds, run_bm25(ds, split, BM25Config(**kw), ctx)


def test_bm25_beats_random_and_stays_in_the_book(tiny_dataset):
    ds, run = _run(tiny_dataset)
    qrels = Qrels.from_dataset(ds, "test")
    r1 = mean_scores(evaluate(run, qrels, ["R@1"]))["R@1"]
    # Random ranking over ~8 leaves per book gets R@1 ≈ 0.12.
    assert r1 >= 0.8
    for q in ds.queries("test"):
        ids = run.rankings[q.query_id]
        assert ids and len(ids) <= 100
        assert all(i.startswith(q.book_id + "/") for i in ids)
        assert set(ids) <= {x.leaf_id for x in ds.leaves(q.book_id)}
        scores = run.scores[q.query_id]
        assert list(scores) == sorted(scores, reverse=True) and min(scores) > 0


def test_bm25_is_deterministic_and_configurable(tiny_dataset):
    _, a = _run(tiny_dataset)
    _, b = _run(tiny_dataset)
    assert a.rankings == b.rankings and a.scores == b.scores
    _, c = _run(tiny_dataset, k1=0.5, b=0.9)
    assert c.scores != a.scores
    _, d = _run(tiny_dataset, depth=2)
    assert all(len(v) <= 2 for v in d.rankings.values())


def test_bm25_plain_is_the_reproductions_configuration(tiny_dataset):
    """``bm25-plain``: rank-bm25's defaults, lower-cased words of any length, section text only;
    its ranking is ``bm25`` with those settings spelled out."""
    import inspect

    from rank_bm25 import BM25Okapi
    from searchtome.baselines import registry
    from searchtome.baselines.runner import execute

    spec = registry.get("bm25-plain")
    cfg = spec.config_cls()
    defaults = inspect.signature(BM25Okapi.__init__).parameters
    assert (cfg.k1, cfg.b, cfg.epsilon) == tuple(
        defaults[k].default for k in ("k1", "b", "epsilon")
    )
    assert (cfg.variant, cfg.title, cfg.stopwords, cfg.stemmer) == ("okapi", "none", "none", "none")
    words = ["a", "child", "s", "2", "year", "old", "x"]
    assert cfg.analyzer.tokenize("A child's 2-year-old_x") == words
    plain, meta, _ = execute("bm25-plain", tiny_dataset, "test")
    spelled = {"k1": 1.5, "b": 0.75, "title": "none", "stopwords": "none", "stemmer": "none"}
    same, _, _ = execute("bm25", tiny_dataset, "test", None, {**spelled, "min_token_length": 1})
    assert plain.name == "bm25-plain" and plain.rankings == same.rankings
    assert plain.rankings != execute("bm25", tiny_dataset, "test")[0].rankings
    assert (meta.config or {})["k1"] == 1.5
