"""Infer a ToC from the page layout when a PDF has no outline (``--infer-toc``).

The paper names induced structure as future work; this is a transparent, rule-based version:

1. Read every line with its font size, weight and family (PyMuPDF ``get_text("dict")``), drop
   page furniture (running heads, page numbers) with the same rules as extraction.
2. The body style is the font size carrying most characters. A *heading candidate* is a run of
   at most three consecutive lines of one style that is short, does not end like a sentence,
   is not a printed-ToC line (dot leaders, trailing page number) and not monospaced code, and
   that stands out: a larger size than the body, or bold at body size forming a block of its
   own. Lines in body style qualify through numbering alone ("3.2.1. Format", "Chapter 4")
   when they sit at the left margin and continue the numbering sequence seen so far, which
   keeps numbered list items out.
3. Levels come from the numbering depth where there is one; otherwise from the style's rank
   (larger first, bold before regular), calibrated on the numbered headings of the same style.
   A label-only line ("Chapter 1") is joined with the title line under it.

Measured against the real outlines of ../shared/realpdfs (see docs/ingestion.md and
``benchmarks/infer_toc.py``).
"""

from __future__ import annotations

import logging
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.ingest.headings import norm, strip_label
from searchtome.ingest.layout import mark_furniture, remember_pages
from searchtome.ingest.outline import OutlineEntry
from searchtome.ingest.reading import read_layout
from searchtome.ingest.styled import Line, Style
from searchtome.io import collector_paused
from searchtome.records import TocNode

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

MAX_HEADING_LINES = 3
MAX_HEADING_CHARS = 150
MAX_HEADING_WORDS = 20
# Larger than the body by this factor counts as a heading size.
SIZE_RATIO = 1.12

_NUMBER_RE = re.compile(
    r"^(?:(?P<word>chapter|part|appendix|section|cap[ií]tulo|parte|ap[eê]ndice)\s+)?"
    r"(?P<num>(?:\d{1,3}|[A-Z])(?:\.\d{1,3})*)(?P<dot>\.?)(?:\s+|$)(?P<rest>.*)$",
    re.IGNORECASE,
)
_LABEL_ONLY_RE = re.compile(
    r"^(?:chapter|part|appendix|cap[ií]tulo|parte|ap[eê]ndice)\s+(?:\d{1,3}|[ivxlcdm]+|[a-z])\.?$",
    re.IGNORECASE,
)
_PRINTED_TOC_RE = re.compile(r"(?:\.\s*){3,}\s*\d+\s*$|\S\s{2,}(?:\d+|[ivxlcdm]+)\s*$", re.I)
_SENTENCE_END_RE = re.compile(r"[.;,]$")
_PAGE_REF_END_RE = re.compile(r"\s(?:\d{1,4}|[ivxlc]{1,6})$")
_CAPTION_RE = re.compile(
    r"^(example|table|figure|fig\.|listing|exhibit|chart|algorithm|equation)\s+[\w.-]*\d[\w.-]*[.:]?(\s|$)",
    re.IGNORECASE,
)


@dataclass
class _Candidate:
    lines: list[Line]
    style: Style
    numbered: tuple[int, ...] | None = None
    label_only: bool = False

    @property
    def text(self) -> str:
        return " ".join(line.text for line in self.lines)

    @property
    def first(self) -> Line:
        return self.lines[0]


def _read_lines(doc: pymupdf.Document) -> tuple[list[Line], set[tuple[int, int]]]:
    """Every text line with its style, and the (page, block) pairs that are page furniture."""
    layout = read_layout(doc)  # in several processes for a long book (searchtome.ingest.reading)
    if layout.text_pages is not None:
        remember_pages(doc, layout.text_pages)  # the section text: the PDF is read once
    mark_furniture(layout.pages)
    furniture = {(p.number, bi) for p in layout.pages for bi, b in enumerate(p.blocks) if b.dropped}
    return layout.lines, furniture


