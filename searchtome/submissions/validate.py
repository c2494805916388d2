"""The validator: a submission checked against the dataset it claims to answer.

Errors (the submission cannot enter the leaderboard): bad JSON, missing or extra fields, wrong
types, duplicate query lines, unknown query ids, missing queries (unless ``partial``), duplicate
ids inside one ranking, more than :data:`~searchtome.submissions.schema.MAX_IDS` ids, oversized
files and decompression bombs, a missing or incomplete ``meta.json``.

Counted, not errors: ids that are a ToC node of the query's book but not a leaf (**non-leaf**)
and ids that exist nowhere in the query's book (**invalid**, the paper's hallucinations; a leaf
of another book counts as invalid too). Warnings: tied scores (with the tie rule), scores that
increase down a ranking, a TREC rank column that disagrees with the scores, training on the
split being scored.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.dataset.loader import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.metrics.structure import NodeKind, classify
from searchtome.runs import Run, Submission
from searchtome.submissions.jsonl import Answer, LineParser
from searchtome.submissions.lines import DEFAULT_LIMITS, Limits, Source, detect_format
from searchtome.submissions.problems import (
    Predictions,
    Problem,
    ProblemLog,
    Severity,
    counts_of,
    quote,
)
from searchtome.submissions.reader import (
    SubmissionFiles,
    open_submission,
    read_predictions,
    upload_files,
)
from searchtome.submissions.schema import PREDICTION_FILES, RunFormat

# Problems after which the predictions file was not read to its end (so no query is "missing").
_UNREADABLE = ("too-large", "decompression-bomb", "missing-file", "gzip", "too-many-errors")


@dataclass
class StructureCounts:
    """Non-leaf and invalid output of one submission (ids and queries)."""

    ids: int = 0
    non_leaf_ids: int = 0
    invalid_ids: int = 0
    non_leaf_at_1: int = 0
    non_leaf_in_top3: int = 0
    invalid_at_1: int = 0
    invalid_in_top3: int = 0
    first_non_leaf_line: int | None = None
    first_invalid_line: int | None = None

    def add(self, kinds: Sequence[NodeKind], line: int | None) -> None:
        """Count one ranking, given the kind of each of its ids (``classify``)."""
        self.ids += len(kinds)
        n_non_leaf = kinds.count(NodeKind.NON_LEAF)
        n_invalid = kinds.count(NodeKind.INVALID)
        self.non_leaf_ids += n_non_leaf
        self.invalid_ids += n_invalid
        if n_non_leaf and self.first_non_leaf_line is None:
            self.first_non_leaf_line = line
        if n_invalid and self.first_invalid_line is None:
            self.first_invalid_line = line
        self.non_leaf_at_1 += kinds[:1] == [NodeKind.NON_LEAF]
        self.invalid_at_1 += kinds[:1] == [NodeKind.INVALID]
        self.non_leaf_in_top3 += NodeKind.NON_LEAF in kinds[:3]
        self.invalid_in_top3 += NodeKind.INVALID in kinds[:3]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ValidationReport:
    """What the validator found: problems, queries answered, and the structure counts.

    ``problems`` keeps the first findings of each kind (``Limits.max_problems_per_kind``);
    :attr:`problem_counts` counts all of them, so :attr:`ok` and the summary are exact however
    many were dropped. ``submission`` holds the valid rankings of the split's queries, or is
    ``None`` when validated with ``keep_run=False`` (the command line: constant memory).
    """

    path: Path
    system: str
    split: str
    format: str
    problems: list[Problem]
    n_expected: int = 0
    n_answered: int = 0
    missing: list[str] = field(default_factory=list)
    counts: StructureCounts = field(default_factory=StructureCounts)
    submission: Submission | None = None

    @property
    def errors(self) -> list[Problem]:
        """The errors kept (see :attr:`error_count` for how many there were)."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def problem_counts(self) -> dict[tuple[str, str], int]:
        """Findings per ``(severity, code)``, kept or not."""
        return dict(counts_of(self.problems))

    @property
    def error_count(self) -> int:
        return sum(n for (sev, _), n in self.problem_counts.items() if sev == "error")

    @property
    def warning_count(self) -> int:
        return sum(n for (sev, _), n in self.problem_counts.items() if sev == "warning")

    @property
    def ok(self) -> bool:
        return self.error_count == 0

    def lines(self, max_per_kind: int | None = 20) -> list[str]:
        """Every problem as ``file:line: field: message`` (warnings prefixed), capped per kind."""
        out: list[str] = []
        shown: Counter[tuple[str, str]] = Counter()
        for p in sorted(self.problems, key=lambda p: (p.severity != "error", p.path, p.line or 0)):
            key = (p.severity, p.code)
            if max_per_kind is not None and shown[key] >= max_per_kind:
                continue
            shown[key] += 1
            out.append(str(p) if p.severity == "error" else f"warning: {p}")
        for (severity, code), n in sorted(self.problem_counts.items()):
            if n > shown[severity, code]:
                out.append(
                    f"... and {n - shown[severity, code]:,} more {severity}s of kind {code!r}"
                )
        return out

    def summary(self) -> str:
        c = self.counts
        n = self.error_count
        status = "OK" if self.ok else f"INVALID ({n} error{'' if n == 1 else 's'})"
        parts = [
            f"{self.path}: {status}; system {quote(self.system)}, {self.format} format, "
            f"{self.n_answered}/{self.n_expected} {self.split} queries answered",
            f"  non-leaf ids: {c.non_leaf_ids} of {c.ids} ({c.non_leaf_at_1} at rank 1, "
            f"{c.non_leaf_in_top3} queries with one in the top 3)",
            f"  invalid ids (exist nowhere in the book): {c.invalid_ids} of {c.ids} "
            f"({c.invalid_at_1} at rank 1, {c.invalid_in_top3} queries with one in the top 3)",
        ]
        if self.warning_count:
            parts.append(f"  warnings: {self.warning_count}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "system": self.system,
            "split": self.split,
            "format": self.format,
            "ok": self.ok,
            "n_expected": self.n_expected,
            "n_answered": self.n_answered,
            "missing": list(self.missing),
            "counts": self.counts.to_dict(),
            "problems": [p.to_dict() for p in self.problems],
            "problem_counts": {
                f"{sev}:{code}": n for (sev, code), n in sorted(self.problem_counts.items())
            },
        }


