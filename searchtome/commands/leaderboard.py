"""``searchtome leaderboard``: validate, score, test and render every submission."""

from __future__ import annotations

import argparse

from searchtome.commands.compare import add_test_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        help="validate, score and render every submission",
        description=(
            "Validate and score every submission folder and write leaderboard.md, "
            "leaderboard.json, index.html and figures/ into --out."
        ),
    )
    p.add_argument("--data", required=True, help="dataset folder or hf://ORG/NAME[@REV]")
    p.add_argument(
        "--qrels",
        metavar="PRIVATE",
        help="private folder of a blind release: its held-back split is scored (runs in that "
        "release's public query ids)",
    )
    p.add_argument("--submissions", required=True, help="folder holding one folder per submission")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--runs",
        metavar="RUNS.txt",
        help="rank only the folders this file names, one per line (the committed board: "
        "leaderboard/whole-child/runs.txt); default: every folder",
    )
    p.add_argument("--split", default="test", help="split to score (default: test)")
    add_test_arguments(p)
    p.add_argument(
        "--pair",
        nargs=2,
        metavar=("A", "B"),
        default=["stair", "dsi"],
        help="systems whose R@1 difference is tested per training-question bucket and on rare "
        "leaves (default: stair dsi; skipped with a note when either is missing)",
    )
    p.add_argument("--no-pair", action="store_true", help="leave the A - B analysis out")
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


def _leaderboard(args: argparse.Namespace) -> int:
    from searchtome.leaderboard.build import LeaderboardOptions, build_leaderboard
    from searchtome.leaderboard.checks import check_table, passed
    from searchtome.leaderboard.expectations import Expectations, write_expectations
    from searchtome.leaderboard.terminal import print_main_table, print_rejected

    data = args.data
    if args.qrels:
        from searchtome.dataset.blind import with_private
        from searchtome.dataset.loader import load

        data = with_private(load(args.data), args.qrels)
    options = LeaderboardOptions(
        split=args.split,
        permutations=args.permutations,
        bootstrap=args.bootstrap,
        seed=args.seed,
        alpha=args.alpha,
        pair=None if args.no_pair else (args.pair[0], args.pair[1]),
    )
    result = build_leaderboard(
        data, args.submissions, args.out, options, check=args.check, runs=args.runs
    )
    print_main_table(result)
    print_rejected(result)
    print(f"wrote {result.out_dir}/leaderboard.md, leaderboard.json, index.html")
    if args.write_expected:
        write_expectations(args.write_expected, Expectations.of(result, args.tolerance))
        print(f"wrote expectations to {args.write_expected}")
    if result.checks is not None:
        print(check_table(result.checks))
        if not passed(result.checks):
            return 1
    return 1 if result.rejected else 0
