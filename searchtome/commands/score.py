"""``searchtome score``: per-query measures and their aggregates, as a table, JSON or CSV."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.metrics.defaults import DEFAULT_MEASURES


def add_source_arguments(
    p: argparse.ArgumentParser, default_measures: tuple[str, ...] = DEFAULT_MEASURES
) -> None:
    """The inputs shared by ``score`` and ``compare``: a dataset or qrels, split, format, measures."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="dataset folder or hf://ORG/NAME[@REV]")
    src.add_argument(
        "--qrels",
        help="TREC qrels, a BEIR qrels TSV, or a blind release's private folder, instead of a "
        "dataset; no ToC-based counts",
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
        help=f"measures by ir_measures name (default: {' '.join(default_measures)}); names "
        "beyond R, P, Success, nDCG and RR (AP, Judged@10...) need the 'ir' extra; the "
        "token-budget measures InBudget@B (B tokens) and TokensToGold need --data",
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
    add_source_arguments(p)
    p.add_argument("--by-query", action="store_true", help="include per-query values")
    p.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="(default: table)"
    )
    p.set_defaults(func=_score)


def load_inputs(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    """The dataset (or ``None``), the qrels (or ``None``) and the submissions named on the line."""
    from searchtome.metrics.qrels import Qrels
    from searchtome.submissions.reader import read_submission

    data = None
    if args.data:  # the dataset machinery (parquet, JSON, the Hub) only when a dataset is named
        from searchtome.dataset.loader import load

        data = load(args.data)
    subs = [read_submission(s, args.run_format) for s in args.submission]
    if args.qrels and Path(args.qrels).is_dir():
        # A blind release's private folder: its qrels, and runs in source ids renamed to public ones.
        from searchtome.dataset.blind import private_qrels, read_private, rename_run

        split = read_private(args.qrels).split
        if args.split != split:
            raise SearchTomeError(
                f"{args.qrels}: holds the {split} split's qrels, not {args.split}"
            )
        qrels = Qrels(private_qrels(args.qrels), name=f"{split} (private)")
        return data, qrels, [rename_run(sub, args.qrels) for sub in subs]
    qrels = Qrels.from_file(args.qrels) if args.qrels else None
    return data, qrels, subs


def _score(args: argparse.Namespace) -> int:
    from searchtome.leaderboard.render import score_csv, score_json, score_table
    from searchtome.leaderboard.scoring import score_runs

    data, qrels, subs = load_inputs(args)
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
