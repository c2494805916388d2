"""Text helpers shared by every leaderboard output: escaping and number formatting.

One implementation each, so the markdown table, the HTML page and ``score``'s text table cannot
drift apart in how they print a value or escape a system name.
"""

from __future__ import annotations

import math
import re
import unicodedata
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


# Line and paragraph breaks of any kind, and the other control characters: a carriage return
# in a system name would end its table row and start a new one.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Markdown's inline syntax (emphasis, code, links and images, headings, strike-through, table
# cells) and GitHub's `$` math: escaped with a backslash, which CommonMark allows before any
# ASCII punctuation and renders as the character itself.
_MD_PUNCT = re.compile(r"([\\`*_\[\]!#~|$])")


def one_line(text: object) -> str:
    """``text`` on one line: every control or line-break character becomes a space."""
    return _BREAKS.sub(" ", str(text))


def md_escape(text: object) -> str:
    """Text safe anywhere in a markdown line or table cell: literal, one line, no HTML.

    No link, image (a description's ``![x](https://...)`` would load from outside), heading,
    emphasis, raw HTML tag or column break survives; the rendered text reads as written.
    """
    plain = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCT.sub(r"\\\1", plain)


def md_code(text: object) -> str:
    """``text`` as a markdown code span: literal inside, fenced by more backticks than it holds."""
    plain = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", plain)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {plain} {fence}" if longest else f"{fence}{plain}{fence}"


def md_url(url: str) -> str:
    """An http(s) URL as a markdown link destination: nothing in it can end the link early."""
    from urllib.parse import quote

    return quote(one_line(url).strip(), safe=":/?#@!$&'*+,;=%~-._")


def term_text(text: object) -> str:
    """Text safe to print on a terminal: control characters (escape sequences, carriage
    returns that overwrite a line) shown as ``\\xNN`` instead of acted on."""
    return "".join(
        f"\\x{ord(ch):02x}" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
        for ch in str(text)
    )


def latex_escape(text: object) -> str:
    """Text safe in LaTeX body text (one line: a blank line would end the table's paragraph)."""
    return "".join(_LATEX.get(ch, ch) for ch in one_line(text))


def percent(value: float) -> str:
    """A fraction as a percentage with one decimal: ``0.4567`` → ``45.7``."""
    return f"{value * 100:.1f}"


def points(value: float, digits: int = 1) -> str:
    """A difference of two fractions in points, signed: ``-0.0123`` → ``-1.2``; a value that
    rounds to zero is ``0.0``, so identical runs or an interval ending just below zero never
    read ``-0.0``."""
    text = f"{value * 100:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def fmt_p(p: float) -> str:
    """Two significant digits: Monte Carlo p-values carry no more (0.0008, not 0.0007999)."""
    if math.isnan(p):
        return "–"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def floor_text(permutations: int) -> str:
    """``< 1e-4`` for B = 10,000: a p at its floor 1/(B+1), rounded up to one digit."""
    floor = 1.0 / (permutations + 1)
    exponent = math.floor(math.log10(floor))
    digit = math.ceil(floor / 10**exponent - 1e-9)
    if digit == 10:
        digit, exponent = 1, exponent + 1
    return f"< {digit}e{exponent}" if exponent < -2 else f"< {digit * 10**exponent:g}"


def finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by ``None`` (JSON has neither); keys as strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj
