"""``expected.json``: recorded aggregate values a build is checked against.

``{"tolerance": 0.005, "split": "test", "systems": {"bm25": {"R@1": 0.595, "R@3": {"value":
0.71, "tolerance": 0.02}, ...}}}``: a value is a number (the file's tolerance applies) or an
object with its own ``tolerance``. This module is its one reader and its one writer (on the
document kernel, :mod:`searchtome.document`);
:mod:`~searchtome.leaderboard.checks` compares a build against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from searchtome.document import Format, Record, read_document, write_document
from searchtome.io import PathLike, read_json, write_json
from searchtome.leaderboard.results import BUDGET_MEASURES, LeaderboardResult
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.structure import STRUCTURE_MEASURES

DEFAULT_TOLERANCE = 0.005
RECORDED = (*DEFAULT_MEASURES, *BUDGET_MEASURES, *STRUCTURE_MEASURES)  # --write-expected
FILE = "expected.json"
# No "format" key: the committed files predate the convention, and the file is small enough
# that a later shape can be told from it.
EXPECTED = Format("searchtome-expected", 1, keyed=False)
ADVICE = "fix it, or write it again with searchtome leaderboard --write-expected"


@dataclass(frozen=True)
class Expected:
    value: float
    tolerance: float


@dataclass(frozen=True, kw_only=True)
class Bound(Record):
    """A value with its own tolerance: ``{"value": 0.71, "tolerance": 0.02}``."""

    value: float
    tolerance: float | None = None  # None: the file's


@dataclass(frozen=True, kw_only=True)
class ExpectedFile(Record):
    """``expected.json`` as written: system → measure → a number or a :class:`Bound`."""

    NULLS: ClassVar[frozenset[str]] = frozenset({"split"})

    systems: Mapping[str, Mapping[str, float | Bound]]
    tolerance: float | None = None  # None: DEFAULT_TOLERANCE
    split: str | None = None


@dataclass(frozen=True)
class Expectations:
    """System → measure → expected value, in the file's order (:attr:`systems`), over the
    document it was read from (written back as it was)."""

    document: ExpectedFile

    @property
    def tolerance(self) -> float:
        tolerance = self.document.tolerance
        return DEFAULT_TOLERANCE if tolerance is None else tolerance

    @property
    def split(self) -> str | None:
        return self.document.split

    @property
    def systems(self) -> dict[str, dict[str, Expected]]:
        return {
            system: {m: self._expected(spec) for m, spec in wanted.items()}
            for system, wanted in self.document.systems.items()
        }

    def _expected(self, spec: float | Bound) -> Expected:
        if isinstance(spec, Bound):
            tolerance = self.tolerance if spec.tolerance is None else spec.tolerance
            return Expected(float(spec.value), tolerance)
        return Expected(float(spec), self.tolerance)

    @classmethod
    def from_dict(cls, raw: Any, where: object = FILE) -> Expectations:
        return cls(read_document(EXPECTED, ExpectedFile, raw, where, ADVICE))

    @classmethod
    def of(cls, result: LeaderboardResult, tolerance: float = DEFAULT_TOLERANCE) -> Expectations:
        """A build's aggregates as expectations, every value at ``tolerance``."""
        systems = {
            e.system: {m: e.aggregate[m] for m in RECORDED if m in e.aggregate}
            for e in result.entries
        }
        return cls(ExpectedFile(tolerance=tolerance, split=result.split, systems=systems))

    def to_dict(self) -> dict[str, Any]:
        return write_document(EXPECTED, self.document)


def read_expectations(source: PathLike | Mapping[str, Any]) -> Expectations:
    """The file at ``source`` (or an already parsed one)."""
    if isinstance(source, Mapping):
        return Expectations.from_dict(source)
    return Expectations.from_dict(read_json(source), source)


def write_expectations(path: PathLike, expectations: Expectations) -> Path:
    return write_json(path, expectations.to_dict())
