"""Seed groups: one system trained several times with different seeds, reported as one spread.

A **seed run** is a submission whose system (``meta.json``'s ``system``, the folder's name) is
``<system>-seed<N>`` and whose ``meta.json`` records ``"seed": N`` (what ``searchtome run
<baseline> --out submissions/<system>-seed<N> --seed N`` writes). It repeats the accepted
submission named ``<system>``: the two form a **seed group**; every other system is a group of
one. Seed runs take
no rank: the main table and the analyses keep showing the run named like the system, so a
board without seed runs is byte-identical to one built before this module existed.

For each group with two runs or more the page and ``leaderboard.json`` (``seeds``) report the
mean ± sd over seeds of every measure; for the build's pair (``--pair``, default stair − dsi) and
for the first system against every other group with seeds, the difference with a **two-level
bootstrap** over seeds and questions beside an **exact permutation test over the runs** (a
run-level p: never below 0.10 with 3 + 3 runs), R@1 for every pair of runs, and the pre-declared
rare-leaf test for every pair of runs and pooled, each also with **whole gold leaves resampled**
(questions on one leaf are not independent). Each run's dtype and CPU come from its meta.json.
Why these tests, and their limits: docs/seeds.md.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from searchtome.dataset.loader import Dataset
from searchtome.leaderboard.analyses import RARE_MAX, Resampling, paired_analysis
from searchtome.leaderboard.results import (
    MAIN_MEASURES,
    ClusteredTest,
    GroupComparison,
    GroupTest,
    PairedTest,
    RunPairTest,
    SeedGroup,
    SeedReport,
    SeedRun,
    SeedSettings,
    relative,
)
from searchtome.leaderboard.scoring import Scoreboard, score_runs
from searchtome.leaderboard.significance import (
    BLOCK,
    CI_DECIMALS,
    EQUAL_TOLERANCE,
    Engine,
    at_floor,
    mcnemar,
)
from searchtome.leaderboard.text import floor_text
from searchtome.submissions.meta import RunMeta, parse_run_meta
from searchtome.submissions.problems import Problem
from searchtome.submissions.schema import META_FILE
from searchtome.submissions.validate import ValidationReport

SEED_NAME = re.compile(r"^(?P<base>.+?)-seed(?P<seed>[0-9]+)$")
# Config keys that say how a run was executed, not what was trained: a seed run may differ there.
# cache_lower_layers is the same training by another path (float rounding apart, as the thread
# count is), so it is one of them.
EXECUTION_KEYS = frozenset({"threads", "device", "cache_adapters", "adapter", "cache_lower_layers"})
RARE_MEASURE = "R@1"  # the pre-declared rare-leaf test's measure (as in analyses)


def seed_name(system: str) -> tuple[str, int] | None:
    """``stair-seed1`` → ``("stair", 1)``; ``None`` for a name without the ``-seed<N>`` suffix."""
    match = SEED_NAME.match(system)
    return (match["base"], int(match["seed"])) if match else None


# -- which folders are seed runs ------------------------------------------------------------------


def _doc(report: ValidationReport) -> RunMeta:
    """The run's ``meta.json``, typed (an empty document when the folder gave none)."""
    return parse_run_meta(report.submission.meta if report.submission is not None else {})


def _seed_problem(report: ValidationReport, bases: Mapping[str, ValidationReport]) -> str:
    """Why ``report`` cannot join its seed group ("" when it can)."""
    parsed = seed_name(report.system)
    assert parsed is not None
    base, seed = parsed
    if base not in bases:
        return (
            f"a seed run repeats an accepted submission named {base!r}, and there is none; "
            f"commit the run it repeats or rename this one (docs/seeds.md)"
        )
    mine, theirs = _doc(report), _doc(bases[base])
    recorded = mine.seed
    if recorded != seed:
        return f"the name says seed {seed} but meta.json's 'seed' is {recorded!r}; make them agree"
    if theirs.seed == seed:
        return f"seed {seed} is also the seed of {base!r}: a seed run needs a seed of its own"
    if mine.info.baseline and theirs.info.baseline and mine.info.baseline != theirs.info.baseline:
        return (
            f"runs baseline {mine.info.baseline!r}, but {base!r} runs {theirs.info.baseline!r}: "
            "not a seed of the same system"
        )
    return ""


