"""A run's phases (training, prediction) with the wall time and peak memory of each.

The peak is the RSS high-water mark *of the phase*: on Linux the kernel's mark (``VmHWM``) is
reset at each phase's start through ``/proc/self/clear_refs``, so a baseline run after others in
one process (the demo runs five) reports its own peak, not the whole process's. Elsewhere the
mark cannot be reset and the process's peak (``ru_maxrss``) is recorded, said so by ``scope``.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def reset_peak_rss() -> bool:
    """Reset the RSS high-water mark to the current RSS; False where that is impossible."""
    try:
        _CLEAR.write_text("5")  # "5": reset the peak RSS (Linux 4.0+, proc(5))
    except OSError:
        return False
    return True


def peak_rss_mib() -> float:
    """The RSS high-water mark since the last reset (the process's where none is possible)."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 if sys.platform != "darwin" else rss / 2**20


class Phases:
    """``start("training")`` ... ``start("prediction")`` ... ``finish()``: one record per phase."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self._current: str | None = None
        self._start = 0.0
        self.scope = "phase" if reset_peak_rss() else "process"

    def start(self, name: str) -> None:
        """End the current phase (if any) and start ``name``; a phase started again adds up."""
        self.finish()
        self._current, self._start = name, time.perf_counter()
        reset_peak_rss()

    def finish(self) -> None:
        if self._current is None:
            return
        wall = time.perf_counter() - self._start
        peak = peak_rss_mib()
        record = self.records.setdefault(self._current, {"wall_s": 0.0, "peak_rss_mib": 0.0})
        record["wall_s"] = round(record["wall_s"] + wall, 3)
        record["peak_rss_mib"] = round(max(record["peak_rss_mib"], peak), 1)
        self._current = None

    def peak_rss_mib(self) -> float:
        """The run's peak: the largest phase peak."""
        return max((r["peak_rss_mib"] for r in self.records.values()), default=peak_rss_mib())
