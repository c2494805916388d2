"""The paper's analyses on hand-made scores whose answers are known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from searchtome.dataset.loader import load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.analyses import (
    Resampling,
    analyses,
    free_decoders,
    paired_analysis,
    train_masks,
)
from searchtome.leaderboard.scoring import QueryTable, Scoreboard, SystemScores
from searchtome.records import Run
from searchtome.submissions import make_meta, write_submission

FAST = Resampling(bootstrap=400, permutations=2_000, seed=3)


def board(train: list[int], systems: dict[str, dict[str, list[float]]]) -> Scoreboard:
    """A scoreboard over len(train) queries; each system gives R@1 (and optionally NonLeaf@1)."""
    n = len(train)
    table = QueryTable(
        query_ids=[f"q{i}" for i in range(n)],
        book=np.asarray(["b"] * n),
        domain=np.asarray(["D"] * n),
        gold=[f"b/{i}" for i in range(n)],
        depth=np.asarray([1 + i % 3 for i in range(n)], dtype=np.int64),
        train_questions=np.asarray(train, dtype=np.int64),
    )
    scores = []
    for name, values in systems.items():
        per_query = {
            "R@1": np.asarray(values["R@1"], dtype=np.float64),
            "NonLeaf@1": np.asarray(values.get("NonLeaf@1", [0.0] * n)),
            "Invalid@1": np.zeros(n),
        }
        scores.append(SystemScores(name, per_query, np.ones(n, dtype=bool)))
    return Scoreboard(table.query_ids, ["R@1"], scores, table)


def test_bucket_assignment_follows_the_declared_bounds() -> None:
    counts = np.asarray([0, 1, 2, 3, 5, 6, 10, 11, 20, 21, 50, 51, 100, 101, 5000])
    labels = {label: counts[m].tolist() for label, m in train_masks(counts)}
    assert labels == {
        "0": [0],
        "1–2": [1, 2],
        "3–5": [3, 5],
        "6–10": [6, 10],
        "11–20": [11, 20],
        "21–50": [21, 50],
        "51–100": [51, 100],
        "101+": [101, 5000],
    }


def test_r1_by_bucket_means_and_intervals() -> None:
    rng = np.random.default_rng(0)
    train = [1] * 40 + [4] * 60 + [30] * 50
    r1 = rng.integers(0, 2, size=150).astype(float).tolist()
    b = analyses(board(train, {"x": {"R@1": r1}}), resampling=FAST)["r1_by_training_questions"]
    assert b.buckets == ["1–2", "3–5", "21–50"]  # empty buckets left out
    assert b.n_queries == [40, 60, 50]
    r = np.asarray(r1)
    expected = [r[:40].mean(), r[40:100].mean(), r[100:].mean()]
    assert np.allclose(b.values["x"], expected)
    for low, value, high in zip(b.ci_low["x"], b.values["x"], b.ci_high["x"], strict=True):
        assert low <= value <= high
        assert high - low > 0.05  # a real interval on 40–60 coin flips, not a point


def test_planted_difference_is_significant_and_none_is_not() -> None:
    n = 200
    train = [2] * 100 + [40] * 100
    base = np.zeros(n)
    base[::2] = 1.0  # half right
    better = base.copy()
    better[:100] = 1.0  # on the rare half, a wins every query b misses
    same = {"a": {"R@1": base.tolist()}, "b": {"R@1": np.roll(base, 2).tolist()}}
    planted = {"a": {"R@1": better.tolist()}, "b": {"R@1": base.tolist()}}

    result = paired_analysis(board(train, planted), ("a", "b"), FAST)
    assert [t.label for t in result.buckets] == ["1–2", "21–50"]
    rare = result.rare
    assert rare is not None and rare.n_queries == 100
    assert rare.diff == 0.5 and rare.p_value < 0.001
    assert rare.ci_low <= rare.diff <= rare.ci_high and rare.ci_low > 0
    assert result.buckets[1].diff == 0 and result.buckets[1].p_value == 1.0

    null = paired_analysis(board(train, same), ("a", "b"), FAST)
    assert null.rare is not None and null.rare.diff == 0.0 and null.rare.p_value > 0.5


def test_same_seed_same_numbers_and_missing_system_is_skipped() -> None:
    rng = np.random.default_rng(1)
    systems = {s: {"R@1": rng.integers(0, 2, 90).astype(float).tolist()} for s in "ab"}
    sb = board([1, 3, 8] * 30, systems)
    assert paired_analysis(sb, ("a", "b"), FAST) == paired_analysis(sb, ("a", "b"), FAST)
    skipped = paired_analysis(sb, ("stair", "b"), FAST)
    assert "no submission named 'stair'" in skipped.skipped and skipped.rare is None
    assert skipped.rare_sentence().startswith("Rare-leaf test not run")


def test_invalid_breakdown_shows_free_decoders_only() -> None:
    n = 30
    sb = board(
        [2] * n,
        {
            "free": {"R@1": [0.0] * n, "NonLeaf@1": [1.0] + [0.0] * (n - 1)},
            "trie": {"R@1": [1.0] * n},
        },
    )
    assert free_decoders(sb) == ["free"]
    invalid = analyses(sb, resampling=FAST)["invalid_by_training_questions"]
    assert list(invalid.values) == ["free"] and np.isclose(invalid.values["free"][0], 1 / n)


def test_leaderboard_json_carries_the_paired_test(tmp_path: Path, tiny_dataset: Path) -> None:
    ds = load(tiny_dataset)
    queries = ds.queries("test")
    leaves = [x.leaf_id for x in ds.leaves()]
    root = tmp_path / "subs"
    for name, right in (("stair", True), ("dsi", False)):
        rankings = {
            q.query_id: [q.leaf_id if right else next(x for x in leaves if x != q.leaf_id)]
            for q in queries
        }
        meta = make_meta(
            name,
            description=name,
            command="hand-made",
            dataset_revision="tiny",
            hardware="cpu",
            date_="2025-01-31",
        )
        write_submission(root / name, Run(name, rankings), meta)
    result = build_leaderboard(
        ds, root, tmp_path / "out", LeaderboardOptions(permutations=500, bootstrap=100)
    )
    data = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    paired = data["analyses"]["paired_by_training_questions"]
    assert paired["a"] == "stair" and paired["alternative"] == "two-sided"
    assert all(t["diff"] == 1.0 for t in paired["buckets"])
    assert all("p_value" in t for t in paired["buckets"])
    assert (tmp_path / "out" / "figures" / "paired_by_training_questions.png").is_file()
    assert "Rare-leaf test" in (tmp_path / "out" / "leaderboard.md").read_text()
    assert result.paired is not None and result.paired.buckets
