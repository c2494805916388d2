"""Pages as blocks of lines, and which blocks are page furniture rather than text.

Both ways of reading a book's sections start here: extraction (:mod:`searchtome.ingest.extract`)
reads each page's MuPDF text blocks in content-stream order (its reading order; sorting by
position would interleave the columns of two-column pages), and ToC inference
(:mod:`searchtome.ingest.infer_toc`) builds the same blocks from its styled lines. Either way,
:func:`mark_furniture` then drops running headers, footers, page numbers and side notes:
blocks whose text (digits masked) recurs at the same height on at least three pages,
page-number-only blocks at the top or bottom, and short outermost blocks sitting in a
header/footer band found that way (chapter-specific running heads).
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.ingest.pdf import page_error
from searchtome.settings import progress

if TYPE_CHECKING:
    import pymupdf

# A block recurring at the same height on this many pages is page furniture.
MIN_REPEATS = 3
# Fraction of the page height treated as top / bottom margin zones.
MARGIN = 0.07
# Longest line count of a running head / footer found by its band alone.
BAND_MAX_LINES = 2


@dataclass(slots=True)
class Block:
    """One MuPDF text block: its box, its lines, and what later stages learn about it."""

    x0: float
    y0: float
    x1: float
    y1: float
    lines: list[str]
    dropped: bool = False
    weak: bool = False  # dropped only for sitting in a running-head band; may be a heading
    key: str = ""  # text with digits masked, for spotting page furniture
    lower: str | None = None  # casefolded text, for a quick look for a title's first word
    norms: list[tuple[str, str]] | None = None  # per line, see searchtome.ingest.headings
    text: str = ""  # the block as MuPDF gave it

    def __reduce__(self) -> tuple[type[Block], tuple]:
        # Pickled as the constructor's arguments (ToC inference's workers send blocks back):
        # half the time to unpickle that per-field state takes.
        return (Block, _BLOCK_FIELDS(self))

    def line_y(self, i: int) -> float:
        """Estimated vertical centre of line ``i`` (blocks report only their own box)."""
        n = len(self.lines)
        return self.y0 + (self.y1 - self.y0) * (i + 0.5) / n


_BLOCK_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(Block)))


@dataclass
class Page:
    """One page's text blocks in reading order."""

    number: int  # 1-based
    width: float
    height: float
    blocks: list[Block] = field(default_factory=list)


# Symbol-font glyphs (bullets, ticks) come out as private-use code points: not text.
_PRIVATE_USE_RE = re.compile("[\ue000-\uf8ff]")


def _read_page(page: pymupdf.Page, flags: int) -> Page:
    return _blocks_of(page.get_textpage(flags=flags), page)


def _blocks_of(textpage: pymupdf.TextPage, page: pymupdf.Page) -> Page:
    rect = page.rect  # computed by MuPDF at each access
    out = Page(page.number + 1, rect.width, rect.height)
    for x0, y0, x1, y1, text, _no, kind in textpage.extractBLOCKS():
        if kind != 0:
            continue
        if not text.isascii():
            text = _PRIVATE_USE_RE.sub("", text)
        # Whitespace inside lines is collapsed later, once per paragraph.
        lines = [line for line in map(str.strip, text.split("\n")) if line]
        if lines:
            out.blocks.append(Block(x0, y0, x1, y1, lines, text=text))
    return out


def text_flags() -> int:
    """The MuPDF text flags every reader of a page uses (ligatures expanded), so one text page
    per page serves both ToC inference and the section text."""
    import pymupdf

    return pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_LIGATURES


# The pages of the document read last by ToC inference, handed once to read_pages: a PDF
# without an outline is then read once, not once for its headings and again for its text.
# One entry, held by identity (MuPDF documents take no weak references), consumed on use.
_READ_AHEAD: list[tuple[pymupdf.Document, list[Page]]] = []


def remember_pages(doc: pymupdf.Document, pages: list[Page]) -> None:
    """Keep ``doc``'s pages, read from the text pages inference made, for :func:`read_pages`."""
    _READ_AHEAD[:] = [(doc, pages)]


def page_from_textpage(textpage: pymupdf.TextPage, page: pymupdf.Page) -> Page:
    """One page's blocks from an already made text page (flags: :func:`text_flags`)."""
    return _blocks_of(textpage, page)