def _body_style(lines: list[Line]) -> tuple[float, str]:
    """Size and font carrying most characters of running text (code does not count)."""
    sizes: Counter[float] = Counter()
    fonts: Counter[str] = Counter()
    for line in lines:
        if line.style is not None and not line.style.mono:
            sizes[line.style.size] += line.chars
            fonts[line.font] += line.chars
    if not sizes:
        return 10.0, ""
    return sizes.most_common(1)[0][0], fonts.most_common(1)[0][0]


def _runs(lines: list[Line], furniture: set[tuple[int, int]]) -> list[list[Line]]:
    """Maximal runs of consecutive same-style lines within one block."""
    runs: list[list[Line]] = []
    for line in lines:
        if (line.page, line.block) in furniture:
            continue
        last = runs[-1][-1] if runs else None
        if (
            last is not None
            and last.page == line.page
            and last.block == line.block
            and last.style == line.style
            and line.style is not None
        ):
            runs[-1].append(line)
        else:
            runs.append([line])
    return runs


def _two_letters(text: str) -> bool:
    """Whether ``text`` holds at least two letters (``str.isalpha``), stopping at the second."""
    seen = False
    for c in text:
        if c.isalpha():
            if seen:
                return True
            seen = True
    return False


def _parse_number(text: str) -> tuple[tuple[int, ...], bool] | None:
    """``"3.2.1. Format"`` → ((3, 2, 1), False); ``"Chapter 4"`` → ((4,), True)."""
    m = _NUMBER_RE.match(text)
    if not m:
        return None
    rest = m.group("rest")
    num = m.group("num")
    parts = num.split(".")
    if parts[0].isalpha():
        if not m.group("word") and not (len(parts) > 1 or m.group("dot")):
            return None  # a lone capital letter starts many titles ("A Rose by ...")
        # Appendix letters: A.1 → (1001, 1), apart from chapter numbers.
        parts[0] = str(1000 + ord(parts[0].upper()) - ord("A") + 1)
    if not rest and not m.group("word"):
        return None
    if rest and not (rest[0].isupper() or rest[0].isdigit() or not rest[0].isascii()):
        return None
    return tuple(int(p) for p in parts), not rest


def _follows(current: tuple[int, ...], number: tuple[int, ...]) -> bool:
    """Whether ``number`` can come next after ``current`` in a section numbering."""
    if number == (1001,):  # Appendix A starts a series of its own
        return True
    if not current:
        return len(number) == 1 and number[0] <= 2
    if number[:-1] == current and number[-1] <= 2:  # first child
        return True
    depth = len(number)
    if depth <= len(current) and number[:-1] == current[: depth - 1]:
        return 0 < number[-1] - current[depth - 1] <= 3  # a later sibling, allowing gaps
    return False


