"""The TREC run parser: ``qid Q0 docno rank score tag`` lines, ordered by score as trec_eval does.

The rank column is read but not trusted: each query's ids are ordered by score, ties by id
descending (see ``searchtome.metrics.ties.TIE_RULE``), and a rank column that disagrees is a
warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise

from searchtome.metrics.ties import TIE_RULE, count_ties, order_by_score
from searchtome.runs import Run
from searchtome.submissions.lines import Limits, Source, iter_lines
from searchtome.submissions.problems import Predictions, Problem, ProblemLog, quote
from searchtome.submissions.trec_fast import read_fast


@dataclass
class _Rows:
    """The well-formed lines of a run file, grouped by query: (docno, score, rank)."""

    per_query: dict[str, list[tuple[str, float, int]]] = field(default_factory=dict)
    seen: dict[tuple[str, str], int] = field(default_factory=dict)  # (qid, docno) -> line
    line_of: dict[str, int] = field(default_factory=dict)
    tags: dict[str, None] = field(default_factory=dict)  # insertion-ordered set


def parse_trec(path: Source, name: str | None, limits: Limits) -> Predictions:
    """Parse a TREC run file; the run is named ``name``, else its one tag, else the file stem.

    Well-formed runs are read by the vectorised reader (:mod:`.trec_fast`); anything it does
    not take is read line by line here, which reports every problem with its line.
    """
    fast = read_fast(path, limits)
    if fast is not None:
        problems = ProblemLog(
            _warnings(str(path), fast.tied, fast.rank_disagrees, fast.tags),
            keep_per_kind=limits.max_problems_per_kind,
        )
        run_name = name or (fast.tags[0] if len(fast.tags) == 1 else path.stem)
        run = Run(name=run_name, rankings=fast.rankings, scores=fast.scores)
        return Predictions(path, "trec", run, fast.line_of, problems, tuple(fast.tags))
    shown = str(path)
    problems = ProblemLog(keep_per_kind=limits.max_problems_per_kind)  # capped per kind
    rows = _Rows()
    for lineno, text, problem in iter_lines(path, limits):
        if problem is not None:
            problems.append(problem)
            continue
        assert text is not None
        found = _add_line(rows, text.split(), shown, lineno)
        if found is not None:
            problems.append(found)
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    tied = 0
    rank_disagrees = 0
    for qid, query_rows in rows.per_query.items():
        rank_of = {doc: rank for doc, _, rank in query_rows}
        ordered = order_by_score((doc, score) for doc, score, _ in query_rows)
        rankings[qid] = tuple(d for d, _ in ordered)
        scores[qid] = tuple(s for _, s in ordered)
        if count_ties(scores[qid]):
            tied += 1
        ranks = [rank_of[d] for d in rankings[qid]]
        if any(b < a for a, b in pairwise(ranks)):
            rank_disagrees += 1
    problems = _one_field_count_problem(problems, shown) + _warnings(
        shown, tied, rank_disagrees, list(rows.tags)
    )
    tags = rows.tags
    run_name = name or (next(iter(tags)) if len(tags) == 1 else path.stem)
    run = Run(name=run_name, rankings=rankings, scores=scores)
    return Predictions(path, "trec", run, rows.line_of, problems, tuple(tags))


TREC_SUFFIXES = (".trec", ".run")
# Whitespace-separated fields on a line that reads as a TREC run with a field missing or extra.
NEAR_TREC_FIELDS = range(4, 8)


def looks_like_trec(path: Source, limits: Limits) -> bool:
    """Whether a file the content sniffer took for JSON lines is a TREC run gone wrong: its first
    non-blank line is not JSON-like and has 4 to 7 fields, or the name ends in .trec / .run."""
    for _, text, problem in iter_lines(path, limits):
        if problem is not None:
            return False
        assert text is not None
        stripped = text.strip()
        if stripped:
            if stripped[0] in "{[":
                return False
            named = any(s in TREC_SUFFIXES for s in path.suffixes)
            return named or len(stripped.split()) in NEAR_TREC_FIELDS
    return False


def _one_field_count_problem(problems: list[Problem], shown: str) -> list[Problem]:
    """When no line has 6 fields, one problem for the file instead of one per line."""
    wrong = [p for p in problems if p.code == "trec-fields"]
    if not wrong or len(wrong) != len(problems):
        return problems
    counts = sorted({int(p.message.rsplit(" ", 1)[1]) for p in wrong})
    how_many = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    message = (
        f"looks like a TREC run with the wrong number of fields: its lines have {how_many} "
        f"fields, not the 6 of 'qid Q0 docno rank score tag' ({len(wrong)} line(s))"
    )
    return [Problem(shown, wrong[0].line, "line", message, "trec-fields")]


def _add_line(rows: _Rows, parts: list[str], shown: str, lineno: int) -> Problem | None:
    """Add one split line to ``rows``; the problem when it is malformed (blank lines are fine)."""
    if not parts:
        return None
    if len(parts) != 6:
        message = f"expected 6 fields 'qid Q0 docno rank score tag', got {len(parts)}"
        return Problem(shown, lineno, "line", message, "trec-fields")
    qid, _, doc, rank_text, score_text, tag = parts
    try:
        rank = int(rank_text)
    except ValueError:
        return Problem(shown, lineno, "rank", f"{quote(rank_text)} is not an integer", "type")
    try:
        score = float(score_text)
    except ValueError:
        return Problem(shown, lineno, "score", f"{quote(score_text)} is not a number", "type")
    if not math.isfinite(score):
        return Problem(
            shown, lineno, "score", f"{quote(score_text)} is not a finite number", "type"
        )
    if (qid, doc) in rows.seen:
        message = (
            f"duplicate of line {rows.seen[qid, doc]} ({quote(doc)} for query {quote(qid)}); each id may "
            "appear once per ranking"
        )
        return Problem(shown, lineno, "docno", message, "duplicate-id")
    rows.seen[qid, doc] = lineno
    rows.line_of.setdefault(qid, lineno)
    rows.tags[tag] = None
    rows.per_query.setdefault(qid, []).append((doc, score, rank))
    return None


def _warnings(shown: str, tied: int, rank_disagrees: int, tags: list[str]) -> list[Problem]:
    out: list[Problem] = []
    if tied:
        message = (
            f"tied scores in {tied} ranking(s); ordered by id descending among equal scores "
            f"(tie rule: {TIE_RULE})"
        )
        out.append(Problem(shown, None, "score", message, "tied-scores", "warning"))
    if rank_disagrees:
        message = (
            f"the rank column disagrees with the score order in {rank_disagrees} ranking(s); "
            "the score order is used, as trec_eval does"
        )
        out.append(Problem(shown, None, "rank", message, "rank-order", "warning"))
    if len(tags) > 1:
        message = (
            f"{len(tags)} different run tags ({', '.join(tags[:3])}...); one file "
            "should hold one run"
        )
        out.append(Problem(shown, None, "tag", message, "tags", "warning"))
    return out