def read_pages(doc: pymupdf.Document, path: str | Path) -> list[Page]:
    """Every page of ``doc`` as text blocks, ligatures expanded (``path`` names it in errors)."""
    if _READ_AHEAD and _READ_AHEAD[0][0] is doc and not doc.is_closed:
        return _READ_AHEAD.pop()[1]
    flags = text_flags()
    pages = []
    for page in progress(doc, total=doc.page_count, desc=f"reading {Path(path).name}", unit="p"):
        try:
            pages.append(_read_page(page, flags))
        except RuntimeError as exc:
            raise page_error(path, page.number + 1, exc) from None
    return pages


# --------------------------------------------------------------------------------------------
# Page furniture: running headers, footers, page numbers, side notes

_DIGITS_RE = re.compile(r"\d+")
_PAGE_NUMBER_RE = re.compile(
    r"^(page|p\.|pag\.|página|seite)?\s*[-–—\[]?\s*(\d+|[ivxlcdm]+)\s*[-–—\]]?"
    r"(\s*(of|/|de|von)\s*\d+)?$",
    re.IGNORECASE,
)


_LETTERS_RE = re.compile(r"[^\W\d_](?:[\W\d_]*[^\W\d_]){2}")  # three letters or more


def _furniture_key(block: Block) -> str:
    if not block.key:
        block.key = _DIGITS_RE.sub("#", " ".join(" ".join(block.lines).casefold().split()))
    return block.key


def _repeat_threshold(n_pages: int) -> int:
    return max(MIN_REPEATS, n_pages // 20)


def mark_furniture(pages: Sequence[Page]) -> int:
    """Set ``dropped`` on headers, footers, page numbers and repeated side notes; return count.

    Three passes: (1) outermost blocks whose text, digits masked, recurs at the same height on
    many pages, plus page-number-only outermost blocks; (2) any block, anywhere, repeated
    identically on a quarter of the pages (side notes, watermarks); (3) short outermost blocks
    in a band where pass 1 found furniture on many pages (running heads naming a chapter too
    short for pass 1).
    """
    n_pages = len(pages)
    repeats = _repeat_threshold(n_pages)
    outer: list[tuple[Block, str]] = []  # (block, "top"/"bottom")
    # Side notes repeat verbatim: the block's text is the key, no need to mask digits.
    verbatim: dict[tuple[str, int], set[int]] = defaultdict(set)
    for page in pages:
        if not page.blocks:
            continue
        # The first and last "row" of blocks, plus anything in the outer margins.
        first = min(b.y0 for b in page.blocks)
        last = max(b.y1 for b in page.blocks)
        top = min(b.y1 for b in page.blocks if b.y0 == first)
        bottom = max(b.y0 for b in page.blocks if b.y1 == last)
        for block in page.blocks:
            if len(block.text) >= 20:
                verbatim[(block.text, round(block.y0 / 4))].add(page.number)
            if block.y0 < top or block.y1 <= page.height * MARGIN:
                outer.append((block, "top"))
            elif block.y1 > bottom or block.y0 >= page.height * (1 - MARGIN):
                outer.append((block, "bottom"))
    occurrences: dict[tuple[str, int], int] = Counter(
        (_furniture_key(block), round(block.y0 / 4)) for block, _ in outer
    )
    bands: dict[str, Counter[int]] = {"top": Counter(), "bottom": Counter()}
    for block, zone in outer:
        key = _furniture_key(block)
        if _LETTERS_RE.search(key):
            if occurrences[(key, round(block.y0 / 4))] >= repeats:
                block.dropped = True
                if len(block.lines) <= BAND_MAX_LINES:
                    bands[zone][round(block.y0 / 2)] += 1
        elif _PAGE_NUMBER_RE.match(" ".join(block.lines)):
            block.dropped = True
    body_repeats = max(MIN_REPEATS, n_pages // 4)
    for (text, _y), on_pages in verbatim.items():
        if len(on_pages) >= body_repeats:
            for page_number in on_pages:
                for block in pages[page_number - 1].blocks:
                    if block.text == text:
                        block.dropped = True
    common = {
        zone: {b for b, c in counter.items() if c >= repeats} for zone, counter in bands.items()
    }
    for block, zone in outer:
        if block.dropped or len(block.lines) > BAND_MAX_LINES:
            continue
        band = round(block.y0 / 2)
        if {band - 1, band, band + 1} & common[zone]:
            block.dropped = block.weak = True
    return sum(b.dropped for page in pages for b in page.blocks)
