"""Leaderboard analyses: per-query rates broken down by a property of the gold leaf.

* R@1 by the number of training questions whose gold is the query's gold leaf (paper Fig. 4:
  STAIR's advantage is largest on rarely seen leaves);
* invalid output rate — rank-1 output that is not a leaf of the book (non-leaf or invalid) — by
  the same buckets (paper Fig. 3);
* R@1 by ToC depth of the gold leaf.
"""

from __future__ import annotations

import numpy as np
from searchtome.leaderboard.results import Breakdown
from searchtome.leaderboard.scoring import Scoreboard

# Upper bounds of the training-question buckets (inclusive); the last bucket is open.
TRAIN_BUCKETS: tuple[tuple[int, int | None], ...] = (
    (0, 0),
    (1, 2),
    (3, 5),
    (6, 10),
    (11, 20),
    (21, 50),
    (51, 100),
    (101, None),
)


def bucket_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo}+"
    return str(lo) if lo == hi else f"{lo}–{hi}"


def _breakdown(
    board: Scoreboard,
    masks: list[tuple[str, np.ndarray]],
    quantity: str,
    title: str,
    xlabel: str,
    ylabel: str,
) -> Breakdown:
    masks = [(label, m) for label, m in masks if m.any()]
    values: dict[str, list[float]] = {}
    for s in board.systems:
        if quantity == "invalid_output":
            per_query = s.per_query["NonLeaf@1"] + s.per_query["Invalid@1"]
        else:
            per_query = s.per_query[quantity]
        values[s.system] = [float(per_query[m].mean()) for _, m in masks]
    return Breakdown(
        title,
        xlabel,
        ylabel,
        [label for label, _ in masks],
        [int(m.sum()) for _, m in masks],
        values,
    )


def analyses(board: Scoreboard, systems_order: list[str] | None = None) -> dict[str, Breakdown]:
    """The three breakdowns; empty when the scoreboard has no dataset behind it."""
    if board.queries is None:
        return {}
    q = board.queries
    train_masks = [
        (
            bucket_label(lo, hi),
            (q.train_questions >= lo)
            & (q.train_questions <= (hi if hi is not None else np.iinfo(np.int64).max)),
        )
        for lo, hi in TRAIN_BUCKETS
    ]
    depth_masks = [(str(d), q.depth == d) for d in sorted(set(q.depth.tolist()))]
    out = {
        "r1_by_training_questions": _breakdown(
            board,
            train_masks,
            "R@1",
            "R@1 by training questions of the gold leaf",
            "training questions for the gold leaf",
            "R@1 (%)",
        ),
        "invalid_by_training_questions": _breakdown(
            board,
            train_masks,
            "invalid_output",
            "Invalid output at rank 1 by training questions of the gold leaf",
            "training questions for the gold leaf",
            "non-leaf or invalid at rank 1 (%)",
        ),
        "r1_by_depth": _breakdown(
            board,
            depth_masks,
            "R@1",
            "R@1 by ToC depth of the gold leaf",
            "ToC depth of the gold leaf (1 = top level)",
            "R@1 (%)",
        ),
    }
    if systems_order:
        for b in out.values():
            b.values = {s: b.values[s] for s in systems_order if s in b.values}
    return out
