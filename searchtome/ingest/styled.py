"""A PDF page's text lines with their font style, from MuPDF's ``extractDICT`` blocks.

ToC inference (:mod:`searchtome.ingest.infer_toc`) reads every line of a book this way. It is
the costly part of inferring a ToC: a book of 400 pages holds about 170,000 spans (a word
and the synthetic space after it are two), so the work per span is kept to a few dictionary
reads. A line whose spans all share one font, flags and size (most of them) takes a fast path;
a line of mixed styles (a heading run into its paragraph, inline code) is weighed span by span.
Both give the same line, so the inferred ToC does not depend on which path a line took.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
from collections import Counter
from dataclasses import dataclass

_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi", "medi")


@dataclass(frozen=True)
class Style:
    size: float  # rounded to half points
    bold: bool
    mono: bool


@dataclass(slots=True)
class Line:
    page: int  # 1-based
    block: int
    x0: float
    y0: float
    y1: float
    text: str
    raw: str  # with leading whitespace, for indentation in monospaced pages
    style: Style | None  # None: mixed styles within the line (a run-in heading, inline code)
    chars: int
    font: str  # the font carrying most of the line's characters
    lead: str | None = None  # leading bold words of a mixed-style first line of a block

    def __reduce__(self) -> tuple[type[Line], tuple]:
        # Pickled as the constructor's arguments: ToC inference's workers send a book's lines
        # to the parent, which unpickles them in half the time that per-field state takes.
        return (Line, _LINE_FIELDS(self))


_LINE_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(Line)))


def span_style(span: dict) -> tuple[float, bool, bool]:
    """(size to half a point, bold, monospaced) of one ``extractDICT`` span."""
    return _style_of(span.get("font", ""), int(span.get("flags", 0)), float(span["size"]))


@functools.lru_cache(maxsize=4096)
def _style_of(font: str, flags: int, size: float) -> tuple[float, bool, bool]:
    """(size to half a point, bold, monospaced); fonts often say so only in their names."""
    name = font.lower()
    bold = bool(flags & 16) or any(n in name for n in _BOLD_NAMES)
    mono = bool(flags & 8) or "mono" in name or "courier" in name
    return round(size * 2) / 2, bold, mono


@functools.lru_cache(maxsize=4096)
def _uniform_style(font: str, flags: int, size: float) -> Style:
    return Style(*_style_of(font, flags, size))


# Only digits, dots, brackets, roman-numeral letters and dashes: a section number.
_NUMERIC_SPAN_RE = re.compile(r"^[\s\d.:)(IVXivx-]*$")


def _mixed_style(spans: list[dict]) -> Style | None:
    """The style of most of a line's words (70% of characters), or None for a mixed line.

    A leading number set in another font does not count, nor does a word or two in small
    capitals or code inside a heading.
    """
    words = [s for s in spans if not _NUMERIC_SPAN_RE.match(s["text"])] or spans
    weights: Counter[tuple[float, bool, bool]] = Counter()
    for span in words:
        weights[span_style(span)] += len(span["text"].strip())
    total = sum(weights.values())
    (style, chars), *_ = weights.most_common(1)
    if chars < 0.7 * total:
        return None
    # Small capitals are set smaller: a line's size is its largest among the main weight.
    size = max(st[0] for st in map(span_style, words) if st[1:] == style[1:])
    return Style(size, style[1], style[2])


def _mixed_font(spans: list[dict]) -> str:
    weights: Counter[str] = Counter()
    for s in spans:
        weights[s.get("font", "")] += len(s["text"])
    return weights.most_common(1)[0][0]


def _rows(block: dict) -> list[list[dict]]:
    """The block's lines, with lines on the same row (a number, a tab, a title) joined."""
    lines = block.get("lines", ())
    if len(lines) == 1:
        return [list(lines)]
    rows: list[list[dict]] = []
    last_box = None
    for line in lines:
        box = line["bbox"]
        if last_box is not None and rows:
            overlap = min(box[3], last_box[3]) - max(box[1], last_box[1])
            if (
                overlap > 0.6 * min(box[3] - box[1], last_box[3] - last_box[1])
                and box[0] >= last_box[2] - 1
            ):
                rows[-1].append(line)
                last_box = (last_box[0], min(box[1], last_box[1]), box[2], max(box[3], last_box[3]))
                continue
        rows.append([line])
        last_box = tuple(box)
    return rows


def bold_lead(spans: list[dict]) -> str | None:
    """The text up to the end of the leading bold run (a leading number may be regular)."""
    out = []
    seen_bold = False
    for span in spans:
        _size, bold, mono = span_style(span)
        if bold and not mono:
            seen_bold = True
            out.append(span["text"])
        elif not seen_bold and _NUMERIC_SPAN_RE.match(span["text"]):
            out.append(span["text"])
        else:
            break
    lead = " ".join("".join(out).split())
    return lead if seen_bold and lead.endswith(".") else None


def block_lines(block: dict, page: int, index: int, out: list[Line]) -> list[str]:
    """Append the block's lines to ``out``; return their texts (one per row)."""
    texts: list[str] = []
    for row in _rows(block):
        if len(row) == 1:
            all_spans = row[0]["spans"]
            x0, y0, _x1, y1 = row[0]["bbox"]
        else:
            all_spans = [s for line in row for s in line["spans"]]
            x0 = min(line["bbox"][0] for line in row)
            y0 = min(line["bbox"][1] for line in row)
            y1 = max(line["bbox"][3] for line in row)
        summary = _row_summary(all_spans)
        if summary is None:  # blank
            continue
        raw, style, chars, font = summary
        if len(row) > 1:
            raw = " ".join("".join(s["text"] for s in line["spans"]) for line in row)
        text = " ".join(raw.split())
        if raw == text:
            raw = text  # one string, pickled and held once
        lead = bold_lead(all_spans) if not texts else None
        texts.append(text)
        out.append(Line(page, index, x0, y0, y1, text, raw, style, chars, font, lead))
    return texts


def _row_summary(spans: list[dict]) -> tuple[str, Style | None, int, str] | None:
    """A row's spans in one pass: their text joined, and the style, character count and main
    font of the non-blank ones; None when every span is blank.

    When every non-blank span has the first one's font, flags and size, the style is that
    span's and so is the font (what the weighing would find); only mixed rows are weighed, and
    only they get a list of their non-blank spans. This runs for each of a book's 170,000
    spans, so the blank test is ``isspace`` (``strip`` would copy the text).
    """
    parts: list[str] = []
    chars = 0
    first: dict | None = None
    font, flags, size = "", 0, 0.0
    uniform = True
    for s in spans:
        t = s["text"]
        parts.append(t)
        if t and not t.isspace():  # the same as t.strip() != ""
            chars += len(t)
            if first is None:
                first = s
                font, flags, size = s.get("font", ""), s.get("flags", 0), s["size"]
            elif uniform and (
                s["size"] != size or s.get("flags", 0) != flags or s.get("font", "") != font
            ):
                uniform = False
    if first is None:
        return None
    if uniform:
        return "".join(parts), _uniform_style(font, int(flags), float(size)), chars, font
    kept = [s for s in spans if s["text"].strip()]
    return "".join(parts), _mixed_style(kept), chars, _mixed_font(kept)
