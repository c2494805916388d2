"""``searchtome submit``: upload a run to a scoring service (participant side)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``searchtome submit`` to the command line."""
    p = subparsers.add_parser(
        "submit",
        help="upload a submission to a scoring service",
        description=(
            "Upload a submission folder (or a bare predictions file with --meta) to a "
            "`searchtome server`. With --wait, print the scores when they are ready; a refused "
            "or rejected upload exits non-zero with the validator's one-line error."
        ),
    )
    p.add_argument("submission", help="submission folder, or a predictions / TREC run file")
    p.add_argument("--server", required=True, metavar="URL", help="e.g. https://board.example.org")
    p.add_argument("--token", required=True, help="your team's token (from the organisers)")
    p.add_argument("--meta", help="meta.json for a bare predictions file")
    p.add_argument("--wait", action="store_true", help="wait for the score and print it")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import json

    from searchtome.service.client import submit
    from searchtome.service.replies import Accepted

    result = submit(args.submission, args.server, args.token, meta=args.meta, wait=args.wait)
    if isinstance(result, Accepted):
        print(f"accepted as {result.id} (queued); check with --wait or GET {result.url}")
        return 0
    print(f"{result.id}: scored")
    for scope, part in (result.scores or {}).items():
        agg = part.aggregate
        print(
            f"  {scope} ({part.n_queries} queries): R@1 {agg['R@1'] * 100:.1f}  "
            f"R@3 {agg['R@3'] * 100:.1f}  nDCG@3 {agg['nDCG@3'] * 100:.1f}  "
            f"non-leaf@1 {agg['NonLeaf@1'] * 100:.1f}  invalid@1 {agg['Invalid@1'] * 100:.1f}"
        )
    if args.verbose:
        print(json.dumps(result.to_dict(), indent=2))
    return 0
