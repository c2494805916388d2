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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.submissions.lines import DEFAULT_LIMITS, Limits
from searchtome.submissions.problems import Predictions, Problem, Severity
from searchtome.submissions.reader import LoadedSubmission, load_submission
from searchtome.submissions.schema import MAX_IDS, RunFormat

from searchtome.dataset.loader import Dataset, load
from searchtome.io import PathLike
from searchtome.metrics.structure import classify
from searchtome.records import Submission

# Problems after which the predictions file was not read to its end (so no query is "missing").
_UNREADABLE = ("too-large", "decompression-bomb", "missing-file", "gzip")


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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ValidationReport:
    """What the validator found: problems, queries answered, and the structure counts."""

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
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self, max_per_kind: int | None = 20) -> list[str]:
        """Every problem as ``file:line: field: message`` (warnings prefixed), capped per kind."""
        out: list[str] = []
        shown: Counter[tuple[str, str]] = Counter()
        hidden: Counter[tuple[str, str]] = Counter()
        for p in sorted(self.problems, key=lambda p: (p.severity != "error", p.path, p.line or 0)):
            key = (p.severity, p.code)
            if max_per_kind is not None and shown[key] >= max_per_kind:
                hidden[key] += 1
                continue
            shown[key] += 1
            out.append(str(p) if p.severity == "error" else f"warning: {p}")
        for (severity, code), n in sorted(hidden.items()):
            out.append(f"... and {n} more {severity}s of kind {code!r}")
        return out

    def summary(self) -> str:
        c = self.counts
        n = len(self.errors)
        status = "OK" if self.ok else f"INVALID ({n} error{'' if n == 1 else 's'})"
        parts = [
            f"{self.path}: {status}; system {self.system!r}, {self.format} format, "
            f"{self.n_answered}/{self.n_expected} {self.split} queries answered",
            f"  non-leaf ids: {c.non_leaf_ids} of {c.ids} ({c.non_leaf_at_1} at rank 1, "
            f"{c.non_leaf_in_top3} queries with one in the top 3)",
            f"  invalid ids (exist nowhere in the book): {c.invalid_ids} of {c.ids} "
            f"({c.invalid_at_1} at rank 1, {c.invalid_in_top3} queries with one in the top 3)",
        ]
        if self.warnings:
            parts.append(f"  warnings: {len(self.warnings)}")
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
        }


def structure_counts(
    rankings: Mapping[str, Sequence[str]],
    dataset: Dataset,
    line_of: Mapping[str, int] | None = None,
) -> StructureCounts:
    """Count non-leaf and invalid ids of the queries the dataset knows."""
    counts = StructureCounts()
    nodes = dataset.nodes
    queries = dataset.query_by_id
    line_of = line_of or {}
    for qid, ranking in rankings.items():
        query = queries.get(qid)
        if query is None:
            continue
        kinds = [classify(doc, query.book_id, nodes) for doc in ranking]
        counts.ids += len(kinds)
        n_non_leaf = kinds.count("non_leaf")
        n_invalid = kinds.count("invalid")
        counts.non_leaf_ids += n_non_leaf
        counts.invalid_ids += n_invalid
        if n_non_leaf and counts.first_non_leaf_line is None:
            counts.first_non_leaf_line = line_of.get(qid)
        if n_invalid and counts.first_invalid_line is None:
            counts.first_invalid_line = line_of.get(qid)
        if kinds[:1] == ["non_leaf"]:
            counts.non_leaf_at_1 += 1
        if kinds[:1] == ["invalid"]:
            counts.invalid_at_1 += 1
        counts.non_leaf_in_top3 += "non_leaf" in kinds[:3]
        counts.invalid_in_top3 += "invalid" in kinds[:3]
    return counts


