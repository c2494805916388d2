"""What each run cost, read from its ``meta.json``: wall time, peak memory, model size, hardware.

``run_info`` is free-form (the baseline runner writes it; other submitters may not), so every
field is optional and a value of the wrong type is treated as absent rather than shown wrongly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# run_info key → Cost field; the runner writes the first three, ``parameters`` is for submitters.
RUN_INFO_KEYS = {
    "wall_time_s": "wall_time_s",
    "peak_rss_mib": "peak_rss_mib",
    "peak_gpu_mib": "peak_gpu_mib",
    "parameters": "parameters",
}


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
    wall_time_s: float | None = None
    peak_rss_mib: float | None = None
    peak_gpu_mib: float | None = None
    parameters: float | None = None
    hardware: str | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Cost:
        info = meta.get("run_info")
        info = info if isinstance(info, Mapping) else {}
        values = {field: _number(info.get(key)) for key, field in RUN_INFO_KEYS.items()}
        hardware = meta.get("hardware")
        return cls(**values, hardware=hardware if isinstance(hardware, str) and hardware else None)


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
