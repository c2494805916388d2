"""What reading a submission yields: :class:`Problem` findings and parsed :class:`Predictions`.

Every reader in this package collects problems instead of raising, so one pass reports every
error of a file; a problem prints as ``file:line: field: what is wrong``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, SupportsIndex

from searchtome.runs import Run

Severity = Literal["error", "warning"]

# Findings kept per kind (severity and code); the rest are only counted. The cap is what keeps a
# file of millions of bad lines from holding millions of records (about 1 KiB each at most).
KEEP_PER_KIND = 1000
# Characters of a submitted value quoted in a message: a 1 MiB query id must not become a
# 1 MiB message, kept a thousand times.
QUOTE_CHARS = 60


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters (``'abc…' (1,048,576 characters)``)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


@dataclass(frozen=True)
class Problem:
    """One finding about a submission, printed as ``file:line: field: message``.

    ``line`` is 1-based; ``None`` for findings about a whole file (``file: field: message``).
    ``code`` is a stable machine-readable kind, e.g. ``duplicate-query``.
    """

    path: str
    line: int | None
    field: str
    message: str
    code: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "code": self.code,
            "severity": self.severity,
        }


class ProblemLog(list[Problem]):
    """The problems of one reading: the first :data:`KEEP_PER_KIND` of each kind, and a count of all.

    A ``list`` (every reader and the report take it as one), whose ``append`` and ``extend``
    keep a finding only while its kind has fewer than ``keep_per_kind`` kept; ``counts`` holds
    every finding's kind, kept or not, so summaries and exit codes stay exact.
    """

    def __init__(self, items: Iterable[Problem] = (), keep_per_kind: int = KEEP_PER_KIND) -> None:
        super().__init__()
        self.keep_per_kind = keep_per_kind
        self.counts: Counter[tuple[str, str]] = Counter()
        self.errors = 0  # findings of severity "error", kept or not (read once a line)
        self.extend(items)

    def append(self, problem: Problem) -> None:
        key = (problem.severity, problem.code)
        self.counts[key] += 1
        self.errors += problem.severity == "error"
        if self.counts[key] <= self.keep_per_kind:
            super().append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        if isinstance(problems, ProblemLog):
            self.merge(problems)
            return
        for problem in problems:
            self.append(problem)

    def __iadd__(self, problems: Iterable[Problem]) -> ProblemLog:  # type: ignore[override,misc]
        self.extend(problems)
        return self

    def insert(self, index: SupportsIndex, problem: Problem) -> None:
        key = (problem.severity, problem.code)
        self.counts[key] += 1
        self.errors += problem.severity == "error"
        if self.counts[key] <= self.keep_per_kind:
            super().insert(index, problem)

    def merge(self, other: ProblemLog) -> None:
        """Add another log's findings: its kept ones and the counts of those it dropped."""
        for problem in other:
            self.append(problem)
        kept = Counter((p.severity, p.code) for p in other)
        for key, n in other.counts.items():
            dropped = n - kept[key]
            if dropped:
                self.counts[key] += dropped
                self.errors += dropped if key[0] == "error" else 0

    def total(self, severity: str) -> int:
        """Findings of ``severity`` (``error`` or ``warning``), kept or not."""
        return sum(n for (sev, _), n in self.counts.items() if sev == severity)


@dataclass
class Predictions:
    """A parsed predictions file: the run, where each query's line is, and what was wrong."""

    path: Path
    format: Literal["jsonl", "trec"]
    run: Run
    line_of: dict[str, int]
    problems: list[Problem] = field(default_factory=ProblemLog)
    tags: tuple[str, ...] = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def counts_of(problems: Iterable[Problem]) -> Counter[tuple[str, str]]:
    """Findings per kind: a log's exact counts, or a plain list counted."""
    if isinstance(problems, ProblemLog):
        return Counter(problems.counts)
    return Counter((p.severity, p.code) for p in problems)
