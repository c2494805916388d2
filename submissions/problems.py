"""What reading a submission yields: :class:`Problem` findings and parsed :class:`Predictions`.

Every reader in this package collects problems instead of raising, so one pass reports every
error of a file; a problem prints as ``file:line: field: what is wrong``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from searchtome.records import Run

Severity = Literal["error", "warning"]


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


@dataclass
class Predictions:
    """A parsed predictions file: the run, where each query's line is, and what was wrong."""

    path: Path
    format: Literal["jsonl", "trec"]
    run: Run
    line_of: dict[str, int]
    problems: list[Problem] = field(default_factory=list)
    tags: tuple[str, ...] = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]
