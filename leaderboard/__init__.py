"""Scoring, significance testing and the rendered leaderboard, installed as ``searchtome.leaderboard``.

>>> from searchtome.leaderboard import build_leaderboard, compare, score_runs

Layers inside the package, lowest first: ``text`` (escaping, number formatting); ``scoring``
(the scoreboard), ``comparison`` (the test report) and ``significance`` (the tests); ``results``
(the result types); ``analyses``, ``curves`` (learning curves from the runs' training histories),
``systems`` (what each system is, its colour), ``figures``, ``markdown``, ``html`` (with
``html_cells`` and ``templates/``) and ``render`` (outputs);
``build`` (the whole pipeline).

Names are resolved lazily, so the CLI can register its commands without importing numpy or
matplotlib.
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

_EXPORTS = {
    "LeaderboardResult": "results",
    "build_leaderboard": "build",
    "Scoreboard": "scoring",
    "score_runs": "scoring",
    "ComparisonReport": "comparison",
    "compare": "significance",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