def split_seed_runs(
    accepted: list[ValidationReport], rejected: list[ValidationReport]
) -> tuple[list[ValidationReport], list[ValidationReport], list[ValidationReport]]:
    """``(main board, seed runs, rejected)``: seed runs leave the board, bad ones are rejected.

    Without any ``-seed<N>`` folder the lists come back as they were.
    """
    candidates = [r for r in accepted if seed_name(r.system) is not None]
    if not candidates:
        return accepted, [], rejected
    main = [r for r in accepted if seed_name(r.system) is None]
    bases = {r.system: r for r in main}
    runs, bad = [], []
    for report in candidates:
        problem = _seed_problem(report, bases)
        if problem:
            where = str(report.path / META_FILE)
            report.problems.append(Problem(where, None, "system", problem, "seed-group"))
            bad.append(report)
        else:
            runs.append(report)
    return main, runs, (sorted([*rejected, *bad], key=lambda r: r.path) if bad else rejected)


def platform(meta: RunMeta) -> str:
    """The run's dtype and CPU as meta.json records them ("" when it records neither).

    Seed runs made on other machines differ in these as well as in the seed; the page shows them
    beside each run so that a reader sees it.
    """
    info = meta.info
    machine = info.machine or {}
    isa = machine.get("isa") or {}
    cpu = str(machine.get("cpu") or "")
    if cpu and machine.get("isa_known"):
        if isa.get("amx_bf16"):
            cpu += " with AMX"
        elif isa.get("avx512_bf16"):
            cpu += " with AVX512-BF16"
        elif not isa.get("avx512f"):
            cpu += " without AVX-512"
    return ", ".join(x for x in (info.dtype or "", cpu) if x)


def config_differences(base: Mapping[str, Any] | None, run: Mapping[str, Any] | None) -> list[str]:
    """The config keys (execution keys aside) in which a seed run's config differs from its
    system's."""
    a, b = base or {}, run or {}
    keys = sorted((set(a) | set(b)) - EXECUTION_KEYS)
    return [f"{k}: {a.get(k)!r} → {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


# -- the two-level bootstrap ----------------------------------------------------------------------


def _counts(rng: np.random.Generator, rows: int, size: int) -> np.ndarray:
    """Resampling counts (rows × size): each row draws ``size`` of ``size`` with replacement."""
    draws = rng.integers(0, size, size=(rows, size))
    flat = (draws + (np.arange(rows) * size)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size).astype(np.float64)


def _cluster_weights(rng: np.random.Generator, clusters: np.ndarray, rows: int) -> np.ndarray:
    """Weights (rows × questions, each row summing to 1) from drawing whole clusters.

    A question weighs as often as its cluster was drawn, so a replicate's mean is a ratio: the
    drawn clusters' sum over their number of questions.
    """
    _, inverse = np.unique(clusters, return_inverse=True)
    drawn = _counts(rng, rows, int(inverse.max()) + 1)[:, inverse]
    return drawn / drawn.sum(axis=1, keepdims=True)


def two_level_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    groups: Sequence[str] | None,
    replicates: int,
    seed_seq: np.random.SeedSequence,
    clusters: Sequence[str] | None = None,
) -> np.ndarray:
    """Bootstrap replicates of mean(a's runs) − mean(b's runs), resampling seeds and questions.

    ``a`` (runs × queries) and ``b`` hold per-query values in one query order. Each replicate
    draws the questions with replacement (within each group, so the macro mean over groups keeps
    the group sizes; the same questions for every run: the runs stay paired), then each system's
    runs with replacement, and takes the difference of the two systems' mean run values.
    ``clusters`` (one label per query, e.g. its gold leaf): draw whole clusters instead of
    questions, keeping every question of a drawn cluster together.
    """
    a, b = np.atleast_2d(a).astype(np.float64), np.atleast_2d(b).astype(np.float64)
    n = a.shape[1]
    labels = (
        np.zeros(n, dtype=np.int64) if groups is None else np.unique(groups, return_inverse=True)[1]
    )
    members = [np.flatnonzero(labels == g) for g in range(int(labels.max()) + 1)]
    cluster_labels = None if clusters is None else np.asarray([str(c) for c in clusters])
    # Two streams: the questions drawn do not depend on how many runs each system has. Made
    # from the sequence's own entropy, not spawn(), which would give other children next call.
    q_rng, s_rng = (
        np.random.Generator(
            np.random.PCG64(
                np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, k))
            )
        )
        for k in (0, 1)
    )
    out = np.empty(replicates)
    for lo in range(0, replicates, BLOCK):
        rows = min(BLOCK, replicates - lo)
        weights = np.zeros((rows, n))
        for idx in members:  # macro mean: each group weighs 1 / number of groups
            weights[:, idx] = (
                _counts(q_rng, rows, idx.size) / (idx.size * len(members))
                if cluster_labels is None
                else _cluster_weights(q_rng, cluster_labels[idx], rows) / len(members)
            )
        ka = _counts(s_rng, rows, a.shape[0]) / a.shape[0]
        kb = _counts(s_rng, rows, b.shape[0]) / b.shape[0]
        out[lo : lo + rows] = ((weights @ a.T) * ka).sum(1) - ((weights @ b.T) * kb).sum(1)
    return out


