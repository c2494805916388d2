"""Scoring, significance testing and the rendered leaderboard, installed as ``searchtome.leaderboard``.

>>> from searchtome.leaderboard import build_leaderboard, compare, score_runs

Layers inside the package, lowest first: ``text`` (escaping, number formatting); ``scoring``
(the scoreboard), ``comparison`` (the test report) and ``significance`` (the tests); ``results``
(the result types: data only); ``analyses``, ``curves`` (learning curves from the runs' training
histories), ``systems`` (what each system is, its colour); the renderers, each owning its
format: ``tables`` (rows and sentences several of them print), ``markdown``, ``html`` (with
``html_cells`` and ``templates/``), ``terminal``, ``figures``, ``document`` (``leaderboard.json``:
its one writer and one reader), ``checks`` (the check report), ``expectations``
(``expected.json``) and ``render`` (``score``'s outputs); ``build`` (the whole pipeline).

Names are resolved lazily, so the CLI can register its commands without importing numpy or
matplotlib.
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

_EXPORTS = {
    "LeaderboardResult": "results",
    "LeaderboardOptions": "build",
    "build_leaderboard": "build",
    "print_main_table": "terminal",
    "LeaderboardDocument": "document",
    "read_document": "document",
    "CompareOptions": "significance",
    "Scoreboard": "scoring",
    "score_runs": "scoring",
    "ComparisonReport": "comparison",
    "compare": "significance",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
