"""What each system is, for the page's columns: type, model, parameters, training data, date, link.

Read from ``meta.json``: ``models``, ``trained_on``, ``date`` and ``url`` are schema fields;
``run_info.system_type`` (one of :data:`~searchtome.records.SYSTEM_TYPES`) and
``run_info.parameters`` (a count) are what the baseline runner records and what any submitter
may add. A run written before the runner recorded its type gets it from ``run_info.baseline``
(:data:`~searchtome.records.BASELINE_TYPES`); a type that is not one of the five rejects the
submission. Also one colour per system, shared by every table and figure of the page.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from searchtome.leaderboard.costs import Cost
from searchtome.records import BASELINE_TYPES, SYSTEM_TYPES
from searchtome.submissions.meta import RunMeta, parse_run_meta

# Colour-blind-aware first colours (matplotlib's tab10), then their light tab20 partners; past
# twenty, further hues by the golden angle: no two systems ever share a colour.
_FIRST = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip


def type_problem(meta: RunMeta | Mapping[str, Any]) -> str | None:
    """Why ``run_info.system_type`` is unusable, or None (absent or one of the five)."""
    info = parse_run_meta(meta).info
    wrong = [p for p in info.problems if p.startswith("run_info.system_type ")]
    if wrong:
        return wrong[0].removeprefix("run_info.system_type ")
    value = info.system_type
    if value is None or value in SYSTEM_TYPES:
        return None
    return f"{value!r} is not a system type; use one of {', '.join(SYSTEM_TYPES)}"


@dataclass(frozen=True)
class SystemCard:
    system_type: str  # "" when unknown
    model: str
    parameters: float | None
    trained_on: str
    date: str
    url: str  # "" unless an http(s) URL

    @classmethod
    def from_meta(cls, meta: RunMeta | Mapping[str, Any]) -> SystemCard:
        doc = parse_run_meta(meta)
        info = doc.info
        kind = info.system_type
        if kind not in SYSTEM_TYPES:
            kind = BASELINE_TYPES.get(info.baseline or "", "")
        url = doc.url or ""
        return cls(
            system_type=kind or "",
            model=_listed(doc.models),
            parameters=Cost.from_meta(doc).parameters,
            trained_on=_listed(doc.trained_on),
            date=(doc.date or "")[:10],  # the day of an ISO timestamp
            url=url if url.lower().startswith(("http://", "https://")) else "",
        )

    @property
    def model_short(self) -> str:
        """Each model's name without its organisation and notes: ``all-MiniLM-L6-v2``."""
        names = [m.split(" (")[0].rsplit("/", 1)[-1] for m in self.model.split(", ")]
        return ", ".join(n for n in names if n) or self.model

    @property
    def url_text(self) -> str:
        """The link's text: host and the path's last part, ``github.com: baselines.md#bm25``."""
        parts = urlsplit(self.url)
        last = parts.path.rstrip("/").rsplit("/", 1)[-1]
        text = f"{parts.netloc}: {last}" if last else parts.netloc
        text += f"#{parts.fragment}" if parts.fragment else ""
        return text if len(text) <= 48 else text[:47] + "…"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _listed(values: tuple[str, ...] | None) -> str:
    """A list field for a cell: its items joined, ``none`` for an empty list, "" when absent."""
    if values is None:
        return ""
    return ", ".join(values) or "none"


def palette(systems: Sequence[str]) -> dict[str, str]:
    """One distinct colour per system, in the given (rank) order; the same on every figure."""
    colours: dict[str, str] = {}
    used: set[str] = set()
    hue = 0.0
    for system in systems:
        if len(colours) < len(_FIRST):
            colour = _FIRST[len(colours)]
        else:
            colour = ""
            while not colour or colour in used:  # golden-angle hues, a shade darker each lap
                hue = (hue + 0.618033988749895) % 1.0
                lap = (len(colours) - len(_FIRST)) // 12
                r, g, b = colorsys.hls_to_rgb(hue, 0.45 - 0.04 * (lap % 5), 0.65)
                colour = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
        colours[system] = colour
        used.add(colour)
    return colours
