"""Rows and sentences that more than one output prints, so they cannot drift apart.

The main table's rows go to ``leaderboard.md`` and the terminal; the settings paragraph and
the short-ranking note go to ``leaderboard.md`` and ``index.html``. Each renderer lays them
out in its own format.
"""

from __future__ import annotations

from collections.abc import Sequence

from searchtome.leaderboard.results import MAIN_MEASURES, MARK, SHORT, Entry, LeaderboardResult
from searchtome.leaderboard.text import percent

MAIN_HEADER = (
    "#",
    "System",
    "R@1",
    "R@3",
    "nDCG@3",
    "Non-leaf@1",
    "Invalid@1",
    "Empty",
    "R@1 micro",
    "Queries",
)


def measure_cell(entry: Entry, measure: str, value: float, marked: bool) -> str:
    """A value in %, marked when it differs from the top system; :data:`SHORT` past the depth."""
    if entry.short(measure):
        return SHORT
    return f"{percent(value)}{MARK}" if marked else percent(value)


def main_table_rows(result: LeaderboardResult) -> list[list[str]]:
    """One row per system under :data:`MAIN_HEADER`, unescaped."""
    rows = []
    for e in result.entries:
        rows.append(
            [
                str(e.rank),
                e.system,
                *(measure_cell(e, m, e.aggregate[m], e.marks.get(m, False)) for m in MAIN_MEASURES),
                f"{e.aggregate['NonLeaf@1'] * 100:.2f}",
                f"{e.aggregate['Invalid@1'] * 100:.2f}",
                f"{e.empty * 100:.2f}",
                percent(e.micro["R@1"]),
                str(e.n_queries),
            ]
        )
    return rows


def short_note(entries: Sequence[Entry], measures: Sequence[str]) -> str:
    """The footnote for :data:`SHORT` cells among ``measures``; empty when there are none."""
    short = [
        f"{e.system} ({e.depth} deep: {', '.join(m for m in measures if e.short(m))})"
        for e in entries
        if any(e.short(m) for m in measures)
    ]
    if not short:
        return ""
    return (
        f"{SHORT}: ranking shorter than k, the measure's cut-off; the system returned fewer "
        f"ids per query than the measure reads, so no value is shown: {'; '.join(short)}."
    )


def settings_text(result: LeaderboardResult) -> str:
    """How the values were computed and tested, in one paragraph."""
    s = result.settings
    return (
        f"Values are macro averages over domains, in %. {MARK} marks a value that differs "
        f"significantly from the top system ({result.best}): two-sided paired randomization test, "
        f"{s.permutations:,} sign flips, seed {s.seed}, Holm–Bonferroni correction within each "
        f"measure (overall tests and per-domain tests are separate families), alpha = {s.alpha}. "
        "Non-leaf@1: the top answer is a ToC node that is not a leaf; Invalid@1: the top answer "
        "exists nowhere in the book; Empty: the ranking is empty (no id at all). "
        f"Tie rule: {s.tie_rule}."
    )


def headline(result: LeaderboardResult) -> str:
    """``Dataset (revision r), test split, 1,758 queries, 1 domain``: the pages' first line."""
    n_dom = len(result.domains)
    return (
        f"{result.facts.line}, {result.split} split, {result.n_queries:,} queries, "
        f"{n_dom} domain{'s' if n_dom != 1 else ''}"
    )
