"""Scoring, significance testing and the rendered leaderboard, installed as ``searchtome.leaderboard``.

>>> from searchtome.leaderboard import build_leaderboard, compare, score_runs

Names are resolved lazily, so the CLI can register its commands without importing numpy or
matplotlib.
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

_EXPORTS = {
    "LeaderboardResult": "build",
    "build_leaderboard": "build",
    "Scoreboard": "scoring",
    "score_runs": "scoring",
    "ComparisonReport": "significance",
    "compare": "significance",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
