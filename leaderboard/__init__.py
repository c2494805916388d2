"""Scoring, significance testing and the rendered leaderboard, installed as ``searchtome.leaderboard``.

>>> from searchtome.leaderboard import build_leaderboard, compare, score_runs

Names are resolved lazily, so the CLI can register its commands without importing numpy or
matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LeaderboardResult": "build",
    "build_leaderboard": "build",
    "Scoreboard": "scoring",
    "score_runs": "scoring",
    "ComparisonReport": "significance",
    "compare": "significance",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
