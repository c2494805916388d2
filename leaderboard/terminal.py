"""The leaderboard on a terminal: the main table in aligned columns, names made printable."""

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
