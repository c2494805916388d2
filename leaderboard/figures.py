"""The leaderboard's figures: a :class:`~searchtome.leaderboard.results.Breakdown` as a PNG bar chart.

matplotlib's Agg canvas, no pyplot: no global backend switch, no display needed.
"""

from __future__ import annotations

import io

import numpy as np
from searchtome.leaderboard.results import Breakdown


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