def _stream(seed: int, *names: str) -> np.random.SeedSequence:
    """One stream per test, named, so a test's numbers do not depend on which others ran."""
    return np.random.SeedSequence([seed, zlib.crc32("\x1f".join(names).encode())])


def outperform(a: np.ndarray, b: np.ndarray) -> float:
    """P(a run of a beats a run of b), over every pair of runs; a tie counts ½."""
    wins = (a[:, None] > b[None, :]).mean()
    ties = (a[:, None] == b[None, :]).mean()
    return float(wins + 0.5 * ties)


def run_permutation(runs_a: np.ndarray, runs_b: np.ndarray) -> tuple[float, int]:
    """Exact two-sided permutation test over runs: ``(p, relabellings)``.

    Each run is one value. Every way of splitting the pooled runs into groups of the two sizes
    is a relabelling; p is the share whose |mean difference| is at least the observed one (the
    observed split counts). With 3 + 3 runs there are 20 splits and p is never below 2/20.
    """
    a, b = np.asarray(runs_a, dtype=np.float64), np.asarray(runs_b, dtype=np.float64)
    pooled = np.concatenate([a, b])
    total = float(pooled.sum())
    splits = list(combinations(range(pooled.size), a.size))
    sums = np.asarray([pooled[list(idx)].sum() for idx in splits])
    diffs = np.abs(sums / a.size - (total - sums) / b.size)
    observed = abs(float(a.mean() - b.mean()))
    tol = EQUAL_TOLERANCE * max(float(np.abs(pooled).max(initial=0.0)), 1e-300)
    return float(np.count_nonzero(diffs >= observed - tol) / len(splits)), len(splits)


def _bootstrap_p(diffs: np.ndarray, scale: float, replicates: int) -> float:
    """Twice the smaller share of replicates on either side of 0, each ``(c + 1) / (B + 1)``."""
    # A replicate whose difference is 0 counts on both sides; its float value is 0 only up
    # to summation order, which BLAS picks per CPU family (it moved p from 0.040 to 0.041
    # between an Intel and an AMD machine), so the randomization test's tolerance applies.
    tol = EQUAL_TOLERANCE * scale
    below = (np.count_nonzero(diffs <= tol) + 1) / (replicates + 1)
    above = (np.count_nonzero(diffs >= -tol) + 1) / (replicates + 1)
    return float(min(1.0, 2.0 * min(below, above)))


def _scale(a: np.ndarray, b: np.ndarray) -> float:
    return max(float(np.abs(a).max(initial=0.0)), float(np.abs(b).max(initial=0.0)))


def _floor(p: float, replicates: int) -> bool:
    return bool(p <= 2.0 / (replicates + 1) * (1 + 1e-9))


def group_test(
    label: str,
    measure: str,
    a: np.ndarray,
    b: np.ndarray,
    groups: Sequence[str] | None,
    replicates: int,
    seed_seq: np.random.SeedSequence,
) -> GroupTest:
    """``a`` − ``b`` (runs × queries each): observed difference, interval and two-sided p.

    p is twice the smaller share of replicates on either side of 0, each share counted as
    ``(c + 1) / (B + 1)`` so it is never 0 — the smallest level at which the percentile
    interval would exclude 0. No replicates (``--bootstrap 0``): no interval and no p (NaN).
    Beside it, the exact permutation test over the runs alone (:func:`run_permutation`).
    """
    runs_a, runs_b = _run_means(a, groups), _run_means(b, groups)
    p, low, high = float("nan"), float("nan"), float("nan")
    if replicates > 0:
        diffs = two_level_bootstrap(a, b, groups, replicates, seed_seq)
        p = _bootstrap_p(diffs, _scale(a, b), replicates)
        low, high = np.round(np.percentile(diffs, [2.5, 97.5]), CI_DECIMALS)
    p_runs, relabellings = run_permutation(runs_a, runs_b)
    return GroupTest(
        label,
        measure,
        int(a.shape[1]),
        float(runs_a.mean()),
        float(runs_b.mean()),
        float(runs_a.mean() - runs_b.mean()),
        float(low),
        float(high),
        p,
        _floor(p, replicates),
        outperform(runs_a, runs_b),
        p_runs,
        relabellings,
    )


