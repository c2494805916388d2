"""Seed groups on the real Whole Child: committed runs and deterministic "other seeds" of them.

The seed runs are the committed predictions with the first ids of a share of the queries
reordered (chosen by a hash of the query id and the seed), so they have the shape and the
spread of real reruns: same queries, same leaves, a few points apart. The data are imported
from the reproduction's release in ``../shared/`` as the README says (skipped without it).
"""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from searchtome.cli import main
from searchtome.dataset.loader import Dataset, load
from searchtome.leaderboard.analyses import RARE_MAX, Resampling, paired_analysis
from searchtome.leaderboard.build import build_leaderboard
from searchtome.leaderboard.checks import summary
from searchtome.leaderboard.document import read_document, seeds_to_dict, to_json
from searchtome.leaderboard.scoring import Scoreboard, score_runs
from searchtome.leaderboard.seeds import (
    GroupComparison,
    SeedReport,
    clustered_test,
    config_differences,
    group_test,
    outperform,
    run_permutation,
    seed_name,
    seed_spread,
    split_seed_runs,
    two_level_bootstrap,
)
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.records import Submission
from searchtome.submissions.validate import ValidationReport, validate_submission

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT.parent / "shared" / "peer" / "whole-child"
BOARD = ROOT / "leaderboard" / "whole-child"
RS = Resampling(bootstrap=1000, permutations=2000, seed=0)  # lighter than the page's 2000/10000
PAIR = ("stair", "dsi")

needs_data = pytest.mark.skipif(not PEER.is_dir(), reason="needs ../shared/peer/whole-child")


def perturbed_copy(src: Path, dst: Path, seed: int, share: float, name: str | None = None) -> Path:
    """``src``'s run as if trained with ``seed``: in ``share`` of the queries (picked by a hash
    of the query id and the seed) the first id moves to rank 2 to 5. ``share`` 0: a plain copy."""
    dst.mkdir(parents=True)
    meta = json.loads((src / "meta.json").read_text())
    old = meta.get("seed")
    meta["system"], meta["seed"] = name or dst.name, seed
    meta["command"] = meta["command"].replace(f"--seed {old}", f"--seed {seed}")
    (dst / "meta.json").write_text(json.dumps(meta, indent=2))
    rows = []
    with gzip.open(src / "predictions.jsonl.gz", "rt") as fh:
        for line in fh:
            row = json.loads(line)
            h = zlib.crc32(f"{row['query_id']}/{seed}".encode())
            ids = row["leaf_ids"]
            if h / 2**32 < share and len(ids) > 4:
                ids.insert(1 + h % 4, ids.pop(0))  # scores stay in order: only the ids move
            rows.append(json.dumps(row))
    with gzip.open(dst / "predictions.jsonl.gz", "wt") as fh:
        fh.write("\n".join(rows) + "\n")
    return dst


def renamed(src: Path, dst: Path) -> Path:
    """A byte-for-byte copy of a run under another system name."""
    return perturbed_copy(src, dst, json.loads((src / "meta.json").read_text())["seed"], 0.0)


@pytest.fixture(scope="module")
def whole_child(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("data") / "whole-child"
    assert main(["--no-progress", "import", "repro", str(PEER), "--out", str(data)]) == 0
    return data


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "meta.json").is_file())


@dataclass
class Seeded:
    """The seeded folder validated, scored and split like the build does, and its seed report."""

    subs: Path
    dataset: Dataset
    submissions: dict[str, Submission]  # every run, seed runs included
    board: Scoreboard  # the main board: no seed run on it
    seed_runs: list[ValidationReport]

    def report(self) -> SeedReport:
        order = [s.system for s in self.board.systems]
        out = seed_spread(
            self.board, self.seed_runs, self.dataset, "test", order, PAIR, RS, str(self.subs)
        )
        assert out is not None
        return out


