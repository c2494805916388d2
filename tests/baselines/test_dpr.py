"""Dense retrieval: passages, max-over-passages leaf scores, FAISS per book, cached embeddings."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch")

from searchtome.baselines.dpr import (
    DPRConfig,
    flat_index,
    leaf_passages,
    max_by_owner,
    run_dpr,
    search_all,
)
from searchtome.baselines.encoders import Encoder, EncoderConfig
from searchtome.baselines.registry import RunContext

from searchtome.dataset.loader import load
from searchtome.metrics import Qrels, evaluate, mean_scores


@pytest.fixture(scope="module")
def dpr_runs(tiny_dataset, tmp_path_factory):
    """Two runs in one fresh cache: the second must be served from it."""
    home = tmp_path_factory.mktemp("dpr-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEARCHTOME_HOME", str(home))
        ds = load(tiny_dataset)
        out = []
        for _ in range(2):
            ctx = RunContext(cache_dir=home / "baselines")
            out.append((run_dpr(ds, "test", DPRConfig(), ctx), ctx.report))
    return ds, out


@pytest.mark.slow
def test_dpr_beats_random_and_stays_in_the_book(dpr_runs):
    ds, [(run, notes), _] = dpr_runs
    r = mean_scores(evaluate(run, Qrels.from_dataset(ds, "test"), ["R@1", "R@3"]))
    assert r["R@1"] >= 0.6 and r["R@3"] >= 0.9  # random: ≈0.12 / ≈0.35
    for q in ds.queries("test"):
        ids = run.rankings[q.query_id]
        assert set(ids) == {x.leaf_id for x in ds.leaves(q.book_id)}  # every leaf, own book
        s = run.scores[q.query_id]
        assert list(s) == sorted(s, reverse=True)
    assert (notes.models or ("",))[0].startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert notes.dtype == "float32"  # recorded as run_info.dtype


@pytest.mark.slow
def test_dpr_rerun_is_identical_and_cached(dpr_runs):
    _, [(first, n1), (second, n2)] = dpr_runs
    assert first.rankings == second.rankings and first.scores == second.scores
    e1, e2 = n1.encoder or {}, n2.encoder or {}
    assert e1["encoded"] > 0 and e1["cached"] == 0
    assert e2["encoded"] == 0
    assert e2["cached"] == e1["encoded"]


def _leaf(i, text, path=("Ch", "Sec")):
    return SimpleNamespace(leaf_id=f"b/{i}", path=(*path, f"L{i}"), title=f"L{i}", text=text)


def test_long_leaves_are_split_and_titles_prefixed():
    enc = Encoder(EncoderConfig(passage_max_tokens=40))
    long_text = " ".join(f"Fact {i} concerns toddlers and their sleep." for i in range(30))
    leaves = [_leaf(1, long_text), _leaf(2, "Short text."), _leaf(3, "")]
    texts, owner = leaf_passages(enc, leaves, DPRConfig(encoder=enc.config))
    assert owner.count(0) > 3 and owner.count(1) == 1 and owner.count(2) == 1
    assert all(t.startswith("Ch > Sec > L") for t in texts)
    assert texts[owner.index(2)] == "Ch > Sec > L3"  # no text: the title path stands in
    assert max(len(enc.tokenizer(t)["input_ids"]) for t in texts) <= 40
    _, owner1 = leaf_passages(enc, leaves, DPRConfig(encoder=enc.config, passages="first"))
    assert owner1 == [0, 1, 2]
    bare, _ = leaf_passages(enc, leaves[:1], DPRConfig(encoder=enc.config, title="none"))
    assert bare[0].startswith("Fact 0")


def test_leaf_score_is_the_best_passage():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(6, 8)).astype(np.float32)
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    sims = search_all(flat_index(vecs), queries)
    assert np.allclose(sims, queries @ vecs.T, atol=1e-5)
    owner = np.array([0, 0, 1, 2, 2, 2])
    leaf = max_by_owner(sims, owner, 4)
    expected = np.stack(
        [sims[:, :2].max(1), sims[:, 2], sims[:, 3:].max(1), np.full(3, -np.inf)], axis=1
    )
    assert np.array_equal(leaf, expected)