def clustered_test(
    a: np.ndarray,
    b: np.ndarray,
    clusters: Sequence[str],
    replicates: int,
    seed_seq: np.random.SeedSequence,
) -> ClusteredTest | None:
    """``a`` − ``b`` (runs × queries) with whole clusters resampled: interval and two-sided p.

    The plain mean over the queries (no domains), runs resampled as in
    :func:`two_level_bootstrap`; ``None`` without replicates.
    """
    if replicates <= 0:
        return None
    diffs = two_level_bootstrap(a, b, None, replicates, seed_seq, clusters)
    p = _bootstrap_p(diffs, _scale(a, b), replicates)
    low, high = np.round(np.percentile(diffs, [2.5, 97.5]), CI_DECIMALS)
    return ClusteredTest(len(set(clusters)), float(low), float(high), p, _floor(p, replicates))


def _run_means(x: np.ndarray, groups: Sequence[str] | None) -> np.ndarray:
    """Each run's value: the macro mean over groups (the plain mean without groups)."""
    x = np.atleast_2d(x)
    if groups is None:
        return x.mean(axis=1)
    labels = np.asarray(groups)
    return np.mean([x[:, labels == g].mean(axis=1) for g in sorted(set(labels.tolist()))], axis=0)


# -- building the report --------------------------------------------------------------------------


def _parsed(report: ValidationReport) -> tuple[str, int]:
    parsed = seed_name(report.system)
    assert parsed is not None  # only seed runs get here (split_seed_runs)
    return parsed


def _groups(
    board: Scoreboard, runs: list[ValidationReport], order: list[str], root: str
) -> dict[str, SeedGroup]:
    """Every system as a group: its own run first, then its seed runs by seed."""
    by_base: dict[str, list[ValidationReport]] = {}
    for r in runs:
        by_base.setdefault(_parsed(r)[0], []).append(r)
    out = {}
    for system in order:
        s = board.get(system)
        path = relative(s.path or "", root)
        own = parse_run_meta(s.meta)
        group = SeedGroup(
            system,
            [SeedRun(system, own.seed, path, board.aggregate(system), [], platform(own))],
        )
        for r in sorted(by_base.get(system, []), key=lambda r: _parsed(r)[1]):
            group.runs.append(
                SeedRun(
                    r.system,
                    _doc(r).seed,
                    relative(r.path, root),
                    board.aggregate(r.system),
                    config_differences(own.config, _doc(r).config),
                    platform(_doc(r)),
                )
            )
        out[system] = group
    return out


def _run_pair(board: Scoreboard, a: str, b: str, rs: Resampling) -> PairedTest:
    """R@1 of run ``a`` − run ``b`` over all queries: the leaderboard's paired randomization
    test (macro mean over domains, the build's permutations and seed)."""
    va, vb = (board.get(s).per_query[RARE_MEASURE] for s in (a, b))
    engine = Engine(
        np.stack([va, vb], axis=1), board.groups(), [(0, 1)], rs.permutations, rs.bootstrap, rs.seed
    )
    p = float(engine.pvalues()[0][0, 0])
    low, high = engine.intervals()
    obs = engine.observed()[0]
    floor = at_floor(p, rs.permutations, engine.exact())
    return PairedTest(
        "all queries",
        int(va.size),
        float(obs[0]),
        float(obs[1]),
        float(obs[0] - obs[1]),
        float(low[0, 0]),
        float(high[0, 0]),
        p,
        p_at_floor=floor,
        mcnemar_p=mcnemar(va, vb) if floor else None,
        floor=floor_text(rs.permutations) if floor else "",
    )


