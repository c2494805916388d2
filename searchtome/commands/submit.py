"""``searchtome submit``: upload a run to a scoring service (participant side)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from searchtome.service.replies import Remaining


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
        _print_remaining(result.remaining)
        return 0
    print(f"{result.id}: scored")
    names = {"NonLeaf@1": "non-leaf@1", "Invalid@1": "invalid@1"}
    for scope, part in (result.scores or {}).items():
        agg = part.aggregate
        shown = "  ".join(
            f"{names.get(m, m)} {agg[m] * 100:.1f}"
            for m in ("R@1", "R@3", "nDCG@3", "NonLeaf@1", "Invalid@1")
            if m in agg  # the count measures are left out of rounded and ladder replies
        )
        print(f"  {scope} ({part.n_queries} queries): {shown}")
    for note in (result.public_hidden, result.private_note):
        if note:
            print(f"  {note}")
    if result.ladder is not None and not result.ladder.improved:
        print(f"  public: not a clear improvement; showing your best run {result.ladder.shows}")
    _print_remaining(result.remaining)
    if args.verbose:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


def _print_remaining(left: Remaining | None) -> None:
    if left is None:
        return
    phase = f", {left.in_phase} in phase {left.phase!r}" if left.in_phase is not None else ""
    print(f"  remaining: {left.today} of {left.daily_limit} today (UTC){phase}")
