"""The leaderboard's figures: a :class:`~searchtome.leaderboard.results.Breakdown` as a PNG bar chart.

matplotlib's Agg canvas, no pyplot: no global backend switch, no display needed.
"""

from __future__ import annotations

import io

import numpy as np
from searchtome.leaderboard.results import Breakdown, PairedAnalysis


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
        values = np.asarray(breakdown.values[system]) * 100
        errors = None
        if system in breakdown.ci_low:  # the bootstrap interval as an asymmetric error bar
            low = np.asarray(breakdown.ci_low[system]) * 100
            high = np.asarray(breakdown.ci_high[system]) * 100
            errors = np.clip(np.stack([values - low, high - values]), 0, None)
        ax.bar(
            x + (i - (len(systems) - 1) / 2) * width,
            values,
            width,
            yerr=errors,
            error_kw={"elinewidth": 0.8, "capsize": 1.5},
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


def plot_paired(paired: PairedAnalysis) -> bytes:
    """``a`` − ``b`` per bucket with its bootstrap interval and p-value, as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    tests = paired.buckets
    x = np.arange(len(tests))
    diff = np.asarray([t.diff for t in tests]) * 100
    low = np.asarray([t.ci_low for t in tests]) * 100
    high = np.asarray([t.ci_high for t in tests]) * 100
    ax.axhline(0, color="black", linewidth=0.8)
    ax.errorbar(
        x,
        diff,
        yerr=np.clip(np.stack([diff - low, high - diff]), 0, None),
        fmt="o",
        capsize=3,
    )
    ax.set_xticks(x)
    ax.set_xticklabels(
        [f"{t.label}\n(n={t.n_queries})\np={t.p_value:.2g}" for t in tests], fontsize=8
    )
    ax.set_xlabel("training questions for the gold leaf")
    ax.set_ylabel(f"{paired.measure} difference (points)")
    ax.set_title(paired.title + " (95% bootstrap CI)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
