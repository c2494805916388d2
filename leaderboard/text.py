"""Text helpers shared by every leaderboard output: escaping and number formatting.

One implementation each, so the markdown table, the HTML page and ``score``'s text table cannot
drift apart in how they print a value or escape a system name.
"""

from __future__ import annotations

import math
from typing import Any

_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def md_escape(text: str) -> str:
    """Text safe inside a markdown table cell: no column breaks, no HTML, one line."""
    return (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\n", " ")
    )


def latex_escape(text: str) -> str:
    """Text safe in LaTeX body text."""
    return "".join(_LATEX.get(ch, ch) for ch in text)


def percent(value: float) -> str:
    """A fraction as a percentage with one decimal: ``0.4567`` → ``45.7``."""
    return f"{value * 100:.1f}"


def fmt_p(p: float) -> str:
    """Two significant digits: Monte Carlo p-values carry no more (0.0008, not 0.0007999)."""
    if math.isnan(p):
        return "–"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by ``None`` (JSON has neither); keys as strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj
