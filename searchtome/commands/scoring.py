"""``searchtome score``, ``compare`` and ``leaderboard``."""

from __future__ import annotations

import argparse
from typing import Any


def _add_source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="dataset folder or hf://ORG/NAME[@REV]")
    src.add_argument(
        "--qrels", help="TREC qrels (or BEIR qrels TSV) instead of a dataset; no ToC-based counts"
    )
    p.add_argument("--split", default="test", help="split to score (default: test)")
    p.add_argument(
        "--run-format",
        choices=("auto", "jsonl", "trec"),
        default="auto",
        help="predictions format (default: detected from the content)",
    )
    p.add_argument(
        "--measures",
        nargs="+",
        metavar="M",
        help="measures by ir_measures name (default: R@1 R@3 R@5 nDCG@3 RR@10)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "score",
        help="score submissions or TREC runs",
        description=(
            "Score submission folders, predictions files or TREC runs. Aggregates: per book, per "
            "domain, macro over domains ('aggregate', the paper's average) and micro. Missing "
            "queries are misses."
        ),
    )
    p.add_argument("submission", nargs="+", help="submission folder(s) or run file(s)")
    _add_source(p)
    p.add_argument("--by-query", action="store_true", help="include per-query values")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.set_defaults(func=_score)

    p = subparsers.add_parser(
        "compare",
        help="paired randomization tests between submissions",
        description=(
            "Two-sided paired randomization (sign-flip) tests of every pair of systems, or of each "
            "against --control, per domain and overall, with Holm–Bonferroni (default) or "
            "Benjamini–Hochberg correction and paired-bootstrap confidence intervals."
        ),
    )
    p.add_argument("submission", nargs="+", help="submission folders or run files (two or more)")
    _add_source(p)
    p.add_argument("--control", help="compare every system with this one only")
    p.add_argument("--permutations", type=int, default=10_000, metavar="B")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=2_000,
        metavar="N",
        help="bootstrap resamples for the CIs (0: none)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--correction", choices=("holm", "bh", "none"), default="holm")
    p.add_argument(
        "--family",
        choices=("measure", "all"),
        default="measure",
        help="tests corrected together: per measure and level (default) or all at once",
    )
    p.add_argument("--format", choices=("markdown", "latex", "json"), default="markdown")
    p.set_defaults(func=_compare, measures_default=("R@1", "R@3", "nDCG@3"))

    p = subparsers.add_parser(
        "leaderboard",
        help="validate, score and render every submission",
        description=(
            "Validate and score every submission folder and write leaderboard.md, "
            "leaderboard.json, index.html and figures/ into --out."
        ),
    )
    p.add_argument("--data", required=True, help="dataset folder or hf://ORG/NAME[@REV]")
    p.add_argument("--submissions", required=True, help="folder holding one folder per submission")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--split", default="test")
    p.add_argument("--permutations", type=int, default=10_000, metavar="B")
    p.add_argument("--bootstrap", type=int, default=2_000, metavar="N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument(
        "--check", metavar="EXPECTED.json", help="compare scores with recorded expectations"
    )
    p.add_argument(
        "--write-expected",
        metavar="FILE",
        help="record the current scores as expectations (for later --check runs)",
    )
    p.add_argument(
        "--tolerance", type=float, default=0.005, help="default tolerance for --write-expected"
    )
    p.set_defaults(func=_leaderboard)


def _load(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    from searchtome.dataset.layout import load
    from searchtome.metrics.measures import Qrels
    from searchtome.submissions.format import read_submission

    data = load(args.data) if args.data else None
    qrels = Qrels.from_file(args.qrels) if args.qrels else None
    subs = [read_submission(s, args.run_format) for s in args.submission]
    return data, qrels, subs


def _score(args: argparse.Namespace) -> int:
    from searchtome.leaderboard.render import score_csv, score_json, score_table
    from searchtome.leaderboard.scoring import score_runs
    from searchtome.metrics.measures import DEFAULT_MEASURES

    data, qrels, subs = _load(args)
    board = score_runs(
        subs, data=data, qrels=qrels, split=args.split, measures=args.measures or DEFAULT_MEASURES
    )
    if args.format == "json":
        print(score_json(board, args.by_query), end="")
    elif args.format == "csv":
        print(score_csv(board, args.by_query), end="")
    else:
        print(score_table(board, args.by_query), end="")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from searchtome.errors import SearchTomeError
    from searchtome.leaderboard.scoring import score_runs
    from searchtome.leaderboard.significance import compare

    data, qrels, subs = _load(args)
    if len(subs) < 2:
        raise SearchTomeError("compare needs at least two submissions")
    measures = args.measures or list(args.measures_default)
    board = score_runs(subs, data=data, qrels=qrels, split=args.split, measures=measures)
    report = compare(
        board.per_query_arrays(),
        measures=board.measures,
        groups=board.groups(),
        control=args.control,
        permutations=args.permutations,
        bootstrap=args.bootstrap,
        seed=args.seed,
        correction=args.correction,
        alpha=args.alpha,
        family=args.family,
    )
    print(report.render(args.format), end="" if args.format == "json" else "\n")
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from searchtome.leaderboard.build import build_leaderboard

    result = build_leaderboard(
        args.data,
        args.submissions,
        args.out,
        split=args.split,
        permutations=args.permutations,
        bootstrap=args.bootstrap,
        seed=args.seed,
        alpha=args.alpha,
        check=args.check,
    )
    result.print_main_table()
    for report in result.rejected:
        print(f"rejected: {report.path}")
        for line in report.lines(10):
            print(f"  {line}")
    print(f"wrote {result.out_dir}/leaderboard.md, leaderboard.json, index.html")
    if args.write_expected:
        result.write_expected(args.write_expected, tolerance=args.tolerance)
        print(f"wrote expectations to {args.write_expected}")
    if result.checks is not None:
        print(result.check_table())
        if not result.check_ok:
            return 1
    return 1 if result.rejected else 0
