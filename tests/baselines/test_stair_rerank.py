"""``stair-rerank``: STAIR's adapter scores a first stage's top k leaves (tiny random Llama)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.llm_helpers import one_thread, tiny_lm_fixture, tiny_run  # noqa: F401

torch = pytest.importorskip("torch")

from searchtome.baselines.generative.rerank import StairRerankConfig, reorder  # noqa: E402

from searchtome.dataset.loader import load  # noqa: E402
from searchtome.errors import SearchTomeError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def test_reorder_mixes_the_scores_with_the_rank_inside_the_top_k_only() -> None:
    first = ["a", "b", "bad", "c", "d", "e"]
    scored = {"a": -9.0, "b": -1.0, "c": -5.0}
    # STAIR alone: its order among the scored leaves, the unscored id dropped, rank > k kept.
    assert reorder(first, scored, k=4, weight=1.0) == ["b", "c", "a", "d", "e"]
    # No weight on STAIR: the first stage's order.
    assert reorder(first, scored, k=4, weight=0.0) == ["a", "b", "c", "d", "e"]
    # Half and half: b (best score, rank 2) beats a (worst score, rank 1).
    assert reorder(first, scored, k=4, weight=0.5)[0] == "b"
    # Equal scores: the first stage's order decides.
    assert reorder(first, {"a": 0.0, "b": 0.0}, k=2, weight=1.0)[:2] == ["a", "b"]
    assert reorder([], {}, k=3, weight=0.5) == []


def test_settings_are_checked() -> None:
    with pytest.raises(SearchTomeError, match="k must be between"):
        StairRerankConfig(k=0)
    with pytest.raises(SearchTomeError, match="weight must be between"):
        StairRerankConfig(weight=1.5)
    with pytest.raises(SearchTomeError, match="decode must be exact, not beam"):
        StairRerankConfig(decode="beam")
    # Nothing of the reranker shapes the adapter: STAIR's cached one serves it.
    from searchtome.baselines.generative.stair import StairConfig

    assert StairRerankConfig(candidates="x", k=3).training_fields() == (
        StairConfig().training_fields()
    )


def _first_stage(dataset_dir: Path, out: Path) -> Path:
    """A first stage ranking each test query's book leaves backwards, an unknown id second."""
    ds = load(dataset_dir)
    with open(out, "w", encoding="utf-8") as fh:
        for q in ds.queries("test"):
            ids = [x.leaf_id for x in ds.leaves(q.book_id)][::-1]
            fh.write(
                json.dumps({"query_id": q.query_id, "leaf_ids": [ids[0], "nowhere", *ids[1:]]})
            )
            fh.write("\n")
    return out


def test_stair_rerank_scores_the_candidates_as_stair_exact_does(
    tiny_lm_dir, tiny_dataset, tmp_path
) -> None:
    from searchtome.baselines.runner import execute

    one_thread()
    overrides = tiny_run(tiny_lm_dir, lr=0.01)
    exact, _, _ = execute("stair", tiny_dataset, "test", None, overrides | {"decode": "exact"}, 3)
    first = _first_stage(tiny_dataset, tmp_path / "first.jsonl")
    k = 4
    rerank = overrides | {"candidates": str(first), "k": k}
    alone, meta, info = execute(
        "stair-rerank", tiny_dataset, "test", None, rerank | {"weight": 1}, 3
    )
    assert info.report.adapter_reused is True  # STAIR's adapter: no second training
    assert info.report.first_stage is not None
    assert info.report.first_stage["dropped_not_leaves"] == len(alone.rankings)  # "nowhere"
    # The first stage's path is recorded, never this machine's absolute one.
    assert (meta.config or {})["candidates"] == info.report.first_stage["run"] == "<PATH>"
    ds = load(tiny_dataset)
    for q in ds.queries("test"):
        leaves = [x.leaf_id for x in ds.leaves(q.book_id)][::-1]
        top = [leaves[0], *leaves[1 : k - 1]]  # the top k less "nowhere"
        got = alone.rankings[q.query_id]
        # STAIR alone orders the candidates as its exact ranking of the whole book does.
        assert list(got[: len(top)]) == [x for x in exact.rankings[q.query_id] if x in top]
        assert list(got[len(top) :]) == leaves[k - 1 :]  # below the top k: the first stage's
    # STAIR did reorder: the test would pass unchanged if the candidates were left as they came.
    assert any(
        list(alone.rankings[q.query_id]) != [x.leaf_id for x in ds.leaves(q.book_id)][::-1]
        for q in ds.queries("test")
    )
    kept, _, _ = execute("stair-rerank", tiny_dataset, "test", None, rerank | {"weight": 0}, 3)
    for q in ds.queries("test"):
        leaves = [x.leaf_id for x in ds.leaves(q.book_id)][::-1]
        assert list(kept.rankings[q.query_id]) == leaves  # the first stage's, "nowhere" dropped


def test_a_first_stage_of_another_split_is_refused_with_its_path(
    tiny_lm_dir, tiny_dataset, tmp_path
) -> None:
    from searchtome.baselines.runner import execute

    first = _first_stage(tiny_dataset, tmp_path / "first.jsonl")
    lines = first.read_text().splitlines()
    first.write_text("\n".join(lines[1:]) + "\n")
    overrides = {"model": str(tiny_lm_dir), "candidates": str(first), "restricted": "exclude"}
    with pytest.raises(SearchTomeError, match=r"first\.jsonl: no ranking for query .* test split"):
        execute("stair-rerank", tiny_dataset, "test", None, overrides, 3)
    with pytest.raises(SearchTomeError, match="needs its first stage: --set candidates=RUN"):
        execute("stair-rerank", tiny_dataset, "test", None, {"model": str(tiny_lm_dir)}, 3)