def _compare(
    board: Scoreboard, ga: SeedGroup, gb: SeedGroup, pre_declared: bool, rs: Resampling
) -> GroupComparison:
    assert board.queries is not None
    groups = board.groups()

    def matrix(g: SeedGroup, measure: str, mask: np.ndarray | None = None) -> np.ndarray:
        rows = np.stack([board.get(r.system).per_query[measure] for r in g.runs])
        return rows if mask is None else rows[:, mask]

    def test(label: str, m: str, mask: np.ndarray | None, by: Sequence[str] | None) -> GroupTest:
        stream = _stream(rs.seed, ga.system, gb.system, label, m)
        return group_test(
            label, m, matrix(ga, m, mask), matrix(gb, m, mask), by, rs.bootstrap, stream
        )

    overall = [test("all queries", m, None, groups) for m in MAIN_MEASURES]
    overall_runs = [
        RunPairTest(x.system, x.seed, y.system, y.seed, _run_pair(board, x.system, y.system, rs))
        for x in ga.runs
        for y in gb.runs
    ]
    rare = board.queries.train_questions <= RARE_MAX
    pooled = None
    runs: list[RunPairTest] = []
    leaves = None
    if rare.any():
        pooled = test(f"≤ {RARE_MAX}", RARE_MEASURE, rare, None)  # plain mean, like analyses
        gold = [g for g, r in zip(board.queries.gold, rare, strict=True) if r]

        def by_leaf(x: np.ndarray, y: np.ndarray, *names: str) -> ClusteredTest | None:
            stream = _stream(rs.seed, *names, "gold leaves", RARE_MEASURE)
            return clustered_test(x, y, gold, rs.bootstrap, stream)

        leaves = by_leaf(
            matrix(ga, RARE_MEASURE, rare), matrix(gb, RARE_MEASURE, rare), ga.system, gb.system
        )
        for x in ga.runs:
            for y in gb.runs:
                one = paired_analysis(board, (x.system, y.system), rs, RARE_MEASURE).rare
                assert one is not None  # the rare set is not empty
                va = board.get(x.system).per_query[RARE_MEASURE][rare]
                vb = board.get(y.system).per_query[RARE_MEASURE][rare]
                leaf = by_leaf(va[None, :], vb[None, :], x.system, y.system, "run pair")
                runs.append(RunPairTest(x.system, x.seed, y.system, y.seed, one, leaf))
    single = [g.system for g in (ga, gb) if len(g.runs) == 1]
    note = (
        f"{' and '.join(single)} has one run: its seed variance is not in the test"
        if single
        else ""
    )
    return GroupComparison(
        ga.system,
        gb.system,
        pre_declared,
        ga.seeds,
        gb.seeds,
        overall,
        RARE_MAX,
        pooled,
        runs,
        note,
        leaves,
        overall_runs,
    )


def seed_spread(
    board: Scoreboard,
    runs: list[ValidationReport],
    dataset: Dataset,
    split: str,
    order: list[str],
    pair: tuple[str, str] | None,
    resampling: Resampling,
    root: str,
) -> SeedReport | None:
    """The seed report, or ``None`` when no system has a seed run (nothing changes then).

    ``board`` holds the main board's runs; the seed runs are scored here on the same queries.
    ``order``: the systems in rank order. Compared: the build's ``pair`` when either system has
    seed runs, then its first system against every other group with seed runs.
    """
    if not runs:
        return None
    extra = score_runs(
        [r.submission for r in runs if r.submission is not None],
        data=dataset,
        split=split,
        measures=board.measures,
    )
    both = Scoreboard(
        board.query_ids, board.measures, [*board.systems, *extra.systems], board.queries, split
    )
    groups = _groups(both, runs, order, root)
    seeded = [g for g in groups.values() if len(g.runs) > 1]
    pairs: list[tuple[str, str, bool]] = []
    if pair is not None and pair[0] in groups and both.queries is not None:
        a = pair[0]
        if pair[1] in groups and len(groups[a].runs) + len(groups[pair[1]].runs) > 2:
            pairs.append((a, pair[1], True))
        pairs += [(a, g.system, False) for g in seeded if g.system not in pair]
    comparisons = [_compare(both, groups[a], groups[b], pre, resampling) for a, b, pre in pairs]
    settings = SeedSettings(resampling.bootstrap, resampling.permutations, resampling.seed)
    return SeedReport(seeded, comparisons, settings)
