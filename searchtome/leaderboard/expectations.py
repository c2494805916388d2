"""``expected.json``: recorded aggregate values a build is checked against.

``{"tolerance": 0.005, "split": "test", "systems": {"bm25": {"R@1": 0.595, "R@3": {"value":
0.71, "tolerance": 0.02}, ...}}}``: a value is a number (the file's tolerance applies) or an
object with its own ``tolerance``. This module is its one reader and its one writer;
:mod:`~searchtome.leaderboard.checks` compares a build against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, read_json, write_json
from searchtome.leaderboard.results import BUDGET_MEASURES, LeaderboardResult
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.structure import STRUCTURE_MEASURES

DEFAULT_TOLERANCE = 0.005
RECORDED = (*DEFAULT_MEASURES, *BUDGET_MEASURES, *STRUCTURE_MEASURES)  # --write-expected


@dataclass(frozen=True)
class Expected:
    value: float
    tolerance: float


@dataclass(frozen=True)
class Expectations:
    """System → measure → expected value, in the file's order."""

    tolerance: float
    systems: dict[str, dict[str, Expected]]
    split: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Expectations:
        tolerance = float(raw.get("tolerance", DEFAULT_TOLERANCE))
        systems = raw.get("systems")
        if not isinstance(systems, dict):
            raise SearchTomeError(
                "expectations file: 'systems' must map system names to {measure: value}"
            )
        split = raw.get("split")
        return cls(
            tolerance,
            {s: _measures(s, wanted, tolerance) for s, wanted in systems.items()},
            split if isinstance(split, str) else None,
        )

    @classmethod
    def of(cls, result: LeaderboardResult, tolerance: float = DEFAULT_TOLERANCE) -> Expectations:
        """A build's aggregates as expectations, every value at ``tolerance``."""
        return cls(
            tolerance,
            {
                e.system: {
                    m: Expected(e.aggregate[m], tolerance) for m in RECORDED if m in e.aggregate
                }
                for e in result.entries
            },
            result.split,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tolerance": self.tolerance,
            "split": self.split,
            "systems": {
                system: {m: _spec(x, self.tolerance) for m, x in wanted.items()}
                for system, wanted in self.systems.items()
            },
        }


def _measures(system: str, wanted: Any, tolerance: float) -> dict[str, Expected]:
    out = {}
    for measure in wanted:
        spec = wanted[measure]
        if isinstance(spec, dict):
            value, tol = spec.get("value"), float(spec.get("tolerance", tolerance))
        else:
            value, tol = spec, tolerance
        if not isinstance(value, int | float):
            raise SearchTomeError(f"expectations file: {system}/{measure}: value must be a number")
        out[measure] = Expected(float(value), tol)
    return out


def _spec(expected: Expected, tolerance: float) -> float | dict[str, float]:
    """A plain number at the file's tolerance, else the value with its own."""
    if expected.tolerance == tolerance:
        return expected.value
    return {"value": expected.value, "tolerance": expected.tolerance}


def read_expectations(source: PathLike | Mapping[str, Any]) -> Expectations:
    """The file at ``source`` (or an already parsed one)."""
    raw = source if isinstance(source, Mapping) else read_json(source)
    if not isinstance(raw, Mapping):
        raise SearchTomeError(f"{source}: an expectations file is a JSON object")
    return Expectations.from_dict(raw)


def write_expectations(path: PathLike, expectations: Expectations) -> Path:
    return write_json(path, expectations.to_dict())
