"""Leaderboard analyses and their matplotlib figures (Agg backend, PNG bytes).

* R@1 by the number of training questions whose gold is the query's gold leaf (paper Fig. 4:
  STAIR's advantage is largest on rarely seen leaves);
* invalid output rate — rank-1 output that is not a leaf of the book (non-leaf or invalid) — by
  the same buckets (paper Fig. 3);
* R@1 by ToC depth of the gold leaf.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
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


@dataclass
class Breakdown:
    """Rates of one quantity per bucket per system, with the bucket sizes."""

    title: str
    xlabel: str
    ylabel: str
    buckets: list[str]
    n_queries: list[int]
    values: dict[str, list[float]]  # system → value per bucket

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "xlabel": self.xlabel,
            "ylabel": self.ylabel,
            "buckets": list(self.buckets),
            "n_queries": list(self.n_queries),
            "values": {k: list(v) for k, v in self.values.items()},
        }


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


def plot(breakdown: Breakdown) -> bytes:
    """A grouped bar chart as PNG bytes (deterministic: no timestamp in the metadata)."""
    # An explicit Agg canvas: no pyplot, no global backend switch, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    systems = list(breakdown.values)
    n_b = len(breakdown.buckets)
    width = 0.8 / max(1, len(systems))
    x = np.arange(n_b)
    for i, system in enumerate(systems):
        ax.bar(
            x + (i - (len(systems) - 1) / 2) * width,
            [v * 100 for v in breakdown.values[system]],
            width,
            label=system,
        )
    ax.set_xticks(x)
    ax.set_xticklabels(
        [f"{b}\n(n={n})" for b, n in zip(breakdown.buckets, breakdown.n_queries, strict=True)],
        fontsize=8,
    )
    ax.set_xlabel(breakdown.xlabel)
    ax.set_ylabel(breakdown.ylabel)
    ax.set_title(breakdown.title, fontsize=10)
    if breakdown.ylabel.startswith("R@"):
        ax.set_ylim(0, 100)
    else:
        ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    if systems:
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
