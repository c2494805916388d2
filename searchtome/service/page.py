"""What the competition page shows besides the board: the competition's own words, the phase
and its deadline, and the numbers formatted the way the page and the API agree on.

The page is rendered on the server from the same board document ``/api/leaderboard`` serves;
everything a visitor's browser adds (local times, the filter, the team's own runs) is done by
``static/app.js`` from what this module writes into the page, never from a cookie.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from searchtome.service.home import ServerSettings

# The Δ column draws every interval on one scale, this many points each side of zero at least.
MIN_HALF_RANGE = 2.0


@dataclass(frozen=True)
class PhaseView:
    """One phase as the page shows it: a name and its UTC start and end."""

    name: str
    start: float
    end: float
    final: bool = False

    def iso(self, when: float) -> str:
        return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class PhaseStatus:
    """Where the competition stands at ``now``: the open phase, else the next one."""

    current: PhaseView | None
    upcoming: PhaseView | None
    over: bool  # every phase has ended

    @property
    def deadline(self) -> str | None:
        return self.current.iso(self.current.end) if self.current else None


def phase_status(phases: Sequence[PhaseView], now: float) -> PhaseStatus:
    ordered = sorted(phases, key=lambda p: (p.start, p.end, p.name))
    current = next((p for p in ordered if p.start <= now < p.end), None)
    upcoming = next((p for p in ordered if p.start > now), None)
    over = bool(ordered) and current is None and upcoming is None
    return PhaseStatus(current, upcoming, over)


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, each on one line (the template escapes them)."""
    blocks = [" ".join(b.split()) for b in text.replace("\r\n", "\n").split("\n\n")]
    return [b for b in blocks if b]


def pct(value: float | None, digits: int = 1) -> str:
    """A share as a percentage; a rounded zero is ``0.0``, never ``-0.0``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value * 100:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def ci_scale(rows: Sequence[dict[str, Any]], measure: str = "R@1") -> float:
    """Half the width of the Δ axis, in points: the widest interval on the board, at least 2."""
    widest = MIN_HALF_RANGE
    for row in rows:
        d = row.get("delta_to_top", {}).get(measure)
        if d:
            widest = max(widest, abs(d["ci_low"]) * 100, abs(d["ci_high"]) * 100)
    return math.ceil(widest)


def ci_glyph(delta: dict[str, Any], half: float, width: int = 120) -> dict[str, float]:
    """SVG coordinates of one interval on a ``width``-pixel axis from ``-half`` to ``+half``
    points (attributes, not inline styles: the page's CSP forbids those)."""

    def x(points: float) -> float:
        return round((points + half) / (2 * half) * width, 1)

    lo, hi, mid = delta["ci_low"] * 100, delta["ci_high"] * 100, delta["diff"] * 100
    return {"lo": x(lo), "hi": x(hi), "mid": x(mid), "zero": x(0.0), "width": width}


def page_context(
    settings: ServerSettings,
    dataset_name: str,
    board: dict[str, Any],
    phases: Sequence[PhaseView],
    now: float,
) -> dict[str, Any]:
    """Everything the template reads."""
    return {
        "title": settings.title or f"{dataset_name}: {settings.split} leaderboard",
        "description": paragraphs(settings.description),
        "rules": paragraphs(settings.rules),
        "board": board,
        "settings": settings,
        "phase": phase_status(phases, now),
        "phases": sorted(phases, key=lambda p: (p.start, p.end, p.name)),
        "now": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
