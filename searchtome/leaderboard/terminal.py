"""The leaderboard on a terminal: the main table in aligned columns and the rejected folders,
a submitter's text made printable."""

from __future__ import annotations

import sys
from typing import IO

from searchtome.leaderboard.results import MARK, LeaderboardResult
from searchtome.leaderboard.tables import MAIN_HEADER, main_table_rows
from searchtome.leaderboard.text import term_text


def print_main_table(result: LeaderboardResult, file: IO[str] | None = None) -> None:
    out = file or sys.stdout
    header = list(MAIN_HEADER)
    rows = [[term_text(c) for c in r] for r in main_table_rows(result)]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    print(
        f"SearchTome leaderboard, {result.split} split (macro average over domains, %; "
        f"{MARK} = differs significantly from {term_text(result.best)})",
        file=out,
    )
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), file=out)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)), file=out)


def print_rejected(result: LeaderboardResult, file: IO[str] | None = None) -> None:
    """Each rejected folder and its first errors (folder names and reasons are a submitter's)."""
    out = file or sys.stdout
    for report in result.rejected:
        print(f"rejected: {term_text(report.path)}", file=out)
        for line in report.lines(10):
            print(f"  {term_text(line)}", file=out)