@pytest.fixture(scope="module")
def seeded(whole_child: Path, tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """stair (3 seeds), dsi (3), hybrid (2), and twin: stair and its seeds under another name."""
    subs = tmp_path_factory.mktemp("seeded")
    for name in ("stair", "dsi", "hybrid"):
        shutil.copytree(ROOT / "submissions" / name, subs / name)
    for seed in (1, 2):
        perturbed_copy(subs / "stair", subs / f"stair-seed{seed}", seed, 0.08)
        perturbed_copy(subs / "dsi", subs / f"dsi-seed{seed}", seed, 0.08)
        perturbed_copy(subs / "stair", subs / f"twin-seed{seed}", seed, 0.08)
    perturbed_copy(subs / "hybrid", subs / "hybrid-seed7", 7, 0.08)
    renamed(subs / "stair", subs / "twin")
    dataset = load(whole_child)
    reports = [validate_submission(f, dataset, "test") for f in _folders(subs)]
    assert all(r.ok for r in reports), [r.errors for r in reports if not r.ok]
    main_runs, seed_runs, rejected = split_seed_runs(reports, [])
    assert not rejected, [r.errors for r in rejected]
    runs = {r.system: r.submission for r in reports if r.submission is not None}
    board = score_runs(
        [runs[r.system] for r in main_runs], data=dataset, split="test", measures=DEFAULT_MEASURES
    )
    return Seeded(subs, dataset, runs, board, seed_runs)


@pytest.fixture(scope="module")
def report(seeded: Seeded) -> SeedReport:
    return seeded.report()


def _comparison(report: SeedReport, b: str) -> GroupComparison:
    return next(c for c in report.comparisons if c.b == b)


def test_seed_name() -> None:
    assert seed_name("stair-seed1") == ("stair", 1)
    assert seed_name("dsi-constrained-seed12") == ("dsi-constrained", 12)
    assert seed_name("stair") is None and seed_name("stair-seed") is None
    assert seed_name("seed1") is None and seed_name("stair-seed1x") is None


def test_config_differences_leave_out_how_a_run_was_executed() -> None:
    base = {"config": {"lr": 0.002, "threads": 2, "decode": "beam", "adapter": "a"}}
    run = {"config": {"lr": 0.001, "threads": 1, "decode": "beam", "adapter": "b"}}
    assert config_differences(base["config"], run["config"]) == ["lr: 0.002 → 0.001"]
    assert config_differences(base["config"], base["config"]) == []


def test_two_level_bootstrap_counts_the_seed_variance() -> None:
    """Runs that agree: the interval is the questions' alone; runs that scatter: it widens."""
    rng = np.random.default_rng(0)
    base = (rng.random(800) < 0.4).astype(float)
    other = (rng.random(800) < 0.3).astype(float)
    seq = np.random.SeedSequence(1)
    agree = two_level_bootstrap(np.stack([base] * 3), np.stack([other] * 3), None, 2000, seq)
    one = two_level_bootstrap(base[None], other[None], None, 2000, seq)
    np.testing.assert_allclose(agree, one, rtol=0, atol=1e-12)  # the questions alone
    # runs points apart (a miss turned into a hit in 10 % or 20 % of the questions)
    better = [np.maximum(base, rng.random(800) < share) for share in (0.1, 0.2)]
    scatter = two_level_bootstrap(np.stack([base, *better]), other[None], None, 2000, seq)
    assert np.std(scatter) > 1.3 * np.std(one)


def test_group_test_p_and_interval() -> None:
    rng = np.random.default_rng(3)
    a = (rng.random((3, 500)) < 0.6).astype(float)
    b = (rng.random((2, 500)) < 0.4).astype(float)
    seq = np.random.SeedSequence(0)
    t = group_test("all queries", "R@1", a, b, None, 999, seq)
    assert t.diff == pytest.approx(a.mean() - b.mean()) and t.ci_low > 0
    assert t.p_at_floor and t.p_value == 2 / 1000 and t.p_text(999) == "< 0.002"
    assert outperform(a.mean(axis=1), b.mean(axis=1)) == 1.0
    none = group_test("all queries", "R@1", a, b, None, 0, seq)  # --bootstrap 0
    assert none.diff == t.diff and np.isnan(none.p_value) and np.isnan(none.ci_low)
    assert none.p_text(0) == "–"


def test_the_run_level_permutation_p_is_exact() -> None:
    """By hand: 1..6 split 3 + 3 has 20 splits; |mean difference| = |2s − 21| / 3 for the
    split whose first group sums to s. 1, 3, 5 against 2, 4, 6 (|d| = 1) is matched or beaten
    by the 14 splits with s ≤ 9 or s ≥ 12; 1, 2, 3 against 4, 5, 6 only by itself and its
    mirror, the floor 2/20 that three seeds a side can reach."""
    assert run_permutation(np.array([1.0, 3, 5]), np.array([2.0, 4, 6])) == (14 / 20, 20)
    assert run_permutation(np.array([1.0, 2, 3]), np.array([4.0, 5, 6])) == (2 / 20, 20)
    # 1 + 2 runs: 3 splits, differences −1.5, 0 and +1.5
    assert run_permutation(np.array([0.0]), np.array([1.0, 2.0])) == (2 / 3, 3)
    assert run_permutation(np.array([0.5]), np.array([0.5])) == (1.0, 2)


def test_the_group_test_reports_the_run_level_p_beside_the_bootstrap() -> None:
    rng = np.random.default_rng(3)
    a = (rng.random((3, 500)) < 0.6).astype(float)
    b = (rng.random((3, 500)) < 0.4).astype(float)
    t = group_test("all queries", "R@1", a, b, None, 999, np.random.SeedSequence(0))
    assert t.p_at_floor and t.p_value == 2 / 1000  # the bootstrap leans on the questions
    assert (t.p_runs, t.relabellings) == (0.1, 20)  # the runs alone cannot say more
    assert t.p_runs_text() == "0.10 (floor)"


def test_clustered_resampling_keeps_leaves_whole() -> None:
    from searchtome.leaderboard.seeds import _cluster_weights

    leaves = np.repeat(np.array(["c", "a", "b", "d"]), [5, 1, 3, 7])
    w = _cluster_weights(np.random.default_rng(0), leaves, 400)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    for leaf in set(leaves):  # every question of a leaf weighs the same in every replicate
        on = w[:, leaves == leaf]
        assert (on == on[:, :1]).all()
    # a leaf weighs (times drawn) / (questions drawn): the counts are whole and sum to 4 leaves
    per_leaf = np.stack([w[:, np.flatnonzero(leaves == x)[0]] for x in "abcd"], axis=1)
    counts = per_leaf * (4 / per_leaf.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(counts, np.rint(counts), atol=1e-9)
    assert (np.rint(counts).sum(axis=1) == 4).all() and (counts == 0).any()


def test_clustered_intervals_widen_when_a_leaf_s_questions_move_together() -> None:
    """40 leaves of 20 questions each; a and b differ by a whole leaf at a time. Resampling
    questions treats 800 draws as independent, resampling leaves sees 40: a wider interval and
    a larger p. With every question its own leaf the two are the same bootstrap."""
    leaves = np.repeat([f"leaf{i:02d}" for i in range(40)], 20)
    a = np.repeat((np.arange(40) % 5 < 2).astype(float), 20)  # a hits every question of 16 leaves
    b = np.repeat((np.arange(40) % 5 == 3).astype(float), 20)  # b hits every question of 8
    seq = np.random.SeedSequence(5)
    by_question = group_test("≤ 5", "R@1", a[None], b[None], None, 2000, seq)
    by_leaf = clustered_test(a[None], b[None], leaves.tolist(), 2000, seq)
    assert by_leaf is not None and by_leaf.n_leaves == 40
    width = lambda t: t.ci_high - t.ci_low  # noqa: E731
    assert width(by_leaf) > 3 * width(by_question)
    assert by_question.p_at_floor and by_leaf.p_value > by_question.p_value
    singletons = [f"q{i:03d}" for i in range(800)]  # sorted as the questions are
    same = two_level_bootstrap(a[None], b[None], None, 500, seq, singletons)
    np.testing.assert_allclose(same, two_level_bootstrap(a[None], b[None], None, 500, seq))
    assert clustered_test(a[None], b[None], leaves.tolist(), 0, seq) is None


def test_a_zero_difference_counts_on_both_sides_whatever_its_rounding(monkeypatch) -> None:
    """Replicates whose difference is 0 up to summation order (which BLAS chooses per CPU
    family) give the p of exact zeros: the same board on every machine."""
    from searchtome.leaderboard import seeds

    a, b = np.ones((1, 10)), np.zeros((1, 10))
    exact = np.array([0.0] * 40 + [0.3] * 959)
    jitter = exact.copy()
    jitter[:40] = np.where(np.arange(40) % 2, 3e-17, -3e-17)
    p = {}
    for name, diffs in (("exact", exact), ("jitter", jitter)):
        monkeypatch.setattr(seeds, "two_level_bootstrap", lambda *_, d=diffs: d)
        p[name] = group_test("all", "R@1", a, b, None, diffs.size, np.random.SeedSequence(0))
    assert p["exact"].p_value == p["jitter"].p_value == 2 * 41 / 1000


SECTIONS = {  # the seed spread in each page: from its heading to the next one
    "leaderboard.md": ("\n## Seed spread\n", "\n## "),
    "index.html": ('<h2 id="seed-spread">', "<h2 "),
}


def _without_seeds(name: str, text: str) -> str:
    """A page with its seed spread section cut out (unchanged without one)."""
    if name not in SECTIONS or SECTIONS[name][0] not in text:
        return text
    start, end = SECTIONS[name]
    head, rest = text.split(start, 1)
    return head + end + rest.split(end, 1)[1]


def _assert_committed_board(out: Path) -> None:
    """``out`` holds the committed board's files with the same bytes, the seed spread aside.

    Without seed runs committed (the committed board has no seed spread) and none built, every
    file is compared byte for byte.
    """
    built = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(BOARD) for p in BOARD.rglob("*") if p.is_file() and p.name != "expected.json"
    )
    assert built == committed
    for rel in built:
        mine, theirs = (out / rel).read_bytes(), (BOARD / rel).read_bytes()
        if rel.name == "leaderboard.json":
            a, b = json.loads(mine), json.loads(theirs)
            assert ("seeds" in a or "seeds" in b) or mine == theirs
            a.pop("seeds", None), b.pop("seeds", None)
            assert a == b
        elif rel.name in SECTIONS:
            assert _without_seeds(rel.name, mine.decode()) == _without_seeds(
                rel.name, theirs.decode()
            ), rel
        else:
            assert mine == theirs, rel


@needs_data
def test_groups_of_one_leave_every_output_byte_identical(whole_child, tmp_path, monkeypatch):
    """The committed board rebuilt where it lies relative to its runs, without any seed run."""
    for folder in _folders(ROOT / "submissions"):
        if seed_name(folder.name) is None:  # committed seed runs, once there are any, stay out
            shutil.copytree(folder, tmp_path / "submissions" / folder.name)
    monkeypatch.chdir(tmp_path)
    out = Path("leaderboard") / "whole-child"
    result = build_leaderboard(whole_child, "submissions", out, check=BOARD / "expected.json")
    assert result.seeds is None
    assert summary(result.checks) == "check: OK (0 of 135 failed)"
    assert "Seed spread" not in (out / "index.html").read_text()
    _assert_committed_board(out)


@needs_data
def test_mean_and_sd_over_seeds_are_numpys(seeded: Seeded, report: SeedReport) -> None:
    groups = {g.system: g for g in report.groups}
    assert {s: g.seeds for s, g in groups.items()} == {
        "dsi": [42, 1, 2],
        "hybrid": [42, 7],
        "stair": [42, 1, 2],
        "twin": [42, 1, 2],
    }
    for system, group in groups.items():
        # each run scored on its own, as `searchtome score` would
        alone = [
            score_runs(
                [seeded.submissions[r.system]], data=seeded.dataset, measures=DEFAULT_MEASURES
            )
            for r in group.runs
        ]
        measures = alone[0].all_measures
        values = {m: [b.aggregate(b.systems[0].system)[m] for b in alone] for m in measures}
        as_dict = seeds_to_dict(SeedReport([group], [], report.settings))["groups"][0]
        assert group.measures == measures and list(as_dict["mean"]) == measures
        for m, v in values.items():
            assert as_dict["mean"][m] == pytest.approx(np.mean(v), abs=1e-12), (system, m)
            assert as_dict["sd"][m] == pytest.approx(np.std(v, ddof=1), abs=1e-12), (system, m)
        assert len(set(values["R@1"])) > 1, system  # the perturbed seeds really differ


@needs_data
def test_the_pair_comes_first_then_every_other_seeded_group(report: SeedReport) -> None:
    pairs = [(c.a, c.b, c.pre_declared) for c in report.comparisons]
    assert pairs == [("stair", "dsi", True), ("stair", "hybrid", False), ("stair", "twin", False)]


@needs_data
def test_identical_groups_give_p_near_one(report: SeedReport) -> None:
    twin = _comparison(report, "twin")
    for test in [*twin.overall, twin.rare_pooled]:
        assert test is not None and test.diff == 0.0
        assert test.p_value > 0.9, (test.label, test.measure, test.p_value)
        assert test.ci_low < 0 < test.ci_high
    # the same runs against each other: no difference at all, p = 1
    same = [t for t in twin.rare_runs if t.seed_a == t.seed_b]
    assert len(same) == 3 and all(t.test.diff == 0 and t.test.p_value == 1.0 for t in same)
    assert len(twin.rare_runs) == 9  # every pair of runs


@needs_data
def test_a_clearly_better_group_gets_a_small_p(report: SeedReport) -> None:
    hybrid = _comparison(report, "hybrid")  # 88.9 R@1 against stair's 33.0
    assert (hybrid.seeds_a, hybrid.seeds_b) == ([42, 1, 2], [42, 7])
    r1 = hybrid.overall[0]
    assert r1.measure == "R@1" and r1.diff < -0.5
    assert r1.p_at_floor and r1.p_value == pytest.approx(2 / (RS.bootstrap + 1))
    assert r1.ci_high < -0.4 and r1.p_outperform == 0.0
    assert not hybrid.note  # both have seeds


@needs_data
def test_the_rare_leaf_test_per_run_pair_and_pooled(seeded: Seeded, report: SeedReport) -> None:
    c = _comparison(report, "dsi")
    grid = {(t.seed_a, t.seed_b): t.test for t in c.rare_runs}
    assert sorted(grid) == sorted((a, b) for a in (42, 1, 2) for b in (42, 1, 2))
    # the committed runs' pair is exactly the leaderboard's own rare-leaf test
    assert grid[42, 42] == paired_analysis(seeded.board, ("stair", "dsi"), RS).rare
    committed = json.loads((BOARD / "leaderboard.json").read_text())
    rare = committed["analyses"]["paired_by_training_questions"]["rare"]
    assert grid[42, 42].diff == rare["diff"] and grid[42, 42].n_queries == rare["n_queries"]
    # pooled: the mean over each system's runs of R@1 on the rare queries
    assert seeded.board.queries is not None
    mask = seeded.board.queries.train_questions <= RARE_MAX
    means = {}
    for system in ("stair", "dsi"):
        names = [system, f"{system}-seed1", f"{system}-seed2"]
        b = score_runs(
            [seeded.submissions[n] for n in names], data=seeded.dataset, measures=DEFAULT_MEASURES
        )
        means[system] = np.mean([b.get(n).per_query["R@1"][mask].mean() for n in names])
    pooled = c.rare_pooled
    assert pooled is not None and pooled.n_queries == int(mask.sum())
    assert pooled.mean_a == pytest.approx(means["stair"], abs=1e-12)
    assert pooled.mean_b == pytest.approx(means["dsi"], abs=1e-12)
    assert pooled.diff > 0 and pooled.p_value < 0.01
    # beside it: the runs alone (3 + 3: 20 relabellings, floor 0.10) and whole leaves resampled
    assert (pooled.p_runs, pooled.relabellings) == (0.1, 20)
    gold = {g for g, rare in zip(seeded.board.queries.gold, mask, strict=True) if rare}
    assert c.rare_leaves is not None and c.rare_leaves.n_leaves == len(gold)
    assert c.rare_leaves.ci_high - c.rare_leaves.ci_low > pooled.ci_high - pooled.ci_low
    assert all(t.leaves is not None and t.leaves.n_leaves == len(gold) for t in c.rare_runs)


@needs_data
def test_every_run_pair_over_all_queries_and_each_run_s_platform(
    seeded: Seeded, report: SeedReport
) -> None:
    c = _comparison(report, "dsi")
    grid = {(t.seed_a, t.seed_b): t.test for t in c.overall_runs}
    assert sorted(grid) == sorted((a, b) for a in (42, 1, 2) for b in (42, 1, 2))
    for (sa, sb), t in grid.items():
        a = "stair" if sa == 42 else f"stair-seed{sa}"
        b = "dsi" if sb == 42 else f"dsi-seed{sb}"
        both = score_runs(
            [seeded.submissions[a], seeded.submissions[b]], data=seeded.dataset, measures=["R@1"]
        )
        assert t.diff == pytest.approx(both.aggregate(a)["R@1"] - both.aggregate(b)["R@1"])
        assert t.n_queries == len(both.query_ids) and 0 < t.p_value <= 1
    # the committed runs record their dtype and CPU; the page shows them per run
    stair = next(g for g in report.groups if g.system == "stair")
    assert stair.runs[0].platform == "bfloat16, AMD EPYC with AVX512-BF16"


@needs_data
def test_a_group_of_one_against_seeds_says_so_and_nothing_is_random(seeded: Seeded) -> None:
    runs = [r for r in seeded.seed_runs if r.system.startswith("stair-")]
    order = [s.system for s in seeded.board.systems]
    args = (seeded.board, runs, seeded.dataset, "test", order, PAIR, RS, str(seeded.subs))
    out = seed_spread(*args)
    assert out is not None and [g.system for g in out.groups] == ["stair"]
    (c,) = out.comparisons
    assert (c.b, c.seeds_b) == ("dsi", [42])
    assert c.note == "dsi has one run: its seed variance is not in the test"
    assert len(c.rare_runs) == 3
    again = seed_spread(*args)
    assert again is not None and seeds_to_dict(again) == seeds_to_dict(out)


@needs_data
def test_bad_seed_runs_are_rejected_with_the_reason(whole_child, tmp_path) -> None:
    subs = tmp_path / "subs"
    shutil.copytree(ROOT / "submissions" / "dsi", subs / "dsi")
    perturbed_copy(subs / "dsi", subs / "dsi-seed3", 4, 0.05, name="dsi-seed3")  # says 3, is 4
    perturbed_copy(subs / "dsi", subs / "dsi-seed42", 42, 0.05)  # dsi's own seed
    perturbed_copy(subs / "dsi", subs / "stair-seed1", 1, 0.05)  # no stair to repeat
    perturbed_copy(subs / "dsi", subs / "dsi-seed5", 5, 0.05)  # fine
    dataset = load(whole_child)
    reports = [validate_submission(f, dataset, "test") for f in _folders(subs)]
    main_runs, runs, rejected = split_seed_runs(reports, [])
    assert [r.system for r in main_runs] == ["dsi"] and [r.system for r in runs] == ["dsi-seed5"]
    reasons = {r.system: r.errors[-1].message for r in rejected}
    assert "the name says seed 3 but meta.json's 'seed' is 4" in reasons["dsi-seed3"]
    assert "seed 42 is also the seed of 'dsi'" in reasons["dsi-seed42"]
    assert "named 'stair', and there is none" in reasons["stair-seed1"]
    assert all(r.errors[-1].code == "seed-group" for r in rejected)


@needs_data
def test_seed_runs_add_a_section_and_change_nothing_else(
    whole_child: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed board with seed runs beside it: every committed byte stays, and the check
    against the committed expectations still passes; the seed spread is all that is new."""
    subs = tmp_path / "submissions"
    for folder in _folders(ROOT / "submissions"):
        shutil.copytree(folder, subs / folder.name)
    for seed in (101, 102):  # seeds no committed run uses
        perturbed_copy(subs / "stair", subs / f"stair-seed{seed}", seed, 0.08)
    perturbed_copy(subs / "dsi", subs / "dsi-seed101", 101, 0.08)
    monkeypatch.chdir(tmp_path)
    out = Path("leaderboard") / "whole-child"
    result = build_leaderboard(whole_child, "submissions", out, check=BOARD / "expected.json")
    assert summary(result.checks) == "check: OK (0 of 135 failed)"
    _assert_committed_board(out)
    text = (out / "leaderboard.json").read_text()
    groups = {g["system"]: g["seeds"] for g in json.loads(text)["seeds"]["groups"]}
    doc = read_document(out / "leaderboard.json")  # the seeds section typed, written back as read
    assert doc.seeds == result.seeds and doc.extra == {} and to_json(doc) == text
    assert groups["stair"][0] == 42 and groups["stair"][-2:] == [101, 102]
    assert groups["dsi"][0] == 42 and groups["dsi"][-1] == 101
    md = (out / "leaderboard.md").read_text()
    stair = next(g for g in result.seeds.groups if g.system == "stair")
    cell = f"{stair.mean('R@1') * 100:.1f} ± {stair.sd('R@1') * 100:.1f}"
    assert f"| stair | {', '.join(map(str, groups['stair']))} | {cell} |" in md
    assert "### stair − dsi over seeds (pre-declared pair)" in md
    html = (out / "index.html").read_text()
    assert '<h2 id="seed-spread">' in html and cell in html and 'id="seed-rare-stair-dsi"' in html
