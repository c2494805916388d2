"""The default measure list, in a module of its own so the CLI can show it without numpy."""

from __future__ import annotations

# What `score` reports and the leaderboard scores, unless told otherwise.
DEFAULT_MEASURES: tuple[str, ...] = ("R@1", "R@3", "R@5", "nDCG@3", "RR@10")
