"""Text outputs of ``searchtome score``: table, JSON and CSV."""

from __future__ import annotations

import io
from typing import Any

from searchtome.io import dumps
from searchtome.leaderboard.scoring import Scoreboard
from searchtome.leaderboard.text import percent, term_text
from searchtome.metrics.budget import TOKENIZER
from searchtome.metrics.scorer import budget_measures, in_percent, is_count

PERCENT_NOTE = "values in % ({agg})"
COUNT_NOTE = "; {names}: counts summed over queries"
TOKENS_NOTE = "; {names}: mean tokens"
TOKENIZER_NOTE = "; tokens counted by {name}"


def _cell(measure: str, value: float) -> str:
    """A rate in % with one decimal; a count (NumQ, NumRet...) as a whole number; a mean of
    tokens (TokensToGold) with one decimal."""
    if is_count(measure):
        return f"{value:,.0f}"
    return percent(value) if in_percent(measure) else f"{value:,.1f}"


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    rows = [[term_text(c) for c in r] for r in rows]  # names are a submitter's text
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    lines = [
        "  ".join(
            h.ljust(w) if i < 2 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines) + "\n"


def score_table(board: Scoreboard, by_query: bool = False) -> str:
    names = board.all_measures
    agg = "macro average over domains" if board.queries is not None else "mean over queries"
    rows = []
    for s in board.systems:
        values = board.aggregate(s.system)
        answered = f"{int(s.answered.sum())}/{len(board.query_ids)}"
        rows.append([s.system, answered, str(s.n_empty), *(_cell(m, values[m]) for m in names)])
    counts = [m for m in names if is_count(m)]
    amounts = [m for m in names if not is_count(m) and not in_percent(m)]
    note = (
        PERCENT_NOTE.format(agg=agg)
        + (COUNT_NOTE.format(names=", ".join(counts)) if counts else "")
        + (TOKENS_NOTE.format(names=", ".join(amounts)) if amounts else "")
        + (TOKENIZER_NOTE.format(name=TOKENIZER.name) if budget_measures(names) else "")
    )
    out = [f"{board.split} split, {len(board.query_ids):,} queries; " + note]
    out.append(_text_table(["System", "Answered", "Empty", *names], rows))
    out.append("Empty: queries answered with an empty ranking (scored as misses).\n")
    if board.queries is not None:
        for s in board.systems:
            out.append(f"{term_text(s.system)} by domain:")
            domain_rows = [
                [
                    domain,
                    str(int((board.queries.domain == domain).sum())),
                    *(_cell(m, v[m]) for m in names),
                ]
                for domain, v in board.per_domain(s.system).items()
            ]
            out.append(_text_table(["Domain", "Queries", *names], domain_rows))
    if by_query:
        for s in board.systems:
            out.append(f"{term_text(s.system)} by query:")
            q_rows = [
                [qid, "", *(f"{s.per_query[m][i]:.4f}" for m in names)]
                for i, qid in enumerate(board.query_ids)
            ]
            out.append(_text_table(["Query", "", *names], q_rows))
    return "\n".join(out)


def score_json(board: Scoreboard, by_query: bool = False) -> str:
    return dumps([board.system_json(s.system, by_query) for s in board.systems])


def score_csv(board: Scoreboard, by_query: bool = False) -> str:
    """One tidy table: system, level (aggregate/micro/domain/book/query), key, measures (fractions)."""
    import csv  # only for --format csv

    names = board.all_measures
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["system", "level", "key", "n_queries", *names])

    def row(system: str, level: str, key: str, n: int, values: dict[str, Any]) -> None:
        writer.writerow([system, level, key, n, *(repr(float(values[m])) for m in names)])

    for s in board.systems:
        n_all = len(board.query_ids)
        row(s.system, "aggregate", "", n_all, board.aggregate(s.system))
        row(s.system, "micro", "", n_all, board.micro(s.system))
        if board.queries is not None:
            for domain, values in board.per_domain(s.system).items():
                row(s.system, "domain", domain, int((board.queries.domain == domain).sum()), values)
            for book, values in board.per_book(s.system).items():
                row(s.system, "book", book, int((board.queries.book == book).sum()), values)
        if by_query:
            for i, qid in enumerate(board.query_ids):
                row(s.system, "query", qid, 1, {m: s.per_query[m][i] for m in names})
    return buf.getvalue()
