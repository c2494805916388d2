"""The token-budget table: each system's R@1 beside its InBudget@512 and InBudget@2048, with the
test against the top system of each, for ``leaderboard.md`` and ``index.html``.

The values and tests come from the build (the budget measures are scored with the others and
tested by the same randomization test, one Holm family per measure); this module adds the facts
the table's note states (the tokenizer, the ceiling a perfect ranking reaches, the book's size)
and the rows both pages print.
"""

from __future__ import annotations

import numpy as np

from searchtome.dataset.loader import Dataset
from searchtome.leaderboard.comparison import OVERALL
from searchtome.leaderboard.results import (
    BUDGET_MEASURES,
    MARK,
    BudgetSummary,
    Entry,
    LeaderboardResult,
)
from searchtome.leaderboard.scoring import Scoreboard
from searchtome.leaderboard.text import fmt_p, percent
from searchtome.metrics.budget import TOKENIZER, section_tokens
from searchtome.metrics.scorer import budget_values

BUDGET_HEADING = "Token budget"
# R@1 first: the table sets each budget beside the rank measure it qualifies.
TABLE_MEASURES: tuple[str, ...] = ("R@1", *BUDGET_MEASURES)


def budget_summary(board: Scoreboard, dataset: Dataset) -> BudgetSummary | None:
    """The table's facts; None when the board has no budget values or no domains."""
    if board.queries is None or not all(m in board.measures for m in BUDGET_MEASURES):
        return None
    gold_first = {
        qid: (gold,) for qid, gold in zip(board.query_ids, board.queries.gold, strict=True)
    }
    perfect = budget_values(gold_first, dataset, board.query_ids, list(BUDGET_MEASURES))
    domains = board.queries.domain
    labels = sorted(set(domains.tolist()))
    ceiling = {
        m: float(np.mean([values[domains == d].mean() for d in labels]))
        for m, values in perfect.items()
    }
    books = sorted(set(board.queries.book.tolist()))
    tokens = section_tokens(dataset).book
    return BudgetSummary(
        tokenizer=TOKENIZER.to_dict(),
        measures=list(BUDGET_MEASURES),
        ceiling=ceiling,
        book_tokens={b: int(tokens.get(b, 0)) for b in books},
    )


def shown(result: LeaderboardResult) -> bool:
    """Whether the pages show the table: a summary, and every entry scored on the measures."""
    return result.budget is not None and all(
        m in e.aggregate for e in result.entries for m in TABLE_MEASURES
    )


def header() -> list[str]:
    out = ["#", "System"]
    for m in TABLE_MEASURES:
        out += [m, f"p {m}"]
    return out


def p_cell(result: LeaderboardResult, entry: Entry, measure: str) -> str:
    """The Holm-adjusted p of ``entry`` against the top system; ``top`` for the top system."""
    if entry.system == result.best:
        return "top"
    if result.comparison is None or result.best is None:
        return "–"
    try:
        t = result.comparison.test(result.best, entry.system, measure, OVERALL)
    except KeyError:
        return "–"
    return fmt_p(t.p_adjusted)


def value_cell(entry: Entry, measure: str) -> str:
    text = percent(entry.aggregate[measure])
    return f"{text}{MARK}" if entry.marks.get(measure) else text


def rows(result: LeaderboardResult) -> list[list[str]]:
    """One row per system under :func:`header`, unescaped, in the main table's order."""
    out = []
    for e in result.entries:
        row = [str(e.rank), e.system]
        for m in TABLE_MEASURES:
            row += [value_cell(e, m), p_cell(result, e, m)]
        out.append(row)
    return out


def budget_note(result: LeaderboardResult) -> str:
    """What the table's numbers mean: the reading, the tokenizer, the ceiling, the test."""
    assert result.budget is not None
    b = result.budget
    ceilings = ", ".join(f"{m} {percent(b.ceiling[m])}" for m in b.measures if m in b.ceiling)
    books = _books(b.book_tokens)
    return (
        "InBudget@B: the share of queries whose gold section ends within the first B tokens when "
        "the ranked sections are read in order (a section with children costs its whole subtree, "
        "an id that is not in the book nothing). A system that ranks the gold first reaches "
        f"{ceilings}: the rest of the gold sections are longer than the budget. Tokens: "
        f"{b.tokenizer['name']} ({b.tokenizer['description']}); {books}. p: the Holm-adjusted "
        f"p of the paired randomization test against the top system ({result.best}), one family "
        f"per measure, as in the main table; {MARK}: significant at alpha = "
        f"{result.settings.alpha}."
    )


def _books(book_tokens: dict[str, int]) -> str:
    parts = [f"{name} has {n:,} tokens" for name, n in sorted(book_tokens.items())]
    return "; ".join(parts) if parts else "no book"
