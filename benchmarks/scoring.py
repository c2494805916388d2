"""Scoring and significance speed: searchtome vs ranx, side by side.

8 systems × 20,000 queries (one gold leaf among 500, top-10 runs): score R@1, R@3, R@5, nDCG@3,
RR@10 and run all 28 pairwise randomization tests × 3 measures (R@1, R@3, nDCG@3) — searchtome
at 10,000 sign flips, ranx ``compare(..., stat_test="fisher")`` at its default 1,000
permutations. ranx's numba functions are compiled on a tiny input first, so its time is warm.

    nice -n 10 python benchmarks/scoring.py            # full run (ranx takes minutes)
    python benchmarks/scoring.py --queries 2000 --skip-ranx

Needs the ``bench`` extra (``pip install -e .[bench]``) for the ranx side.

The scale case, ``--scale`` (no ranx), is the leaderboard at ``--systems`` × ``--queries``: a
synthetic dataset (six books, one per domain) and one submission per system are written to a
temporary folder, then every stage runs as the ``leaderboard`` command would — validation,
scoring, all pairwise tests (every pair of systems × R@1, R@3, nDCG@3 × overall and six
domains, ``--permutations`` sign flips, ``--bootstrap`` intervals), and ``build_leaderboard``
end to end (its own validation and scoring, the tests against the top system, figures,
markdown, HTML, JSON). Each stage prints its wall time and the process's peak RSS during it.

    nice -n 10 python benchmarks/scoring.py --scale --systems 50 --queries 20000
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from searchtome.leaderboard.document import read_document
from searchtome.leaderboard.significance import CompareOptions, compare
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
        options=CompareOptions(permutations=permutations, bootstrap=bootstrap, seed=seed),
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


# -- the scale case ----------------------------------------------------------------------------

DOMAINS = ("Education", "Finance", "Law", "Medicine", "Natural Sciences", "Social Sciences")


def _peak_rss_mib() -> float:
    """The process's RSS high-water mark (VmHWM), Linux."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024


def _reset_peak() -> None:
    """Restart the high-water mark from the current RSS (Linux >= 4.0), so each stage's peak
    is its own."""
    Path("/proc/self/clear_refs").write_text("5")


Stage = tuple[str, float, float, float]  # name, wall s, CPU s, peak RSS MiB


@contextmanager
def stage(name: str, rows: list[Stage]) -> Iterator[None]:
    """Time the block: wall and CPU seconds (CPU time tells a busy machine from a slow stage)."""
    _reset_peak()
    start, cpu = time.perf_counter(), time.process_time()
    yield
    rows.append((name, time.perf_counter() - start, time.process_time() - cpu, _peak_rss_mib()))
    print(
        f"  {name}: {rows[-1][1]:.1f} s ({rows[-1][2]:.1f} s CPU), peak RSS {rows[-1][3]:,.0f} MiB",
        flush=True,
    )


