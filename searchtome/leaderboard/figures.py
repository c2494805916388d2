"""The leaderboard's figures: a :class:`~searchtome.leaderboard.results.Breakdown` as a PNG bar chart,
the paired differences, and the trained baselines' learning curves.

matplotlib's Agg canvas, no pyplot: no global backend switch, no display needed.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from searchtome.leaderboard.results import (
    CURVES_TITLE,
    Breakdown,
    LearningCurve,
    PairedAnalysis,
    curve_groups,
)
from searchtome.leaderboard.text import one_line


def _literal(legend: Any) -> Any:
    """The legend's entries drawn as written: a system named ``x$^^$`` is a name, not mathtext.

    matplotlib parses ``$...$`` as math by default, and a name it cannot parse raised out of
    ``savefig`` and took the whole leaderboard down with it. Only the submitted names are
    switched: the log axis's tick labels are mathtext of matplotlib's own.
    """
    for text in legend.get_texts():
        text.set_parse_math(False)
    return legend


def plot(breakdown: Breakdown, colours: dict[str, str] | None = None) -> bytes:
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
            label=one_line(system),
            color=(colours or {}).get(system, f"C{i % 10}"),
        )
    ax.set_xticks(x)
    ax.set_xticklabels(
        [f"{b}\n(n={n})" for b, n in zip(breakdown.buckets, breakdown.n_queries, strict=True)],
        fontsize=8,
    )
    ax.set_xlabel(breakdown.xlabel)
    ax.set_ylabel(breakdown.ylabel)
    ax.set_title(breakdown.title, fontsize=10, parse_math=False)
    if breakdown.ylabel.startswith("R@"):
        ax.set_ylim(0, 100)
    else:
        ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    if systems:
        _literal(
            ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        )
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
        [
            f"{t.label}\n(n={t.n_queries})\n"
            + (f"p {t.floor}" if t.p_at_floor else f"p={t.p_value:.2g}")
            for t in tests
        ],
        fontsize=8,
    )
    ax.set_xlabel("training questions for the gold leaf")
    ax.set_ylabel(f"{paired.measure} difference (points)")
    ax.set_title(one_line(paired.title) + " (95% bootstrap CI)", fontsize=10, parse_math=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _points(xs: list[int], ys: list[float | None], scale: float = 1.0) -> tuple[list, list]:
    """The epochs that recorded a value, and the values: the line joins evaluated epochs only."""
    kept = [(x, y * scale) for x, y in zip(xs, ys, strict=True) if y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def plot_curves(curves: dict[str, LearningCurve], colours: dict[str, str] | None = None) -> bytes:
    """Dev R@1 (%) and training loss per epoch, one line per distinct training, the kept epoch
    starred; PNG bytes (deterministic: no timestamp in the metadata)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(9.0, 3.8), dpi=100)
    FigureCanvasAgg(fig)
    dev_ax, loss_ax = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for i, group in enumerate(curve_groups(curves)):
        c, color = curves[group[0]], (colours or {}).get(group[0], f"C{i % 10}")
        label = one_line(" = ".join(group))
        dev_ax.plot(*_points(c.epochs, c.dev_r1, 100.0), marker="o", ms=3, color=color, label=label)
        best = c.best_dev_r1
        if best is not None:
            dev_ax.plot([c.best_epoch], [best * 100], marker="*", ms=14, color=color, mec="black")
        positive = [v if v is not None and v > 0 else None for v in c.train_loss]  # log axis
        loss_ax.plot(*_points(c.epochs, positive), marker="o", ms=3, color=color, label=label)
    star = Line2D([], [], ls="", marker="*", ms=10, color="white", mec="black")
    handles, labels = dev_ax.get_legend_handles_labels()
    _literal(
        dev_ax.legend([*handles, star], [*labels, "kept epoch"], fontsize=8, loc="lower right")
    )
    sizes = {c.dev_queries for c in curves.values()}
    n = f", {sizes.pop():,} questions" if len(sizes) == 1 and None not in sizes else ""
    dev_ax.set_ylabel(f"dev R@1 (%{n})")
    dev_ax.set_ylim(bottom=0)
    loss_ax.set_ylabel("training loss (log scale)")
    if loss_ax.lines:
        loss_ax.set_yscale("log")
    for ax in (dev_ax, loss_ax):
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.suptitle(CURVES_TITLE, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
