"""``searchtome compare``: paired randomization tests between submissions."""

from __future__ import annotations

import argparse

from searchtome.commands.score import add_source_arguments, load_inputs

# Fewer than `score` reports: each measure adds a family of tests to correct for.
COMPARE_MEASURES: tuple[str, ...] = ("R@1", "R@3", "nDCG@3")


def add_test_arguments(p: argparse.ArgumentParser) -> None:
    """The randomization test's and the bootstrap's options, shared with ``leaderboard``."""
    p.add_argument(
        "--permutations",
        type=int,
        default=10_000,
        metavar="B",
        help="random sign flips per significance test (default: %(default)s)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=2_000,
        metavar="N",
        help="paired-bootstrap resamples for the confidence intervals (0: none; "
        "default: %(default)s)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the flips and resamples (default: 0)"
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level of the corrected p-values (default: 0.05; the CIs stay 95%%)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
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
    add_source_arguments(p, COMPARE_MEASURES)
    p.add_argument("--control", help="compare every system with this one only")
    add_test_arguments(p)
    p.add_argument(
        "--correction",
        choices=("holm", "bh", "none"),
        default="holm",
        help="multiple-testing correction: Holm-Bonferroni, Benjamini-Hochberg or none "
        "(default: holm)",
    )
    p.add_argument(
        "--family",
        choices=("measure", "all"),
        default="measure",
        help="tests corrected together: per measure and level (default) or all at once",
    )
    p.add_argument(
        "--format",
        choices=("markdown", "latex", "json"),
        default="markdown",
        help="(default: markdown)",
    )
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    from searchtome.errors import SearchTomeError
    from searchtome.leaderboard.scoring import score_runs
    from searchtome.leaderboard.significance import CompareOptions, compare

    data, qrels, subs = load_inputs(args)
    if len(subs) < 2:
        raise SearchTomeError("compare needs at least two submissions")
    measures = args.measures or list(COMPARE_MEASURES)
    board = score_runs(subs, data=data, qrels=qrels, split=args.split, measures=measures)
    report = compare(
        board.per_query_arrays(),
        measures=board.measures,
        groups=board.groups(),
        control=args.control,
        options=CompareOptions(
            permutations=args.permutations,
            bootstrap=args.bootstrap,
            seed=args.seed,
            correction=args.correction,
            alpha=args.alpha,
            family=args.family,
        ),
    )
    print(report.render(args.format), end="" if args.format == "json" else "\n")
    return 0
