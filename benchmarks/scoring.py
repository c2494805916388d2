"""Scoring and significance speed: searchtome vs ranx, side by side.

8 systems × 20,000 queries (one gold leaf among 500, top-10 runs): score R@1, R@3, R@5, nDCG@3,
RR@10 and run all 28 pairwise randomization tests × 3 measures (R@1, R@3, nDCG@3) — searchtome
at 10,000 sign flips, ranx ``compare(..., stat_test="fisher")`` at its default 1,000
permutations. ranx's numba functions are compiled on a tiny input first, so its time is warm.

    nice -n 10 python benchmarks/scoring.py            # full run (ranx takes minutes)
    python benchmarks/scoring.py --queries 2000 --skip-ranx

Needs the ``bench`` extra (``pip install -e .[bench]``) for the ranx side.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from searchtome.leaderboard.significance import compare

from searchtome.metrics import DEFAULT_MEASURES, Qrels, evaluate_arrays
from searchtome.records import Run

SCORED = DEFAULT_MEASURES
TESTED = ("R@1", "R@3", "nDCG@3")
RANX_NAMES = {"R@1": "recall@1", "R@3": "recall@3", "nDCG@3": "ndcg@3"}


def synthetic(n_queries: int, n_systems: int, n_leaves: int, depth: int, seed: int):
    """Qrels with one gold per query and runs whose gold rank depends on the system's skill."""
    rng = np.random.default_rng(seed)
    leaves = np.asarray([f"book/{i // 25 + 1}.{i % 25 + 1}" for i in range(n_leaves)])
    gold = rng.integers(0, n_leaves, n_queries)
    qids = [f"q{i:06d}" for i in range(n_queries)]
    qrels = {q: {str(leaves[g]): 1} for q, g in zip(qids, gold, strict=True)}
    runs = []
    for s in range(n_systems):
        skill = 0.35 + 0.06 * s
        rankings, scores = {}, {}
        for i, q in enumerate(qids):
            others = rng.choice(n_leaves - 1, depth, replace=False)
            others = others + (others >= gold[i])  # skip the gold index
            ids = [str(leaves[j]) for j in others]
            u = rng.random()
            if u < skill:
                ids[0] = str(leaves[gold[i]])
            elif u < skill + 0.3:
                ids[int(rng.integers(1, depth))] = str(leaves[gold[i]])
            rankings[q] = tuple(ids)
            scores[q] = tuple(float(depth - k) + 0.5 * float(rng.random()) for k in range(depth))
        runs.append(Run(name=f"sys{s}", rankings=rankings, scores=scores))
    domains = [f"domain{i % 6}" for i in range(n_queries)]
    return qrels, runs, domains


def ours(qrels: dict, runs: list[Run], permutations: int, bootstrap: int, groups, seed: int):
    start = time.perf_counter()
    q = Qrels(qrels)
    per_query = {r.name: evaluate_arrays(r, q, SCORED) for r in runs}
    scored = time.perf_counter()
    report = compare(
        {name: {m: v[m] for m in TESTED} for name, v in per_query.items()},
        measures=list(TESTED),
        groups=groups,
        permutations=permutations,
        bootstrap=bootstrap,
        seed=seed,
    )
    done = time.perf_counter()
    return report, scored - start, done - scored


def ranx_side(qrels: dict, runs: list[Run], permutations: int) -> tuple[float, object]:
    import ranx

    def to_ranx(run: Run) -> ranx.Run:
        return ranx.Run(
            {q: dict(zip(ids, run.scores[q], strict=True)) for q, ids in run.rankings.items()},
            name=run.name,
        )

    # Compile ranx's numba kernels outside the timed region.
    small_q = dict(list(qrels.items())[:50])
    small = [
        ranx.Run(
            {q: dict(zip(r.rankings[q], r.scores[q], strict=True)) for q in small_q}, name=r.name
        )
        for r in runs[:2]
    ]
    ranx.compare(
        ranx.Qrels(small_q),
        small,
        metrics=list(RANX_NAMES.values()),
        stat_test="fisher",
        n_permutations=10,
    )
    start = time.perf_counter()
    report = ranx.compare(
        ranx.Qrels(qrels),
        [to_ranx(r) for r in runs],
        metrics=list(RANX_NAMES.values()),
        stat_test="fisher",
        n_permutations=permutations,
        max_p=0.05,
    )
    return time.perf_counter() - start, report


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--systems", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=500)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--ranx-permutations", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-ranx", action="store_true")
    args = ap.parse_args()

    print(
        f"{args.systems} systems x {args.queries:,} queries, one gold among {args.leaves} leaves, "
        f"top-{args.depth} runs; {platform.processor() or platform.machine()}, numpy {np.__version__}"
    )
    qrels, runs, domains = synthetic(args.queries, args.systems, args.leaves, args.depth, args.seed)
    n_pairs = args.systems * (args.systems - 1) // 2
    rows = []
    report, t_score, t_test = ours(qrels, runs, args.permutations, 0, None, args.seed)
    rows.append(
        (
            "searchtome, overall (like ranx)",
            args.permutations,
            t_score,
            t_test,
            n_pairs * len(TESTED),
        )
    )
    again, _, _ = ours(qrels, runs, args.permutations, 0, None, args.seed)
    same = all(a.p == b.p for a, b in zip(report.tests, again.tests, strict=True))
    _, t_score_d, t_test_d = ours(qrels, runs, args.permutations, 0, domains, args.seed)
    rows.append(
        (
            "searchtome, macro + 6 domains",
            args.permutations,
            t_score_d,
            t_test_d,
            n_pairs * len(TESTED) * 7,
        )
    )
    _, t_score_b, t_test_b = ours(qrels, runs, args.permutations, 2_000, domains, args.seed)
    rows.append(
        (
            "searchtome, + 2,000 bootstrap CIs",
            args.permutations,
            t_score_b,
            t_test_b,
            n_pairs * len(TESTED) * 7,
        )
    )
    ranx_time = None
    if not args.skip_ranx:
        ranx_time, _ = ranx_side(qrels, runs, args.ranx_permutations)
        rows.append(
            (
                "ranx compare(fisher)",
                args.ranx_permutations,
                float("nan"),
                ranx_time,
                2 * n_pairs * len(TESTED),
            )
        )

    print(
        f"{'run':36} {'permutations':>12} {'score s':>8} {'tests s':>8} {'total s':>8} {'tests':>6}"
    )
    for name, perms, ts, tt, n_tests in rows:
        total = tt if np.isnan(ts) else ts + tt
        ts_text = "   (incl.)" if np.isnan(ts) else f"{ts:8.2f}"
        print(f"{name:36} {perms:12,} {ts_text:>8} {tt:8.2f} {total:8.2f} {n_tests:6}")
    print(f"identical p-values on a second seeded run: {same}")
    if ranx_time is not None:
        total_ours = t_score + t_test
        print(
            f"ratio ranx / searchtome (like for like, {args.ranx_permutations:,} vs "
            f"{args.permutations:,} permutations): {ranx_time / total_ours:.0f}x"
        )


if __name__ == "__main__":
    main()
