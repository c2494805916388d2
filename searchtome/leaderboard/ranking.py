"""The ranking rule every board shares: R@1, then R@3, then nDCG@3, each higher first.

The static leaderboard (:mod:`~searchtome.leaderboard.build`) and the service's board
(:mod:`searchtome.service.board`) both sort by :func:`rank_key`, so a rule change reaches both.
Each caller appends its own last tie-breakers (the name; the upload time and key).
"""

from __future__ import annotations

from collections.abc import Mapping

RANKED_BY = ("R@1", "R@3", "nDCG@3")  # compared in this order; a tie falls to the next


def rank_key(aggregate: Mapping[str, float]) -> tuple[float, ...]:
    """Sorts best first (ascending): each measure of :data:`RANKED_BY`, negated."""
    return tuple(-aggregate[measure] for measure in RANKED_BY)