def _candidates(
    lines: list[Line], furniture: set[tuple[int, int]], body: float, body_font: str
) -> list[_Candidate]:
    margins: dict[int, float] = {}
    for line in lines:  # left margin per page: the smallest x of body-style text
        if line.style is not None and abs(line.style.size - body) < 0.6:
            margins[line.page] = min(margins.get(line.page, line.x0), line.x0)
    block_sizes = Counter((line.page, line.block) for line in lines)
    out: list[_Candidate] = []
    sequence: tuple[int, ...] = ()
    for run in _runs(lines, furniture):
        first = run[0]
        style = first.style
        whole_block = block_sizes[(first.page, first.block)] == len(run)
        lead = first.lead
        if lead is not None and lead.rstrip(" .") != first.text.rstrip(" ."):
            # A numbered run-in heading: "1.1. Driving Factors." in bold, then the paragraph.
            parsed = _parse_number(lead)
            if parsed and len(lead) <= 80:
                sequence = parsed[0]
                title = lead.rstrip(" .:")
                out.append(
                    _Candidate([_replace_text(first, title)], Style(body, True, False), parsed[0])
                )
            continue
        if style is None:
            continue
        if len(run) > MAX_HEADING_LINES:
            continue
        text = " ".join(line.text for line in run)
        if (
            len(text) > MAX_HEADING_CHARS
            or len(text.split()) > MAX_HEADING_WORDS
            or not _two_letters(text)
            or _PRINTED_TOC_RE.search(run[-1].raw.rstrip())
            or _CAPTION_RE.match(text)
        ):
            continue
        parsed = _parse_number(text)
        label_only = bool(_LABEL_ONLY_RE.match(text))
        larger = style.size >= body * SIZE_RATIO
        # Bold at body size: a heading only as a block of its own that starts like a title
        # (command names and glossary terms are lowercase).
        bold_block = (
            style.bold
            and style.size >= body * 0.85
            and whole_block
            and (text[0].isupper() or text[0].isdigit())
        )
        if _SENTENCE_END_RE.search(text) and not label_only:
            continue
        if style.mono and not (parsed and whole_block):
            continue
        if (larger or bold_block) and not style.mono:
            if parsed and not label_only:
                sequence = parsed[0]
            out.append(_Candidate(run, style, parsed[0] if parsed else None, label_only))
            continue
        # Body-size lines: numbering alone, as a block of its own, at the margin or in a font
        # of its own (small capitals), continuing the numbering sequence.
        if parsed is None or not whole_block or len(run) > 1 or len(text) > 80:
            continue
        at_margin = first.x0 <= margins.get(first.page, first.x0) + 6
        distinct = first.font != body_font and not style.mono
        if not (at_margin or distinct) or first.raw[:1].isspace():
            continue
        number = parsed[0]
        if _follows(sequence, number):
            sequence = number
            out.append(_Candidate(run, style, number, label_only))
    return _merge(_drop_front_pages(out, lines))


def _drop_front_pages(cands: list[_Candidate], lines: list[Line]) -> list[_Candidate]:
    """Drop candidates on title pages and printed ToC pages.

    A title page is one where most of the text is heading-sized; a printed ToC page is one
    where most lines end in a page number. Only the first heading of a ToC page ("Contents")
    is kept.
    """
    chars: Counter[int] = Counter()
    numbered_ends: Counter[int] = Counter()
    n_lines: Counter[int] = Counter()
    for line in lines:
        chars[line.page] += line.chars
        n_lines[line.page] += 1
        if _PAGE_REF_END_RE.search(line.text):
            numbered_ends[line.page] += 1
    cand_chars: Counter[int] = Counter()
    for c in cands:
        cand_chars[c.first.page] += sum(line.chars for line in c.lines)
    out = []
    toc_pages_seen: set[int] = set()
    for c in cands:
        page = c.first.page
        if cand_chars[page] > 0.5 * chars[page] and n_lines[page] >= 3:
            continue
        if n_lines[page] >= 8 and numbered_ends[page] >= 0.4 * n_lines[page]:
            if page in toc_pages_seen or (page - 1) in toc_pages_seen:
                toc_pages_seen.add(page)
                continue
            toc_pages_seen.add(page)
        out.append(c)
    return out


def _replace_text(line: Line, text: str) -> Line:
    from dataclasses import replace

    return replace(line, text=text, raw=text)


def _merge(cands: list[_Candidate]) -> list[_Candidate]:
    """Join "Chapter 1" with the title under it, and headings split over two blocks."""
    merged: list[_Candidate] = []
    for cand in cands:
        prev = merged[-1] if merged else None
        if prev is not None and prev.first.page == cand.first.page:
            gap = cand.first.y0 - prev.lines[-1].y1
            if prev.label_only and 0 <= gap < 4 * prev.style.size:
                merged[-1] = _Candidate(prev.lines + cand.lines, cand.style, prev.numbered)
                continue
            if (
                prev.style == cand.style
                and cand.numbered is None
                and 0 <= gap < 0.6 * cand.style.size
                and len(prev.lines) + len(cand.lines) <= MAX_HEADING_LINES
            ):
                merged[-1] = _Candidate(prev.lines + cand.lines, prev.style, prev.numbered)
                continue
        merged.append(cand)
    return merged


