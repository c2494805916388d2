"""What the token-budget measures cost a leaderboard build, and what their tokenizer counts.

On a real dataset and submissions folder (default: the committed whole-child board), in one
process: the whole ``build_leaderboard`` (the reference), then the parts the budget measures
add to it — counting every section's tokens (once per dataset), pricing every system's
rankings (``InBudget@512``, ``InBudget@2048``) and the two extra measures in the test against
the top system — each timed as the best of ``--repeats`` and printed as a share of the build.
Then the tokenizer's figures: tokens per whitespace-separated word over the leaves' text, the
book's tokens and the ceiling of each budget (the gold section alone fits); last, per system, R@1
beside the budget measures, TokensToGold, the mean tokens of its rank-1 sections and of the
gold sections it ranks first, and the same for a perfect ranking (the figures docs/results.md
quotes).

    python benchmarks/budget.py --data data/whole-child --submissions submissions/

CPU time (``time.process_time``) is printed beside wall time: on a shared machine the wall
time moves with the load, the CPU time much less. Print ``uptime`` beside the figures.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from searchtome.dataset.loader import load
from searchtome.leaderboard.build import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.results import BUDGET_MEASURES, MAIN_MEASURES
from searchtome.leaderboard.scoring import score_runs
from searchtome.leaderboard.significance import compare
from searchtome.metrics.budget import TOKENIZER, _count_sections, section_tokens
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.scorer import budget_values
from searchtome.records import Run
from searchtome.settings import set_progress
from searchtome.submissions.reader import read_submission


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, float]:
    """The least wall and CPU seconds of ``repeats`` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/whole-child")
    ap.add_argument("--submissions", default="submissions/")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    set_progress(False)
    dataset = load(args.data)
    with tempfile.TemporaryDirectory() as out:
        result = build_leaderboard(dataset, args.submissions, Path(out), LeaderboardOptions())
        build = best_of(
            args.repeats,
            lambda: build_leaderboard(dataset, args.submissions, Path(out), LeaderboardOptions()),
        )
    folders = [Path(args.submissions) / e.path for e in result.entries]
    subs = [read_submission(f) for f in folders]
    board = score_runs(subs, data=dataset, measures=(*DEFAULT_MEASURES, *BUDGET_MEASURES))
    qids = board.query_ids
    counting = best_of(args.repeats, lambda: _count_sections(dataset))
    pricing = best_of(
        args.repeats,
        lambda: [budget_values(s.run.rankings, dataset, qids, list(BUDGET_MEASURES)) for s in subs],
    )
    order = [e.system for e in result.entries]
    options = LeaderboardOptions().testing

    def tests(measures: list[str]) -> Callable[[], Any]:
        arrays = board.per_query_arrays(measures)
        return lambda: compare(
            {s: arrays[s] for s in order},
            measures=measures,
            groups=board.groups(),
            control=order[0],
            options=options,
        )

    main_tests = best_of(args.repeats, tests(list(MAIN_MEASURES)))
    all_tests = best_of(args.repeats, tests([*MAIN_MEASURES, *BUDGET_MEASURES]))
    extra = tuple(a - b for a, b in zip(all_tests, main_tests, strict=True))
    print(f"{len(subs)} systems × {len(qids):,} queries; best of {args.repeats}")
    print(f"{'part':38s} {'wall s':>8s} {'cpu s':>8s} {'cpu % of build':>15s}")
    rows = [
        ("build_leaderboard (reference)", build),
        ("count section tokens (once)", counting),
        ("price rankings, 2 budgets, all systems", pricing),
        ("2 more measures in the tests", extra),
    ]
    for name, (wall, cpu) in rows:
        print(f"{name:38s} {wall:8.3f} {cpu:8.3f} {cpu / build[1] * 100:14.1f}%")
    added = counting[1] + pricing[1] + extra[1]
    print(f"{'budget parts together':38s} {'':8s} {added:8.3f} {added / build[1] * 100:14.1f}%")
    tokenizer_figures(dataset, result.budget)
    reading_table(subs, dataset, qids)


def tokenizer_figures(dataset: Any, summary: Any) -> None:
    texts = [leaf.text for leaf in dataset.leaves()]
    tokens = sum(TOKENIZER.count(t) for t in texts)
    words = sum(len(t.split()) for t in texts)
    sizes = np.asarray([TOKENIZER.count(t) for t in texts])
    print(
        f"tokenizer {TOKENIZER.name}: {tokens:,} tokens, {words:,} words, {tokens / words:.2f} per word"
    )
    gold = [TOKENIZER.count(dataset.leaf(q.leaf_id).text) for q in dataset.queries("test")]
    print(
        f"leaf sections: {len(sizes)}, smallest {sizes.min():,}, median {np.median(sizes):.0f}, "
        f"largest {sizes.max():,} tokens; test gold sections: median {np.median(gold):.0f}"
    )
    if summary is not None:
        for book, n in summary.book_tokens.items():
            print(f"book {book}: {n:,} tokens")
        for m, v in summary.ceiling.items():
            print(f"ceiling {m}: {v * 100:.1f}%")


def reading_table(subs: list[Any], dataset: Any, qids: list[str]) -> None:
    """Per system (macro over domains): R@1, InBudget@512/2048, TokensToGold, the mean tokens of
    its rank-1 sections and of the gold sections it ranks first; a perfect ranking first."""
    names = ["R@1", *BUDGET_MEASURES, "TokensToGold"]
    queries = dataset.query_by_id
    perfect = Run("a perfect ranking", {q: (queries[q].leaf_id,) for q in qids})
    runs = [perfect, *(sub.run for sub in subs)]
    board = score_runs(runs, data=dataset, measures=names)
    tokens = section_tokens(dataset)
    print(
        f"{'system':18s} {'R@1':>6s} {'@512':>6s} {'@2048':>6s} {'ToGold':>8s} "
        f"{'rank-1':>7s} {'hit@1':>7s}"
    )
    for run, s in zip(runs, board.systems, strict=True):
        agg = board.aggregate(s.system)
        first = [(q, run.rankings[q][0]) for q in qids if run.rankings.get(q)]
        cost = [tokens.cost(doc, queries[q].book_id) for q, doc in first]
        hits = [c for (q, doc), c in zip(first, cost, strict=True) if doc == queries[q].leaf_id]
        cells = [agg[m] * 100 for m in names[:3]]
        print(
            f"{s.system:18s} {cells[0]:6.1f} {cells[1]:6.1f} {cells[2]:6.1f} "
            f"{agg['TokensToGold']:8,.0f} {_mean(cost):7,.0f} {_mean(hits):7,.0f}"
        )


def _mean(values: list[int]) -> float:
    return float(np.mean(values)) if values else 0.0


if __name__ == "__main__":
    main()