def validate_submission(
    path: PathLike,
    data: Dataset | PathLike,
    split: str = "test",
    *,
    partial: bool = False,
    run_format: RunFormat = "auto",
    limits: Limits = DEFAULT_LIMITS,
    require_meta: bool = True,
    max_ids: int = MAX_IDS,
) -> ValidationReport:
    """Check a submission folder (or run file) against ``split`` of a dataset; never raises on content."""
    dataset = data if isinstance(data, Dataset) else load(data)
    path = Path(path)
    loaded = load_submission(path, run_format, limits=limits, require_meta=require_meta)
    preds = loaded.predictions
    assert preds is not None
    expected = [q.query_id for q in dataset.queries(split)]
    problems = list(loaded.problems)
    problems += _unknown_queries(preds, dataset, expected, split)
    problems += _oversized_rankings(preds, max_ids)
    missing = _missing_queries(preds, expected, problems)
    if missing:
        problems.append(_missing_problem(str(preds.path), missing, len(expected), split, partial))
    problems += _meta_warnings(loaded, path, split)
    expected_set = set(expected)
    return ValidationReport(
        path=path,
        system=loaded.submission.system,
        split=split,
        format=preds.format,
        problems=problems,
        n_expected=len(expected),
        n_answered=sum(1 for qid in preds.line_of if qid in expected_set),
        missing=missing,
        counts=structure_counts(preds.run.rankings, dataset, preds.line_of),
        submission=loaded.submission,
    )


def _unknown_queries(
    preds: Predictions, dataset: Dataset, expected: list[str], split: str
) -> list[Problem]:
    """Queries not in ``split``: named with their own split, or the closest expected id."""
    expected_set = set(expected)
    split_of = {q.query_id: q.split for q in dataset.query_by_id.values()}
    unknown = [qid for qid in preds.line_of if qid not in expected_set]
    problems = []
    for n, qid in enumerate(unknown):
        other = split_of.get(qid)
        if other is not None:
            hint = f"; it belongs to the {other} split"
        elif n < 20:  # fuzzy matching is slow; a file of wrong ids needs only a few hints
            close = difflib.get_close_matches(qid, expected, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        else:
            hint = ""
        message = f"unknown query {qid!r} in the {split} split{hint}"
        problems.append(
            Problem(str(preds.path), preds.line_of[qid], "query_id", message, "unknown-query")
        )
    return problems


def _oversized_rankings(preds: Predictions, max_ids: int) -> list[Problem]:
    field_name = "leaf_ids" if preds.format == "jsonl" else "docno"
    return [
        Problem(
            str(preds.path),
            preds.line_of.get(qid),
            field_name,
            f"{len(ranking)} ids for query {qid!r}; at most {max_ids} allowed",
            "too-many-ids",
        )
        for qid, ranking in preds.run.rankings.items()
        if len(ranking) > max_ids
    ]


def _missing_queries(preds: Predictions, expected: list[str], problems: list[Problem]) -> list[str]:
    """Expected queries without a line; none when the file could not be read to its end."""
    shown = str(preds.path)
    unreadable = any(p.path == shown and p.code in _UNREADABLE for p in problems)
    return [] if unreadable else [qid for qid in expected if qid not in preds.line_of]


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


def _meta_warnings(loaded: LoadedSubmission, path: Path, split: str) -> list[Problem]:
    """Training on the scored split, and a ``split`` field naming another split."""
    meta = loaded.submission.meta
    shown = str(loaded.meta_path) if loaded.meta_path else str(path)
    problems = []
    trained = meta.get("trained_on")
    if isinstance(trained, list) and split in trained:
        problems.append(
            Problem(
                shown,
                loaded.meta_lines.get("trained_on"),
                "trained_on",
                f"lists {split!r}, the split being scored; such results are not comparable",
                "trained-on-test",
                "warning",
            )
        )
    meta_split = meta.get("split")
    if isinstance(meta_split, str) and meta_split != split:
        problems.append(
            Problem(
                shown,
                loaded.meta_lines.get("split"),
                "split",
                f"says {meta_split!r} but the {split!r} split is being validated",
                "split",
                "warning",
            )
        )
    return problems
