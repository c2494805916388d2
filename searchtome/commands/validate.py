"""``searchtome validate``: check submissions against a dataset split."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``searchtome validate`` to the command line."""
    p = subparsers.add_parser(
        "validate",
        help="check a submission folder or run file against a dataset split",
        description=(
            "Report every problem of a submission as 'file:line: field: what is wrong' and exit "
            "non-zero when there are errors. Non-leaf and invalid ids are counted, not errors."
        ),
    )
    p.add_argument(
        "submission", nargs="+", help="submission folder(s) or predictions/TREC run file(s)"
    )
    p.add_argument("--data", required=True, help="dataset folder or hf://ORG/NAME[@REV]")
    p.add_argument("--split", default="test", help="split the predictions answer (default: test)")
    p.add_argument(
        "--partial",
        action="store_true",
        help="allow missing queries (they are scored as misses)",
    )
    p.add_argument(
        "--run-format",
        choices=("auto", "jsonl", "trec"),
        default="auto",
        help="predictions format (default: detected from the content)",
    )
    p.add_argument(
        "--no-meta",
        action="store_true",
        help="do not require meta.json (for bare run files; not enough for a leaderboard entry)",
    )
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.add_argument(
        "--max-problems",
        type=int,
        default=20,
        metavar="N",
        help="print at most N problems of each kind (0: all kept, the first 1000 of each kind; "
        "default 20)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: they pull in numpy, which `searchtome --help` should not load.
    from searchtome.dataset.loader import load
    from searchtome.submissions.validate import validate_submission

    dataset = load(args.data)
    reports = []
    for item in args.submission:
        path = Path(item)
        reports.append(
            validate_submission(
                path,
                dataset,
                args.split,
                partial=args.partial,
                run_format=args.run_format,
                require_meta=not args.no_meta and path.is_dir(),
                keep_run=False,  # only counts are printed: memory stays bounded by the dataset
            )
        )
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False))
    else:
        limit = args.max_problems or None
        for report in reports:
            for line in report.lines(limit):
                print(line)
            print(report.summary())
    return 0 if all(r.ok for r in reports) else 1
