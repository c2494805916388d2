"""What each run cost, read from its ``meta.json``: training and prediction time and peak memory
apart, the whole run's, model size, hardware.

Read through :class:`~searchtome.submissions.meta.RunMeta`: ``run_info`` is open to submitters,
so every field is optional and a value of the wrong type (or a negative or non-finite number)
is treated as absent rather than shown wrongly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchtome.leaderboard.text import term_text
from searchtome.submissions.meta import RunMeta, parse_run_meta


def _number(value: Any) -> float | None:
    """A finite, non-negative number, or None (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # an int like 10**400 has no float: absent, not a crash
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


@dataclass(frozen=True)
class Cost:
    """What one run cost. Training and prediction apart: ``run_info.phases`` (the runner's
    record of each phase) where present; older runs give the training's time in
    ``notes.train_seconds`` and the decoding's in ``notes.predict_seconds``, and a run that
    trains nothing spent its whole wall time predicting."""

    wall_time_s: float | None = None
    peak_rss_mib: float | None = None
    peak_gpu_mib: float | None = None
    parameters: float | None = None
    hardware: str | None = None
    training_s: float | None = None
    prediction_s: float | None = None
    training_rss_mib: float | None = None
    prediction_rss_mib: float | None = None
    reused_training: bool = False  # the adapter was trained by another run and loaded here

    @classmethod
    def from_meta(cls, meta: RunMeta | Mapping[str, Any]) -> Cost:
        doc = parse_run_meta(meta)
        info = doc.info  # a version-1 run's times come from its notes (the upgrade fills them)
        training_s = _number(info.training_wall_s)
        prediction_s = _number(info.prediction_wall_s)
        wall = _number(info.wall_time_s)
        if prediction_s is None and training_s is None:
            prediction_s = wall  # nothing trained: all predicting
        return cls(
            wall_time_s=wall,
            peak_rss_mib=_number(info.peak_rss_mib),
            peak_gpu_mib=_number(info.peak_gpu_mib),
            parameters=_number(info.parameters),
            hardware=doc.hardware or None,
            training_s=training_s,
            prediction_s=prediction_s,
            training_rss_mib=_number(info.phase("training").peak_rss_mib),
            prediction_rss_mib=_number(info.phase("prediction").peak_rss_mib),
            reused_training=info.report.adapter_reused is True,
        )


def cost_text(systems: Sequence[tuple[str, RunMeta | Mapping[str, Any]]]) -> str:
    """The cost table for a terminal: training and prediction apart, per system."""
    header = ["System", "Training", "Prediction", "Train peak", "Predict peak", "Run peak"]
    rows = []
    for system, meta in systems:
        c = Cost.from_meta(meta)
        training = "–" if c.training_s is None else fmt_seconds(c.training_s)
        rows.append(
            [
                term_text(system),
                training + (" (reused)" if c.reused_training and c.training_s is not None else ""),
                "–" if c.prediction_s is None else fmt_seconds(c.prediction_s),
                *(
                    "–" if v is None else fmt_mib(v)
                    for v in (c.training_rss_mib, c.prediction_rss_mib, c.peak_rss_mib)
                ),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    return "\n".join(lines) + "\n"


def fmt_seconds(seconds: float) -> str:
    """``9.9 s``, ``2 min 31 s``, ``1 h 04 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def fmt_mib(mib: float) -> str:
    """``164 MiB``, ``3.7 GiB``."""
    return f"{mib:.0f} MiB" if round(mib) < 1024 else f"{mib / 1024:.1f} GiB"


def fmt_count(n: float) -> str:
    """``135M``, ``22.7M``, ``7.2B``: parameter counts at a glance."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            scaled = n / size
            return f"{scaled:.0f}{suffix}" if scaled >= 100 else f"{scaled:.1f}{suffix}"
    return f"{n:.0f}"