def validate_submission(
    path: PathLike,
    data: Dataset | PathLike,
    split: str = "test",
    *,
    partial: bool = False,
    run_format: RunFormat = "auto",
    limits: Limits = DEFAULT_LIMITS,
    require_meta: bool = True,
    keep_run: bool = True,
) -> ValidationReport:
    """Check a submission folder (or run file) against ``split`` of a dataset; never raises on content.

    JSON lines are checked as they stream past: nothing of a line is held once it is counted,
    except, with ``keep_run``, the valid rankings of the split's own queries (for scoring).
    Memory is therefore bounded by the dataset and one line, whatever the file holds (see
    docs/submissions.md, "Memory").
    """
    path = Path(path)
    if run_format not in ("auto", "jsonl", "trec"):
        raise SearchTomeError(f"unknown run format {run_format!r}; use auto, jsonl or trec")
    files = open_submission(path, limits=limits, require_meta=require_meta)
    return _validate_files(files, data, split, partial, run_format, limits, keep_run)


def validate_upload(
    meta: bytes,
    predictions_name: str,
    predictions: bytes,
    data: Dataset | PathLike,
    split: str = "test",
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> ValidationReport:
    """Check an upload held in memory (``meta.json``'s bytes and the predictions file's) as
    :func:`validate_submission` checks a folder, without writing it to disk; problems name the
    files bare (``predictions.jsonl:3: ...``)."""
    files = upload_files(meta, predictions_name, predictions, limits=limits)
    return _validate_files(files, data, split, False, "auto", limits, True)


def _validate_files(
    files: SubmissionFiles,
    data: Dataset | PathLike,
    split: str,
    partial: bool,
    run_format: RunFormat,
    limits: Limits,
    keep_run: bool,
) -> ValidationReport:
    dataset = data if isinstance(data, Dataset) else load(data)
    path = files.path
    pred_path = files.predictions_path
    fmt = detect_format(pred_path, limits) if run_format == "auto" else run_format
    check = _SplitCheck(dataset, split, keep_run, limits)
    name = files.system or files.default_name
    if fmt == "jsonl":
        check.stream_jsonl(pred_path)
        name = name or _bare_name(pred_path)
    else:
        preds = read_predictions(pred_path, "trec", name=name, limits=limits)
        check.add_predictions(preds)
        name = preds.run.name
    mistake = check.format_mistake()
    if mistake is not None:
        check.problems.append(mistake)
    missing = check.missing()  # before meta.json's problems: its own missing-file is no reason
    problems = check.problems
    problems.extend(files.meta_problems)
    problems.extend(files.name_warnings())
    if missing:
        problems.append(
            _missing_problem(str(pred_path), missing, len(check.expected), split, partial)
        )
    problems.extend(_meta_warnings(files, path, split))
    run = Run(name, check.rankings, check.scores or None, meta=dict(files.meta))
    submission = Submission(system=name, run=run, meta=dict(files.meta), path=str(path))
    return ValidationReport(
        path=path,
        system=name,
        split=split,
        format=fmt,
        problems=problems,
        n_expected=len(check.expected),
        n_answered=len(check.line_of),
        missing=missing,
        counts=check.counts,
        submission=submission if keep_run else None,
    )


# Share of a submission's ids that, malformed the same way, make it a format mistake.
MALFORMED_SHARE = 0.9


class MalformedIds:
    """Invalid ids that would be a node of the query's book once written as the dataset does.

    The paper counts invalid ids as hallucinations, but when (nearly) every id of a run is one
    fix away from a real node (``3.2.1`` for ``whole-child/3.2.1``, a misspelt book prefix,
    stray spaces or capitals) the run was written in the wrong format, and scoring it would
    report a misleading 0.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.nodes = dataset.nodes
        self.books = set(dataset.book_ids())
        self.fixable: Counter[str] = Counter()  # how -> ids
        self.example: dict[str, tuple[str, str]] = {}
        self.first_line: int | None = None

    def add(self, doc: str, book_id: str, line: int | None) -> None:
        found = self._fix(doc, book_id)
        if found is None:
            return
        how, fixed = found
        self.fixable[how] += 1
        self.example.setdefault(how, (doc, fixed))
        if self.first_line is None:
            self.first_line = line

    def _fix(self, doc: str, book_id: str) -> tuple[str, str] | None:
        if len(doc) > 200:
            return None
        candidates = [
            ("prefixed with the book id", f"{book_id}/{doc.strip()}"),
            ("stripped of spaces and lower-cased", doc.strip().lower()),
        ]
        prefix, slash, rest = doc.partition("/")
        if slash and prefix not in self.books:  # a leaf of another real book is a real mistake
            candidates.append(("given the query's book id", f"{book_id}/{rest.strip()}"))
        for how, fixed in candidates:
            node = self.nodes.get(fixed)
            if fixed != doc and node is not None and node.book_id == book_id:
                return how, fixed
        return None

    def message(self, n_ids: int) -> str | None:
        """The error when nearly every id is fixable the same way, else ``None``."""
        if not self.fixable or not n_ids:
            return None
        how, n = self.fixable.most_common(1)[0]
        if n < MALFORMED_SHARE * n_ids:
            return None
        doc, fixed = self.example[how]
        return (
            f"{n:,} of {n_ids:,} ids are no id of the query's book but would be once {how} "
            f"(e.g. {quote(doc)}: did you mean {fixed!r}?); ids are written BOOK/PATH as in the "
            "dataset's toc, so this looks like a format mistake rather than made-up ids"
        )


def _bare_name(path: Source) -> str:
    """A bare file's run name, as the reader gives it: the folder of ``predictions.jsonl``."""
    return path.parent.name if path.name in PREDICTION_FILES else path.name.split(".")[0]


class _SplitCheck:
    """A predictions file checked against one split, one answer at a time."""

    def __init__(self, dataset: Dataset, split: str, keep_run: bool, limits: Limits) -> None:
        self.dataset = dataset
        self.split = split
        self.max_ids = limits.max_ids
        self.keep_run = keep_run
        self.limits = limits
        self.expected = [q.query_id for q in dataset.queries(split)]
        self.expected_set = set(self.expected)
        self.problems = ProblemLog(keep_per_kind=limits.max_problems_per_kind)
        self.line_of: dict[str, int] = {}
        self.rankings: dict[str, tuple[str, ...]] = {}
        self.scores: dict[str, tuple[float, ...]] = {}
        self.counts = StructureCounts()
        self.n_unknown = 0
        self.shown = ""
        self.format = "jsonl"
        self.malformed = MalformedIds(dataset)
        self.canonical = {node: node for node in dataset.nodes} if keep_run else {}

    def stream_jsonl(self, path: Source) -> None:
        self.shown = str(path)
        # Only the split's queries are remembered: made-up ids cannot grow any table.
        parser = LineParser(self.shown, self.problems, remember=self.expected_set.__contains__)
        self.line_of = parser.line_of
        for answer in parser.answers(path, self.limits):
            self.add_answer(answer)
        parser.add_warnings()

    def add_predictions(self, preds: Predictions) -> None:
        """An already parsed file (TREC): the same checks, query by query."""
        self.shown = str(preds.path)
        self.format = preds.format
        self.problems.extend(preds.problems)
        scores = preds.run.scores or {}
        for qid, line in preds.line_of.items():
            if qid in self.expected_set:
                self.line_of[qid] = line
            ranking = preds.run.rankings.get(qid)
            ok = ranking is not None
            self.add_answer(Answer(line, qid, ranking or (), scores.get(qid), ok))

    def add_answer(self, answer: Answer) -> None:
        qid = answer.query_id
        if qid not in self.expected_set:
            self.problems.append(self._unknown(answer))
        if not answer.ok:
            return
        ranking = answer.leaf_ids
        if len(ranking) > self.max_ids:
            field_name = "docno" if self.format == "trec" else "leaf_ids"
            message = f"{len(ranking)} ids for query {quote(qid)}; at most {self.max_ids} allowed"
            self.problems.append(
                Problem(self.shown, answer.line, field_name, message, "too-many-ids")
            )
        query = self.dataset.query_by_id.get(qid)
        if query is not None:
            nodes = self.dataset.nodes
            kinds = [classify(doc, query.book_id, nodes) for doc in ranking]
            self.counts.add(kinds, answer.line)
            for doc, kind in zip(ranking, kinds, strict=True):
                if kind is NodeKind.INVALID:
                    self.malformed.add(doc, query.book_id, answer.line)
        if self.keep_run and qid in self.expected_set:
            # The dataset's own strings for known ids: a run of 100 ids a query then costs a
            # pointer per id, not a string per id (about 60 bytes each).
            canonical = self.canonical
            self.rankings[qid] = tuple([canonical.get(doc, doc) for doc in ranking])
            if answer.scores is not None:
                self.scores[qid] = answer.scores

    def _unknown(self, answer: Answer) -> Problem:
        """A query not in the split: named with its own split, or the closest expected id."""
        qid = answer.query_id
        query = self.dataset.query_by_id.get(qid)
        if query is not None:
            hint = f"; it belongs to the {query.split} split"
        elif self.n_unknown < 20 and len(qid) <= 200:
            # Fuzzy matching is slow; a file of wrong ids needs only a few hints.
            close = difflib.get_close_matches(qid, self.expected, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        else:
            hint = ""
        self.n_unknown += 1
        message = f"unknown query {quote(qid)} in the {self.split} split{hint}"
        return Problem(self.shown, answer.line, "query_id", message, "unknown-query")

    def format_mistake(self) -> Problem | None:
        """Nearly every id malformed in one way: a format mistake, not hallucinations."""
        message = self.malformed.message(self.counts.ids)
        if message is None:
            return None
        field_name = "docno" if self.format == "trec" else "leaf_ids"
        return Problem(self.shown, self.malformed.first_line, field_name, message, "malformed-ids")

    def missing(self) -> list[str]:
        """Expected queries without a line; none when the file could not be read to its end."""
        unreadable = any(code in _UNREADABLE for _, code in self.problems.counts)
        return [] if unreadable else [q for q in self.expected if q not in self.line_of]


def _missing_problem(
    shown: str, missing: list[str], n_expected: int, split: str, partial: bool
) -> Problem:
    sample = ", ".join(repr(q) for q in missing[:3])
    head = f"{len(missing)} of {n_expected} {split} queries have no line (e.g. {sample}); "
    if partial:
        message = head + "scored as misses (--partial)"
    else:
        message = (
            head
            + "a leaderboard entry answers every query (--partial scores missing ones as misses)"
        )
    severity: Severity = "warning" if partial else "error"
    return Problem(shown, None, "query_id", message, "missing-queries", severity)


def _meta_warnings(files: SubmissionFiles, path: Path, split: str) -> list[Problem]:
    """Training on the scored split, and a ``split`` field naming another split."""
    meta = files.document
    shown = str(files.meta_path) if files.meta_path else str(path)
    problems = []
    if split in (meta.trained_on or ()):
        problems.append(
            Problem(
                shown,
                files.meta_lines.get("trained_on"),
                "trained_on",
                f"lists {split!r}, the split being scored; such results are not comparable",
                "trained-on-test",
                "warning",
            )
        )
    meta_split = meta.split
    if meta_split is not None and meta_split != split:
        problems.append(
            Problem(
                shown,
                files.meta_lines.get("split"),
                "split",
                f"says {quote(meta_split)} but the {split!r} split is being validated",
                "split",
                "warning",
            )
        )
    return problems
