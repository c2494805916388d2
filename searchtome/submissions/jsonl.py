"""The JSON-lines predictions parser: one ``{"query_id", "leaf_ids", "scores"}`` object a line.

Every line is checked in full, so one pass reports every wrong field of every line. A line with
any error contributes nothing to the run; a query answered twice keeps its first line. Tied
scores keep the submitted order of ``leaf_ids`` (see ``searchtome.metrics.ties.TIE_RULE``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from searchtome.metrics.ties import TIE_RULE, count_ties
from searchtome.runs import Run
from searchtome.submissions.lines import Limits, Source, iter_lines
from searchtome.submissions.problems import Predictions, Problem, ProblemLog, quote
from searchtome.submissions.schema import LINE_FIELDS, REQUIRED_LINE_FIELDS
from searchtome.submissions.strictjson import is_number, loads_strict, type_name

# Records an error on the current line: (field, message, code).
Report = Callable[[str, str, str], None]


@dataclass(frozen=True)
class Answer:
    """One line that names a query: its ranking when every field is right, else ``ok`` is false."""

    line: int
    query_id: str
    leaf_ids: tuple[str, ...]
    scores: tuple[float, ...] | None
    ok: bool


def parse_jsonl(path: Source, name: str, limits: Limits) -> Predictions:
    """Parse a JSON-lines predictions file into a run named ``name``, collecting every problem."""
    parser = LineParser(str(path), ProblemLog(keep_per_kind=limits.max_problems_per_kind))
    for answer in parser.answers(path, limits):
        if answer.ok:
            parser.rankings[answer.query_id] = answer.leaf_ids
            if answer.scores is not None:
                parser.scores[answer.query_id] = answer.scores
    parser.add_warnings()
    run = Run(name=name, rankings=parser.rankings, scores=parser.scores or None)
    return Predictions(path, "jsonl", run, parser.line_of, parser.problems)


class LineParser:
    """Reads a JSON-lines file one line at a time, holding nothing of a line once it is checked.

    :meth:`answers` yields each line that names a query not seen before; what a caller keeps of
    it (the whole run for the scorer, only counts for the validator) decides the memory used.
    ``remember(query_id)`` says which queries' lines are remembered for the duplicate check
    (default all); the validator remembers only the split's own, so a file of millions of
    made-up query ids cannot grow the table.
    """

    def __init__(
        self,
        shown: str,
        problems: ProblemLog,
        remember: Callable[[str], bool] | None = None,
    ) -> None:
        self.shown = shown
        self.problems = problems
        self.remember = remember
        self.rankings: dict[str, tuple[str, ...]] = {}
        self.scores: dict[str, tuple[float, ...]] = {}
        self.line_of: dict[str, int] = {}
        self.tied = 0  # rankings with tied scores
        self.unsorted = 0  # rankings whose scores increase
        self.first_unsorted: int | None = None

    def answers(self, path: Source, limits: Limits) -> Iterator[Answer]:
        """Each line that answers a query not seen before, in file order."""
        for lineno, text, problem in iter_lines(path, limits):
            if problem is not None:
                self.problems.append(problem)
                continue
            assert text is not None
            if text.strip():
                answer = self.check_line(lineno, text)
                if answer is not None:
                    yield answer
            if self.problems.errors >= limits.max_errors:
                message = (
                    f"stopped reading at line {lineno:,} after {limits.max_errors:,} errors; "
                    "fix these first (the first of each kind are listed)"
                )
                self.problems.append(Problem(self.shown, None, "file", message, "too-many-errors"))
                return

    def check_line(self, lineno: int, text: str) -> Answer | None:
        """Check one line; the answer it gives, or ``None`` (no usable query id, or a repeat)."""

        def err(fld: str, msg: str, code: str) -> None:
            self.problems.append(Problem(self.shown, lineno, fld, msg, code))

        obj = _read_object(text, err)
        if obj is None:
            return None
        # Every check runs (no short-circuit), so each wrong field of the line is reported.
        fields_ok = _check_fields(obj, err)
        qid = _check_query_id(obj, err)
        ids, ids_ok = _check_leaf_ids(obj, err)
        scores, scores_ok = _check_scores(obj, ids, err)
        if qid is None:
            return None
        if qid in self.line_of:
            message = f"duplicate query {quote(qid)} (first on line {self.line_of[qid]})"
            err("query_id", message, "duplicate-query")
            return None
        if self.remember is None or self.remember(qid):
            self.line_of[qid] = lineno
        ok = ids is not None and fields_ok and ids_ok and scores_ok
        if not ok:
            return Answer(lineno, qid, (), None, False)
        values = None if scores is None else tuple(float(v) for v in scores)
        if values is not None:
            self._note_order(lineno, values)
        return Answer(lineno, qid, tuple(ids or ()), values, True)

    def _note_order(self, lineno: int, values: tuple[float, ...]) -> None:
        if count_ties(values):
            self.tied += 1
        if any(b > a for a, b in pairwise(values)):
            self.unsorted += 1
            if self.first_unsorted is None:
                self.first_unsorted = lineno

    def add_warnings(self) -> None:
        if self.tied:
            message = (
                f"tied scores in {self.tied} ranking(s); the order of leaf_ids is kept "
                f"(tie rule: {TIE_RULE})"
            )
            # A count over the whole file: no one line to point at.
            self._warn(None, message, "tied-scores")
        if self.unsorted:
            message = (
                f"scores increase down the ranking in {self.unsorted} line(s); "
                "leaf_ids must be best first and their order is what is scored"
            )
            self._warn(self.first_unsorted, message, "unsorted-scores")

    def _warn(self, line: int | None, message: str, code: str) -> None:
        self.problems.append(Problem(self.shown, line, "scores", message, code, "warning"))


def _read_object(text: str, err: Report) -> dict[str, Any] | None:
    try:
        obj = loads_strict(text)
    except ValueError as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        err("json", f"not valid JSON ({msg})", "json")
        return None
    if not isinstance(obj, dict):
        err("json", f"expected a JSON object, got {type_name(obj)}", "type")
        return None
    return obj


def _check_fields(obj: dict[str, Any], err: Report) -> bool:
    ok = True
    for key in REQUIRED_LINE_FIELDS:
        if key not in obj:
            err(key, "missing", "missing-field")
            ok = False
    for key in obj:
        if key not in LINE_FIELDS:
            err(
                quote(key, 40).strip("'"),
                f"unexpected field (allowed: {', '.join(LINE_FIELDS)})",
                "extra-field",
            )
            ok = False
    return ok


def _check_query_id(obj: dict[str, Any], err: Report) -> str | None:
    """The query id when it is a non-empty string; ``None`` when missing or wrong."""
    qid = obj.get("query_id")
    if "query_id" in obj and (not isinstance(qid, str) or not qid):
        err("query_id", f"expected a non-empty string, got {type_name(qid)}", "type")
        return None
    return qid


def _check_leaf_ids(obj: dict[str, Any], err: Report) -> tuple[list[Any] | None, bool]:
    """``(leaf_ids, ok)``; the list comes back even with bad items, for the scores length check."""
    ids = obj.get("leaf_ids")
    if "leaf_ids" not in obj:
        return None, True  # reported by _check_fields
    if not isinstance(ids, list):
        err("leaf_ids", f"expected a list of strings, got {type_name(ids)}", "type")
        return None, False
    ok = True
    first_at: dict[str, int] = {}
    for i, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            err(f"leaf_ids[{i}]", f"expected a non-empty string, got {type_name(item)}", "type")
            ok = False
        elif item in first_at:
            message = (
                f"duplicate of leaf_ids[{first_at[item]}] ({quote(item)}); "
                "each id may appear once per ranking"
            )
            err(f"leaf_ids[{i}]", message, "duplicate-id")
            ok = False
        else:
            first_at[item] = i
    return ids, ok


def _check_scores(
    obj: dict[str, Any], ids: list[Any] | None, err: Report
) -> tuple[list[Any] | None, bool]:
    """``(scores, ok)``: finite numbers, one per id (``None`` when absent or not a list)."""
    scores = obj.get("scores")
    if "scores" not in obj:
        return None, True
    if not isinstance(scores, list):
        err("scores", f"expected a list of numbers, got {type_name(scores)}", "type")
        return None, False
    ok = True
    for i, value in enumerate(scores):
        if not is_number(value):
            err(f"scores[{i}]", f"expected a number, got {type_name(value)}", "type")
            ok = False
        elif not math.isfinite(float(value)):
            err(f"scores[{i}]", "not a finite number", "type")
            ok = False
    if ids is not None and len(scores) != len(ids):
        message = f"{len(scores)} scores for {len(ids)} leaf_ids; give one score per id or none"
        err("scores", message, "scores-length")
        ok = False
    return scores, ok