def _levels(cands: list[_Candidate]) -> list[int]:
    """A level per candidate: numbering depth, else the style's rank calibrated on numbers."""
    styles = sorted({c.style for c in cands}, key=lambda s: (-s.size, not s.bold))
    depth_of: dict[Style, list[int]] = defaultdict(list)
    for c in cands:
        if c.numbered is not None:
            depth_of[c.style].append(len(c.numbered))
    style_level: dict[Style, int] = {}
    last = 0
    for style in styles:  # larger styles first; unnumbered ones go one below the one above
        numbered = depth_of[style]
        level = max(round(statistics.median(numbered)) if numbered else last + 1, 1)
        style_level[style] = level
        last = level
    levels = []
    for c in cands:
        if c.numbered is not None and not c.label_only:
            levels.append(len(c.numbered))
        else:
            levels.append(style_level[c.style])
    # Close gaps so the tree has no empty levels (2, 4 → 1, 2).
    used = sorted(set(levels))
    remap = {level: i + 1 for i, level in enumerate(used)}
    return [remap[level] for level in levels]


def infer_entries(doc: pymupdf.Document, path: str | Path) -> tuple[list[OutlineEntry], list[str]]:
    """Inferred outline entries (document order) and warnings."""
    with collector_paused():
        lines, furniture = _read_lines(doc)
        if not lines:
            return [], [f"{Path(path).name}: no text layer (a scanned PDF?); nothing to infer"]
        body, body_font = _body_style(lines)
        cands = _candidates(lines, furniture, body, body_font)
    levels = _levels(cands)
    entries = [
        OutlineEntry(level, c.text, c.first.page, c.first.x0, max(c.first.y0 - 1, 0.0))
        for c, level in zip(cands, levels, strict=True)
    ]
    warns = [
        f"ToC inferred from the page layout ({len(entries)} headings, body text "
        f"{body:g} pt); check it before relying on it"
    ]
    log.info("%s: inferred %d headings", path, len(entries))
    return entries, warns


# --------------------------------------------------------------------------------------------
# Measuring against a real outline


@dataclass(frozen=True)
class Agreement:
    """Leaf precision/recall of an inferred ToC against a reference outline."""

    true_leaves: int
    inferred_leaves: int
    matched: int

    @property
    def precision(self) -> float:
        return self.matched / self.inferred_leaves if self.inferred_leaves else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.true_leaves if self.true_leaves else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def _title_key(title: str) -> str:
    return norm(strip_label(title)) or norm(title)


def titles_match(a: str, b: str) -> bool:
    """Same heading, numbering aside: "4.2 Breakpoints" ~ "Breakpoints"."""
    import difflib

    ka, kb = _title_key(a), _title_key(b)
    if not ka or not kb:
        return False
    if ka == kb:
        return True
    return difflib.SequenceMatcher(None, ka, kb, autojunk=False).ratio() >= 0.85


def leaf_agreement(reference: Sequence[TocNode], inferred: Sequence[TocNode]) -> Agreement:
    """One-to-one matching of leaves: same title (see :func:`titles_match`), page within 1."""
    return _agreement(
        [n for n in reference if n.is_leaf and n.page is not None],
        [n for n in inferred if n.is_leaf and n.page is not None],
    )


def entry_agreement(reference: Sequence[TocNode], inferred: Sequence[TocNode]) -> Agreement:
    """The same over all entries, leaf or not (insensitive to a deeper or shallower tree)."""
    return _agreement(
        [n for n in reference if n.page is not None], [n for n in inferred if n.page is not None]
    )


def _agreement(ref: Sequence[TocNode], inf: Sequence[TocNode]) -> Agreement:
    by_page: dict[int, list[int]] = defaultdict(list)
    for j, node in enumerate(inf):
        by_page[node.page].append(j)  # type: ignore[index]
    used: set[int] = set()
    matched = 0
    for node in ref:
        for page in (node.page, node.page - 1, node.page + 1):  # type: ignore[operator]
            hit = next(
                (
                    j
                    for j in by_page.get(page, ())
                    if j not in used and titles_match(node.title, inf[j].title)
                ),
                None,
            )
            if hit is not None:
                used.add(hit)
                matched += 1
                break
    return Agreement(len(ref), len(inf), matched)
