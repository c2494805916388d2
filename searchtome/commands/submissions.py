"""``searchtome submissions``: a team's own runs on a scoring service (participant side)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from searchtome.service.replies import OwnRun


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``searchtome submissions`` to the command line."""
    p = subparsers.add_parser(
        "submissions",
        help="list your team's runs on a scoring service; hide or show one",
        description=(
            "List the runs your team uploaded to a `searchtome server`: state, public scores, "
            "final mark, hidden flag. --hide ID leaves a run off the leaderboard, --show ID "
            "puts it back."
        ),
    )
    p.add_argument("--server", required=True, metavar="URL", help="e.g. https://board.example.org")
    p.add_argument("--token", required=True, help="your team's token (from the organisers)")
    p.add_argument("--hide", metavar="ID", help="leave this run off the leaderboard")
    p.add_argument("--show", metavar="ID", help="put this hidden run back on the leaderboard")
    p.add_argument("--json", action="store_true", help="print the server's reply as JSON")
    p.set_defaults(func=_run)


def _line(run: OwnRun) -> str:
    scores = (run.scores or {}).get("public")
    shown = "-"
    if scores:
        agg = scores.aggregate
        shown = f"{agg['R@1'] * 100:.1f} / {agg['R@3'] * 100:.1f} / {agg['nDCG@3'] * 100:.1f}"
    marks = ",".join(m for m in ("final", "hidden") if getattr(run, m)) or "-"
    error = f"  {run.error}" if run.error else ""
    return (
        f"{run.id:<17} {run.submitted:<21} {run.state:<9} {marks:<13} {shown:<20} "
        f"{run.system}{error}"
    )


def _run(args: argparse.Namespace) -> int:
    import json

    from searchtome.service.client import Server, set_hidden

    if args.hide:
        set_hidden(args.server, args.token, args.hide, True)
    if args.show:
        set_hidden(args.server, args.token, args.show, False)
    reply = Server(args.server, args.token).runs()
    if args.json:
        print(json.dumps(reply.to_dict(), indent=2))
        return 0
    runs = reply.runs
    print(f"team {reply.team}: {len(runs)} run{'' if len(runs) == 1 else 's'}, newest first")
    print(
        f"{'id':<17} {'submitted (UTC)':<21} {'state':<9} {'marks':<13} "
        f"{'public R@1 / R@3 / nDCG@3':<20} system"
    )
    for run in runs:
        print(_line(run))
    left = reply.remaining
    if left is not None:
        print(f"uploads left today (UTC): {left.today} of {left.daily_limit}")
    return 0