def scale_dataset(root: Path, n_queries: int, n_leaves: int, seed: int) -> Path:
    """Six books (one per domain), 2-level ToCs of ``n_leaves`` leaves in all, ``n_queries``
    test questions with uniformly drawn gold leaves, written with the real dataset writer."""
    from searchtome.dataset.layout import BookInfo, write_dataset, write_manifest
    from searchtome.records import Book, Leaf, Query, TocNode, node_id

    rng = np.random.default_rng(seed)
    books, toc, leaves = [], [], []
    per_book = max(1, n_leaves // len(DOMAINS))
    for b, domain in enumerate(DOMAINS, 1):
        bid = f"book{b}"
        books.append(BookInfo(Book(bid, domain, f"Book {b}"), n_pages=per_book))
        for c in range(1, (per_book + 9) // 10 + 1):
            cid = node_id(bid, (c,))
            toc.append(TocNode(cid, bid, f"Chapter {c}", 1, c, None, False, (f"Chapter {c}",)))
            for i in range(1, min(10, per_book - 10 * (c - 1)) + 1):
                path = (f"Chapter {c}", f"Section {c}.{i}")
                lid = node_id(bid, (c, i))
                toc.append(TocNode(lid, bid, path[1], 2, c, cid, True, path))
                leaves.append(Leaf(lid, bid, path, path[1], f"Text of {lid}.", c, c))
    by_book: dict[str, list[str]] = {}
    for leaf in leaves:
        by_book.setdefault(leaf.book_id, []).append(leaf.leaf_id)
    book_of = rng.integers(0, len(DOMAINS), n_queries)
    queries = []
    for i, b in enumerate(book_of):
        bid = f"book{b + 1}"
        gold = by_book[bid][int(rng.integers(0, len(by_book[bid])))]
        queries.append(Query(f"q{i:06d}", bid, f"Question {i}?", gold, "test"))
    write_dataset(root, books=books, toc=toc, leaves=leaves, queries=queries)
    write_manifest(root, {"name": "scale-synthetic", "seed": seed})
    return root


def scale_submissions(data: Path, out: Path, n_systems: int, depth: int, seed: int) -> Path:
    """One submission folder per system; system ``s`` puts the gold leaf first with a
    probability rising with ``s`` and somewhere in its top ``depth`` otherwise, or not at all."""
    from searchtome.dataset.loader import load
    from searchtome.submissions import make_meta, write_submission

    ds = load(data)
    queries = ds.queries("test")
    leaves = {b: [x.leaf_id for x in ds.leaves(b)] for b in ds.book_ids()}
    rng = np.random.default_rng(seed)
    for s in range(n_systems):
        skill = 0.3 + 0.5 * s / max(n_systems - 1, 1)
        rankings = {}
        for q in queries:
            pool = [x for x in leaves[q.book_id] if x != q.leaf_id]
            ids = [pool[j] for j in rng.permutation(len(pool))[:depth]]
            u = rng.random()
            if u < skill:
                ids[0] = q.leaf_id
            elif u < skill + 0.3:
                ids[int(rng.integers(1, depth))] = q.leaf_id
            rankings[q.query_id] = tuple(ids)
        scores = {qid: tuple(float(depth - k) for k in range(depth)) for qid in rankings}
        name = f"sys{s:02d}"
        meta = make_meta(
            name,
            description="synthetic scale-test system",
            command="benchmarks/scoring.py --scale",
            dataset_revision="scale-synthetic",
            hardware="synthetic",
            date_="2026-01-01",
        )
        write_submission(out / name, Run(name, rankings, scores), meta)
    return out


def _timed_stages(data: Path, subs: Path, args: argparse.Namespace) -> list[Stage]:
    """``build_leaderboard`` first, in a fresh process (its peak is its own), then its parts
    one by one, with every pair tested instead of each system against the top one."""
    from searchtome.dataset.loader import load
    from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
    from searchtome.leaderboard.scoring import score_runs
    from searchtome.submissions.validate import validate_submission

    rows: list[Stage] = []
    with stage("build_leaderboard: validate, score, vs top, render", rows):
        options = LeaderboardOptions(
            permutations=args.permutations, bootstrap=args.bootstrap, seed=args.seed
        )
        build_leaderboard(data, subs, subs.parent / "board", options)
    with stage("load the dataset", rows):
        ds = load(data)
    with stage("validate and read the submissions", rows):
        folders = sorted(p for p in subs.iterdir() if p.is_dir())
        reports = [validate_submission(f, ds, "test") for f in folders]
        assert all(r.ok for r in reports), [str(e) for r in reports for e in r.errors][:3]
    with stage("score", rows):
        board = score_runs([r.submission for r in reports], data=ds, split="test")
    n_pairs = len(folders) * (len(folders) - 1) // 2
    with stage(f"all {n_pairs:,} pairs x 3 measures x 7 scopes", rows):
        report = compare(
            board.per_query_arrays(list(TESTED)),
            measures=list(TESTED),
            groups=board.groups(),
            options=CompareOptions(
                permutations=args.permutations, bootstrap=args.bootstrap, seed=args.seed
            ),
        )
    raw = sum(t.p < 0.05 for t in report.tests if t.scope == "overall")
    print(
        f"    {len(report.tests):,} tests; overall pairs with p < 0.05 before correction: {raw:,}, "
        f"after Holm: {sum(t.significant for t in report.tests if t.scope == 'overall'):,} "
        f"(with {n_pairs:,} pairs per family the smallest Holm-adjusted p is "
        f"{n_pairs:,}/{args.permutations + 1:,} = {n_pairs / (args.permutations + 1):.3f})"
    )
    return rows


def run_scale(args: argparse.Namespace) -> None:
    print(
        f"scale case: {args.systems} systems x {args.queries:,} queries, {args.leaves} leaves in "
        f"6 books, top-{args.depth}; {args.permutations:,} permutations, {args.bootstrap:,} "
        f"bootstrap; numpy {np.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="searchtome-scale-") as tmp:
        root = Path(args.workdir or tmp)
        start = time.perf_counter()
        data, subs = root / "data", root / "subs"
        if not (args.workdir and subs.is_dir()):  # --workdir: written once, reused after
            scale_dataset(data, args.queries, args.leaves, args.seed)
            scale_submissions(data, subs, args.systems, args.depth, args.seed)
        print(f"  setup (not timed below): {time.perf_counter() - start:.1f} s")
        rows = _timed_stages(data, subs, args)
        board = read_document(root / "board" / "leaderboard.json")
        print(f"  leaderboard rows: {len(board.systems)}")
    print(f"{'stage':52} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>13}")
    for name, seconds, cpu, peak in rows:
        print(f"{name:52} {seconds:7.1f} {cpu:7.1f} {peak:13,.0f}")
    total = [sum(r[i] for r in rows) for i in (1, 2)]
    print(f"{'total':52} {total[0]:7.1f} {total[1]:7.1f} {max(r[3] for r in rows):13,.0f}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


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
    ap.add_argument("--scale", action="store_true", help="the leaderboard scale case (no ranx)")
    ap.add_argument("--bootstrap", type=int, default=2_000, help="--scale: bootstrap samples")
    ap.add_argument("--workdir", help="--scale: keep the synthetic data here and reuse it")
    args = ap.parse_args()
    if args.scale:
        run_scale(args)
        return

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
