"""NavTree (reconstruction) and ToC-NavTree: trees, node-text rule, the anchored walk, runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from searchtome.baselines.navtree import (
    NavTreeConfig,
    TocNavTreeConfig,
    characteristic_text,
    normalise,
    walk,
)
from searchtome.baselines.trees import Tree, segment_tree, toc_tree

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 13])
def test_segment_tree_is_balanced_and_in_order(n):
    t = segment_tree(n)
    leaves = [v for v in range(len(t)) if t.leaf_ref[v] >= 0]
    assert len(leaves) == n and len(t) == 2 * n - 1
    # Document order: an in-order (pre-order) walk meets the chunks 0..n-1 in sequence.
    assert [t.leaf_ref[v] for v in sorted(leaves, key=lambda v: t.tin[v])] == list(range(n))
    depths = [t.depth_of(v) for v in leaves]
    assert max(depths) - min(depths) <= 1
    assert all(len(t.children[v]) == 2 for v in range(len(t)) if t.leaf_ref[v] < 0)
    # Every internal node but the root gets an index row; the root is never scored.
    assert len(t.internal_nodes()) == max(n - 2, 0)


def test_toc_tree_follows_the_authored_toc(tiny_dataset):
    ds = load(tiny_dataset)
    leaf_ids = [x.leaf_id for x in ds.leaves("alpha-bio")]
    t = toc_tree(ds.toc("alpha-bio"), leaf_ids)
    refs = sorted(t.leaf_ref[v] for v in range(len(t)) if t.leaf_ref[v] >= 0)
    assert refs == list(range(len(leaf_ids)))
    top = [t.titles[c] for c in t.children[0]]
    assert top == [("Cells",), ("Organisms",)]
    # "Animals" (2.2) is a section without sub-entries: a leaf of the navigation tree.
    organisms = t.children[0][1]
    kinds = {t.titles[c][-1]: t.leaf_ref[c] >= 0 for c in t.children[organisms]}
    assert kinds == {"Plants": False, "Animals": True}


def test_toc_tree_drops_empty_branches_and_keeps_strays():
    node = lambda nid, parent, path, leaf: SimpleNamespace(  # noqa: E731
        node_id=nid, parent_id=parent, path=path, is_leaf=leaf
    )
    nodes = [
        node("b/1", None, ("Front",), True),  # not a retrieval leaf, nothing below: dropped
        node("b/2", None, ("Ch",), False),
        node("b/2.1", "b/2", ("Ch", "A"), True),
    ]
    t = toc_tree(nodes, ["b/2.1", "b/9"])
    assert [t.titles[c] for c in t.children[0]] == [("Ch",), ()]
    assert t.leaf_ref[t.children[0][1]] == 1  # b/9 is not in the ToC: hung under the root


def test_characteristic_sentences_rule():
    vecs = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    sentences = ["alpha one", "beta two", "gamma three", "delta four"]
    tokens = [2, 2, 2, 2]
    centroid = np.array([1.0, 0.0])
    # Nearest first: 0 (1.0), 1 (0.8), 3 (0.6); a cap of 4 tokens keeps two, in document order.
    assert (
        characteristic_text([0, 1, 2, 3], vecs, tokens, centroid, sentences, 4)
        == "alpha one beta two"
    )
    assert characteristic_text([2, 3], vecs, tokens, centroid, sentences, 2) == "delta four"
    # A sentence that does not fit is skipped, a shorter later one can still be taken.
    assert (
        characteristic_text([0, 1, 2], vecs, [5, 2, 2], centroid, sentences, 4)
        == "beta two gamma three"
    )
    assert characteristic_text([], vecs, tokens, centroid, sentences, 4) == ""


def test_normalise():
    x = np.array([1.0, 3.0, 5.0])
    assert normalise(x, "minmax").tolist() == [0.0, 0.5, 1.0]
    assert np.isclose(normalise(x, "zscore").mean(), 0.0)
    assert normalise(np.array([2.0, 2.0]), "minmax").tolist() == [0.0, 0.0]


def _walk(leaf_scores, node_scores, **kw):
    t = segment_tree(8)  # internal rows in pre-order: [0-4), [0-2), [2-4), [4-8), [4-6), [6-8)
    cfg = NavTreeConfig(**kw)
    return walk(t, np.asarray(leaf_scores, float), np.asarray(node_scores, float), cfg)


def test_walk_without_freedom_is_the_flat_ranking():
    leaf = [0.1, 0.9, 0.3, 0.2, 0.8, 0.0, 0.5, 0.4]
    nodes = [0.0] * 6
    flat = [1, 4, 6, 7, 2, 3, 0, 5]
    assert _walk(leaf, nodes, anchors=3, anchor_height=0, beam=8) == flat


def test_walk_routes_by_branch_scores_and_fills_from_flat():
    leaf = [0.1, 0.9, 0.3, 0.2, 0.8, 0.0, 0.5, 0.4]
    # The right half [4-8) and its [6-8) quarter score high, the left half low.
    nodes = [0.0, 0.0, 0.0, 1.0, 0.2, 0.9]
    # Anchors 1, 4 (top two); anchor_height 2 lets the walk roam each anchor's quarter... and
    # beam 1 keeps only the best branch per level: the right half, then its better quarter that
    # is inside the region, [4-6). Leaves emitted: 4, 5; then the flat ranking fills.
    out = _walk(leaf, nodes, anchors=2, anchor_height=1, beam=1)
    assert out[:2] == [4, 5]
    assert sorted(out) == list(range(8)) and len(set(out)) == 8
    # With the left half preferred instead, the walk ends under anchor 1.
    out = _walk(leaf, [1.0, 0.0, 0.0, 0.0, 0.2, 0.9], anchors=2, anchor_height=1, beam=1)
    assert out[:2] == [1, 0]
    # A branch-score weight reorders the emitted leaves by their ancestors' scores.
    both = _walk(leaf, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0], anchors=4, anchor_height=0, beam=4)
    lifted = _walk(
        leaf, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0], anchors=4, anchor_height=0, beam=4, path_weight=0.9
    )
    assert both[:4] == [1, 4, 6, 7] and lifted[:4] == [4, 6, 7, 1]


def test_config_validation():
    with pytest.raises(SearchTomeError, match="alpha"):
        NavTreeConfig(alpha=1.5)
    with pytest.raises(SearchTomeError, match="did you mean 'zscore'"):
        NavTreeConfig(norm="z-score")
    with pytest.raises(SearchTomeError, match="beam"):
        TocNavTreeConfig(beam=0)
    assert isinstance(Tree([-1], [[]], [0]).finish(), Tree)


@pytest.fixture(scope="module")
def nav_runs(tiny_dataset, tmp_path_factory):
    pytest.importorskip("torch")
    from searchtome.baselines.navtree import _MEMO, run_navtree, run_toc_navtree
    from searchtome.baselines.registry import RunContext

    home = tmp_path_factory.mktemp("nav-home")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEARCHTOME_HOME", str(home))
        ds = load(tiny_dataset)
        for name, fn, cfg in (
            ("navtree", run_navtree, NavTreeConfig(chunk_tokens=24, node_tokens=24)),
            ("toc-navtree", run_toc_navtree, TocNavTreeConfig(chunk_tokens=24, node_tokens=24)),
        ):
            runs = []
            for _ in range(2):
                _MEMO.clear()  # the second run must rebuild its index from the disk cache
                ctx = RunContext(cache_dir=home / "baselines")
                runs.append((fn(ds, "test", cfg, ctx), ctx.report.to_dict()))
            out[name] = runs
    return ds, out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["navtree", "toc-navtree"])
def test_tree_baselines_beat_random_and_stay_in_the_book(nav_runs, name):
    from searchtome.metrics import Qrels, evaluate, mean_scores

    ds, runs = nav_runs
    (run, notes), (again, notes2) = runs[name]
    r = mean_scores(evaluate(run, Qrels.from_dataset(ds, "test"), ["R@1", "R@3"]))
    assert r["R@1"] >= 0.8 and r["R@3"] >= 0.9
    for q in ds.queries("test"):
        ids = run.rankings[q.query_id]
        assert set(ids) == {x.leaf_id for x in ds.leaves(q.book_id)}  # leaves only, own book
    assert run.rankings == again.rankings
    assert notes["n_chunks"] > len(ds.leaves()) and notes["n_internal_nodes"] > 0
    assert notes2["encoder"]["encoded"] == 0 and notes2["encoder"]["cached"] > 0
    if name == "navtree":
        assert "reconstruction" in notes["description"]
        assert "reconstruction" in notes["reconstruction"]
    else:
        assert "ToC" in notes["description"]


def test_hybrid_is_navtree_without_its_walk(tiny_dataset, tmp_path, monkeypatch):
    """``hybrid`` is NavTree's flat fusion: equal to ``navtree`` with ``anchor_height=0``, and
    a real walk (a tight beam over a wide region) does reorder some ranking."""
    pytest.importorskip("torch")
    from searchtome.baselines.navtree import HybridConfig, run_hybrid, run_navtree
    from searchtome.baselines.registry import RunContext

    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    ds = load(tiny_dataset)
    hybrid_cfg = HybridConfig(chunk_tokens=24)
    assert hybrid_cfg.navtree() == NavTreeConfig(chunk_tokens=24, anchor_height=0)
    hybrid = run_hybrid(ds, "test", hybrid_cfg, RunContext(cache_dir=tmp_path))
    flat = run_navtree(ds, "test", hybrid_cfg.navtree(), RunContext(cache_dir=tmp_path))
    assert hybrid.rankings == flat.rankings
    walked = run_navtree(
        ds,
        "test",
        NavTreeConfig(chunk_tokens=24, anchor_height=3, beam=1, anchors=1),
        RunContext(cache_dir=tmp_path),
    )
    assert walked.rankings != hybrid.rankings
    with pytest.raises(SearchTomeError, match="alpha"):
        HybridConfig(alpha=2.0)
