"""The ranking rule both boards use: R@1, then R@3, then nDCG@3, higher first."""

from __future__ import annotations

import inspect

from searchtome.leaderboard import build
from searchtome.leaderboard.ranking import RANKED_BY, rank_key
from searchtome.service import board


def test_a_tie_falls_to_the_next_measure() -> None:
    rows = {
        "a": {"R@1": 0.5, "R@3": 0.7, "nDCG@3": 0.60},
        "b": {"R@1": 0.5, "R@3": 0.8, "nDCG@3": 0.10},  # ties a on R@1, wins on R@3
        "c": {"R@1": 0.6, "R@3": 0.1, "nDCG@3": 0.00},  # best R@1 beats everything below it
        "d": {"R@1": 0.5, "R@3": 0.7, "nDCG@3": 0.65},  # ties a on R@1 and R@3, wins on nDCG@3
    }
    assert sorted(rows, key=lambda s: rank_key(rows[s])) == ["c", "b", "d", "a"]
    assert RANKED_BY == ("R@1", "R@3", "nDCG@3")


def test_both_boards_sort_by_the_one_rule() -> None:
    """Neither board spells the measures out again: a change to RANKED_BY reaches both."""
    for module in (build, board):
        source = inspect.getsource(module)
        assert "rank_key(" in source and '-agg["R@1"]' not in source, module.__name__
