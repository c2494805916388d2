"""Leaf sections and paragraphs: the text of every ToC entry, cut at its heading's position.

``searchtome extract PDF --out DIR`` writes ``toc.jsonl`` (every node, with a non-leaf's own
introduction in ``text``), ``leaves.jsonl`` and ``paragraphs.jsonl``, plus ``meta.json``
(source, warnings and the SHA-256 of the other three, so a mixed set is detected on reading).

How a page becomes section text:

1. MuPDF text blocks in content-stream order (its reading order; sorting by position would
   interleave the columns of two-column pages). Ligatures are expanded.
2. Running headers, footers, page numbers and side notes are dropped: blocks whose text
   (digits masked) recurs at the same height on at least three pages, page-number-only
   blocks at the top or bottom, and short outermost blocks sitting in a header/footer band
   found that way (chapter-specific running heads).
3. Each ToC entry starts at its heading: the line(s) on its page that spell the title
   (optionally after a number such as "4.2" or "Chapter 4"), nearest to the outline
   destination's point; failing that, the first line at or below the destination point;
   failing that, the top of the page. The heading lines themselves are not section text.
4. A section runs to the start of the next entry in document order, so several sections on
   one page each get only their own text. Lines join into paragraphs per block (a hyphen at a
   line end before a lowercase word is removed); a paragraph cut by a page break is joined
   when it does not end a sentence and the next page goes on in lowercase.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from searchtome.errors import SearchTomeError
from searchtome.ingest.toc import InferMode, OutlineEntry, TocTree
from searchtome.records import Leaf, Paragraph, TocNode

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

FORMAT = "searchtome-extraction-v1"
TOC_FILE = "toc.jsonl"
LEAVES_FILE = "leaves.jsonl"
PARAGRAPHS_FILE = "paragraphs.jsonl"
META_FILE = "meta.json"

# A block recurring at the same height on this many pages is page furniture.
MIN_REPEATS = 3
# Fraction of the page height treated as top / bottom margin zones.
MARGIN = 0.07
# Longest line count of a running head / footer found by its band alone.
BAND_MAX_LINES = 2


@dataclass(frozen=True)
class Extraction:
    """Everything extracted from one book: the ToC (with intro texts), leaves, paragraphs."""

    book_id: str
    toc: TocTree
    leaves: tuple[Leaf, ...]
    paragraphs: tuple[Paragraph, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.toc.warnings

    def paragraphs_of(self, leaf_id: str) -> list[Paragraph]:
        return [p for p in self.paragraphs if p.leaf_id == leaf_id]


# --------------------------------------------------------------------------------------------
# Pages as blocks of lines


@dataclass(slots=True)
class _Block:
    x0: float
    y0: float
    x1: float
    y1: float
    lines: list[str]
    dropped: bool = False
    weak: bool = False  # dropped only for sitting in a running-head band; may be a heading
    key: str = ""  # text with digits masked, for spotting page furniture
    lower: str | None = None  # casefolded text, for a quick look for a title's first word
    norms: list[tuple[str, str]] | None = None  # see _block_norms
    text: str = ""  # the block as MuPDF gave it

    def line_y(self, i: int) -> float:
        """Estimated vertical centre of line ``i`` (blocks report only their own box)."""
        n = len(self.lines)
        return self.y0 + (self.y1 - self.y0) * (i + 0.5) / n


@dataclass
class _Page:
    number: int  # 1-based
    width: float
    height: float
    blocks: list[_Block] = field(default_factory=list)


# Symbol-font glyphs (bullets, ticks) come out as private-use code points: not text.
_PRIVATE_USE_RE = re.compile("[\ue000-\uf8ff]")


def _read_page(page: pymupdf.Page, flags: int) -> _Page:
    out = _Page(page.number + 1, page.rect.width, page.rect.height)
    for x0, y0, x1, y1, text, _no, kind in page.get_textpage(flags=flags).extractBLOCKS():
        if kind != 0:
            continue
        if not text.isascii():
            text = _PRIVATE_USE_RE.sub("", text)
        # Whitespace inside lines is collapsed later, once per paragraph.
        lines = [line for line in map(str.strip, text.split("\n")) if line]
        if lines:
            out.blocks.append(_Block(x0, y0, x1, y1, lines, text=text))
    return out


def read_pages(doc: pymupdf.Document, path: str | Path) -> list[_Page]:
    import pymupdf

    from searchtome.ingest.pdf import page_error
    from searchtome.settings import progress

    flags = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_LIGATURES
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


def _furniture_key(block: _Block) -> str:
    if not block.key:
        block.key = _DIGITS_RE.sub("#", " ".join(" ".join(block.lines).casefold().split()))
    return block.key


def _repeat_threshold(n_pages: int) -> int:
    return max(MIN_REPEATS, n_pages // 20)


def mark_furniture(pages: Sequence[_Page]) -> int:
    """Set ``dropped`` on headers, footers, page numbers and repeated side notes; return count.

    Three passes: (1) outermost blocks whose text, digits masked, recurs at the same height on
    many pages, plus page-number-only outermost blocks; (2) any block, anywhere, repeated
    identically on a quarter of the pages (side notes, watermarks); (3) short outermost blocks
    in a band where pass 1 found furniture on many pages (running heads naming a chapter too
    short for pass 1).
    """
    n_pages = len(pages)
    repeats = _repeat_threshold(n_pages)
    outer: list[tuple[_Block, str]] = []  # (block, "top"/"bottom")
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


# --------------------------------------------------------------------------------------------
# Where each ToC entry starts


_NORM_DROP_RE = re.compile(r"[\W_]+")
_LABEL_WORDS = (
    r"chapter|part|section|appendix|annex|lesson|unit|book|cap[ií]tulo|parte|"
    r"se[cç][aã]o|ap[eê]ndice|anexo|kapitel|teil|chapitre|partie"
)
# An optional "Chapter"-like word, then a number such as 4, 4.2, IV, A or A.1, then space.
_LABEL_RE = re.compile(
    rf"^\s*(?:(?:(?:{_LABEL_WORDS})\.?\s+)?(?:\d+|[ivxlcdm]+|[a-z])(?:[.\-]\d+)*[.:)]?(?=\s|$))?\s*",
    re.IGNORECASE,
)


_ASCII_DROP = {c: None for c in range(128) if not chr(c).isalnum()}


def norm(text: str) -> str:
    """Lowercase letters and digits only: what heading matching compares."""
    if text.isascii():  # the common case, without regex or Unicode normalisation
        return text.lower().translate(_ASCII_DROP)
    return _NORM_DROP_RE.sub("", unicodedata.normalize("NFKC", text).casefold())


def _strip_label(text: str) -> str:
    """``"4.2 Breakpoints"`` → ``"Breakpoints"``; ``"Chapter 4"`` → ``""``."""
    return text[_LABEL_RE.match(text).end() :]  # type: ignore[union-attr]


class Position(NamedTuple):
    """A point in reading order: page index (0-based), block index, line index."""

    page: int
    block: int
    line: int


@dataclass(frozen=True)
class _Start:
    pos: Position
    heading: tuple[Position, ...]  # the heading's own lines, left out of the section text
    y: float | None
    how: str  # "heading", "run-in", "destination" or "page"


def _title_variants(title: str) -> list[str]:
    variants = [norm(title)]
    bare = norm(_strip_label(title))
    if bare and bare != variants[0] and len(bare) >= 3:
        variants.append(bare)
    return [v for v in variants if v]


@dataclass(frozen=True)
class _Match:
    lines: tuple[Position, ...]
    y: float
    rank: int  # 0 whole title, 1 title without its number, 2-3 the same as a run-in heading

    @property
    def pos(self) -> Position:
        return self.lines[0]


# Longest heading, in lines, that a title may wrap over.
_MAX_HEADING_LINES = 4


_WORD_RE = re.compile(r"[^\W_]{3,}")


def _block_norms(block: _Block) -> list[tuple[str, str]]:
    """Per line: the normalised text, and the same without a leading label (cached)."""
    if block.norms is None:
        label_match = _LABEL_RE.match
        block.norms = []
        for line in block.lines:
            full = norm(line)
            label = label_match(line).end()  # type: ignore[union-attr]
            block.norms.append((full, norm(line[label:]) if label else full))
    return block.norms


def _match_heading(
    page: _Page, title: str, variants: Sequence[str], after: Position | None, page_index: int
) -> list[_Match]:
    """Places on ``page`` whose whole line(s) spell the title, or whose line starts with it."""
    # Only blocks holding the title's first word can start a heading; this spares normalising
    # every line of every page that has a ToC entry.
    word = _WORD_RE.search(_strip_label(title).casefold())
    needle = word.group() if word and word.group().isascii() else None
    eligible = [bi for bi, b in enumerate(page.blocks) if not b.dropped or b.weak]
    found = []
    for n, bi in enumerate(eligible):
        block = page.blocks[bi]
        if needle is not None:
            if block.lower is None:
                block.lower = " ".join(block.lines).casefold()
            if needle not in block.lower:
                continue
        norms = _block_norms(block)
        step = (block.y1 - block.y0) / len(block.lines)
        for li, (full, bare) in enumerate(norms):
            # Plain tuples: they compare and hash like Position, at a fraction of the cost.
            pos = (page_index, bi, li)
            if after is not None and pos < after:
                continue
            y = block.y0 + step * li  # top of the line
            here: list[_Match] = []  # the line with and without its label; the best one counts
            for first in dict.fromkeys((full, bare)):
                acc, lines = first, [pos]
                nb, nl = n, li  # the last line taken: eligible[nb], line nl
                while True:
                    exact = next((k for k, v in enumerate(variants) if acc == v), None)
                    if exact is not None:
                        here.append(_Match(tuple(lines), y, exact))  # type: ignore[arg-type]
                        break
                    if len(lines) == 1:
                        run_in = next(
                            (
                                k
                                for k, v in enumerate(variants)
                                if len(v) >= 4 and acc.startswith(v)
                            ),
                            None,
                        )
                        if run_in is not None:
                            here.append(_Match((pos,), y, 2 + run_in))  # type: ignore[arg-type]
                            break
                    if len(lines) >= _MAX_HEADING_LINES or not any(
                        v.startswith(acc) for v in variants
                    ):
                        break
                    # The title goes on in the next line, possibly in the next block.
                    nl += 1
                    if nl >= len(page.blocks[eligible[nb]].lines):
                        nb, nl = nb + 1, 0
                        if nb >= len(eligible):
                            break
                    acc += _block_norms(page.blocks[eligible[nb]])[nl][0]
                    lines.append((page_index, eligible[nb], nl))
            if here:
                found.append(min(here, key=lambda m: m.rank))
    return found


def _line_at(page: _Page, page_index: int, x: float | None, y: float) -> Position:
    """The first line at or below ``(x, y)``; the end of the page when there is none."""
    use_x = x is not None and x > 1.0
    best: tuple[float, Position] | None = None
    for bi, block in enumerate(page.blocks):
        if block.dropped or block.y1 < y - 2:
            continue
        if use_x and not (block.x0 - 12 <= x < block.x1):  # type: ignore[operator]
            continue
        for li in range(len(block.lines)):
            ly = block.line_y(li)
            if ly >= y - 2:
                key = (ly, Position(page_index, bi, li))
                if best is None or key < best:
                    best = key
                break
    if best is None and use_x:
        return _line_at(page, page_index, None, y)
    if best is None:
        return Position(page_index, len(page.blocks), 0)
    return best[1]


def _choose(matches: Sequence[_Match], dest_y: float | None) -> _Match | None:
    """The heading nearest below the destination point; run-in headings only when close."""
    exact = [m for m in matches if m.rank < 2]
    if dest_y is None:
        return min(exact, key=lambda m: (m.rank, m.pos)) if exact else None

    def nearest(pool: list[_Match]) -> _Match | None:
        return min(pool, key=lambda m: (m.rank, abs(m.y - dest_y))) if pool else None

    # Some producers (texinfo) point at the top of the page whatever the heading's height, so a
    # whole-line match further down beats a run-in one (a paragraph that starts with the title
    # words) close to the point.
    return (
        nearest([m for m in exact if dest_y - 30 <= m.y <= dest_y + 200])
        or nearest([m for m in exact if m.y >= dest_y - 30])
        or nearest([m for m in matches if m.rank >= 2 and dest_y - 30 <= m.y <= dest_y + 200])
        or nearest(exact)
    )


def locate_starts(
    pages: Sequence[_Page], nodes: Sequence[TocNode], entries: Sequence[OutlineEntry]
) -> list[_Start | None]:
    """Each node's start position (``None`` for nodes that point nowhere)."""
    starts: list[_Start | None] = []
    previous: _Start | None = None
    for node, entry in zip(nodes, entries, strict=True):
        if node.page is None:
            starts.append(None)
            continue
        pi = node.page - 1
        page = pages[pi]
        dest_y = entry.y
        after = previous.pos if previous is not None and previous.pos[0] == pi else None
        variants = _title_variants(node.title)
        matches = _match_heading(page, node.title, variants, after, pi) if variants else []
        if not matches and after is not None:
            matches = _match_heading(page, node.title, variants, None, pi)
        chosen = _choose(matches, dest_y)
        if chosen is not None:
            # A heading at the top of a page can sit in the running-head band: keep its block.
            page.blocks[chosen.pos[1]].dropped = False
            how = "run-in" if chosen.rank >= 2 else "heading"
            heading = () if chosen.rank >= 2 else chosen.lines
            start = _Start(chosen.pos, heading, round(chosen.y, 2), how)
        elif dest_y is not None:
            start = _Start(_line_at(page, pi, entry.x, dest_y), (), dest_y, "destination")
        else:
            start = _Start(Position(pi, 0, 0), (), None, "page")
        starts.append(start)
        previous = start
    _recover_dangling(pages, nodes, starts)
    return starts


def _recover_dangling(
    pages: Sequence[_Page], nodes: Sequence[TocNode], starts: list[_Start | None]
) -> None:
    """Find the heading of entries that point nowhere between their neighbours' headings.

    Only a whole-line match of the title counts, and only one: a title such as "Introduction"
    that occurs twice in the range stays unplaced rather than guessed.
    """
    for i, node in enumerate(nodes):
        if starts[i] is not None or node.page is not None:
            continue
        before = next((s for s in reversed(starts[:i]) if s is not None), None)
        after = next((s for s in starts[i + 1 :] if s is not None), None)
        first = before.pos[0] if before is not None else 0
        last = after.pos[0] if after is not None else len(pages) - 1
        if last - first > 20:  # too wide a range to trust a text match
            continue
        variants = _title_variants(node.title)
        found = []
        for pi in range(first, last + 1):
            found += [
                m
                for m in _match_heading(pages[pi], node.title, variants, None, pi)
                if m.rank < 2
                and (before is None or m.pos > before.pos)
                and (after is None or m.pos < after.pos)
            ]
        if len(found) == 1:
            m = found[0]
            pages[m.pos[0]].blocks[m.pos[1]].dropped = False
            starts[i] = _Start(m.pos, m.lines, round(m.y, 2), "recovered")


# --------------------------------------------------------------------------------------------
# Sections and paragraphs

_SENTENCE_END_RE = re.compile(r"[.!?:;…]['\"”’)\]]*$")


def _join_lines(lines: Sequence[str]) -> str:
    """One paragraph's lines as one string: hyphenation undone, whitespace collapsed."""
    parts: list[str] = []
    for line in lines:
        if parts:
            prev = parts[-1]
            if len(prev) > 1 and prev[-1] == "-" and prev[-2].isalpha() and line[:1].islower():
                parts[-1] = prev[:-1]  # "hyphen-" + "ated" -> "hyphenated"
            else:
                parts.append(" ")
        parts.append(line)
    return " ".join("".join(parts).split())


def _continues(previous: str, following: str) -> bool:
    """Whether a paragraph cut by a page break goes on in ``following``."""
    return not _SENTENCE_END_RE.search(previous) and following[:1].islower()


@dataclass
class _Section:
    paragraphs: list[tuple[int, list[str]]] = field(default_factory=list)  # (page, lines)
    last_page: int | None = None
    # Whether the last paragraph ended on the last kept block of its page.
    open_at_page_end: bool = False

    def texts(self) -> list[tuple[int, str]]:
        """(page, text) of each paragraph."""
        return [(page, _join_lines(lines)) for page, lines in self.paragraphs]


def assemble(pages: Sequence[_Page], starts: Sequence[_Start | None]) -> list[_Section | None]:
    """Walk the document once in reading order, handing every kept line to its section."""
    order = sorted((s.pos, i) for i, s in enumerate(starts) if s is not None)
    sections: list[_Section | None] = [None if s is None else _Section() for s in starts]
    skip = {pos for s in starts if s is not None for pos in s.heading}
    k = -1  # index into order of the current section
    nxt = order[0][0] if order else None  # where the next section starts
    current: _Section | None = None
    for pi, page in enumerate(pages):
        kept = [bi for bi, b in enumerate(page.blocks) if not b.dropped]
        last_kept = kept[-1] if kept else None
        first_on_page = True
        for bi, block in enumerate(page.blocks):
            new_paragraph = True
            if block.dropped:  # sections may still start inside it (at its end, in effect)
                end = (pi, bi, len(block.lines) - 1)
                while nxt is not None and nxt <= end:
                    k += 1
                    current = sections[order[k][1]]
                    nxt = order[k + 1][0] if k + 1 < len(order) else None
                continue
            for li, line in enumerate(block.lines):
                pos = (pi, bi, li)
                if nxt is not None and nxt <= pos:
                    while nxt is not None and nxt <= pos:
                        k += 1
                        current = sections[order[k][1]]
                        nxt = order[k + 1][0] if k + 1 < len(order) else None
                    new_paragraph = True
                if current is None or pos in skip:
                    new_paragraph = True
                    continue
                if new_paragraph:
                    if (
                        first_on_page
                        and current.open_at_page_end
                        and current.last_page == pi - 1
                        and _continues(current.paragraphs[-1][1][-1], line)
                    ):
                        current.paragraphs[-1][1].append(line)
                    else:
                        current.paragraphs.append((pi + 1, [line]))
                    new_paragraph = False
                else:
                    current.paragraphs[-1][1].append(line)
                current.last_page = pi
                current.open_at_page_end = bi == last_kept
                first_on_page = False
    return sections


def _build_extraction(
    tree: TocTree, pages: Sequence[_Page], entries: Sequence[OutlineEntry]
) -> Extraction:
    starts = locate_starts(pages, tree.nodes, entries)
    sections = assemble(pages, starts)
    warnings = list(tree.warnings)
    nodes: list[TocNode] = []
    leaves: list[Leaf] = []
    paragraphs: list[Paragraph] = []
    for node, start, section in zip(tree.nodes, starts, sections, strict=True):
        y = start.y if start is not None else None
        if node.page is None and start is not None:
            node = replace(node, page=start.pos[0] + 1)
            warnings.append(
                f"entry {node.node_id} {node.title!r}: placed on page {node.page}, "
                "where its heading was found"
            )
        paras = section.texts() if section is not None else []
        text = "\n\n".join(t for _, t in paras)
        if not node.is_leaf:
            nodes.append(replace(node, y=y, text=text))
            continue
        nodes.append(replace(node, y=y, text=""))
        if node.page is not None and not paras:
            warnings.append(f"leaf {node.node_id} {node.title!r} has no text")
        for n, (page, para) in enumerate(paras, 1):
            paragraphs.append(Paragraph(f"{node.node_id}#p{n}", node.node_id, para, page))
        page_end = node.page
        if section is not None and section.last_page is not None:
            page_end = max(section.last_page + 1, node.page or 0)
        leaves.append(
            Leaf(
                leaf_id=node.node_id,
                book_id=node.book_id,
                path=node.path,
                title=node.title,
                text=text,
                page_start=node.page,
                page_end=page_end,
            )
        )
    toc = replace(tree.with_nodes(nodes), warnings=tuple(warnings))
    return Extraction(tree.book_id, toc, tuple(leaves), tuple(paragraphs))


def extract_doc(
    doc: pymupdf.Document,
    path: str | Path,
    *,
    book_id: str | None = None,
    infer_toc: InferMode = False,
) -> Extraction:
    """:func:`extract_book` for an already opened document."""
    from searchtome.ingest.toc import toc_from_doc

    tree, entries = toc_from_doc(doc, path, book_id=book_id, infer=infer_toc)
    pages = read_pages(doc, path)
    dropped = mark_furniture(pages)
    log.info("%s: %d header/footer/page-number blocks dropped", path, dropped)
    return _build_extraction(tree, pages, entries)


def extract_book(
    path: str | Path,
    *,
    book_id: str | None = None,
    password: str | None = None,
    infer_toc: InferMode = False,
) -> Extraction:
    """ToC, leaf texts and paragraphs of the PDF at ``path`` (deterministic)."""
    from searchtome.ingest.pdf import opened

    with opened(path, password=password) as doc:
        return extract_doc(doc, path, book_id=book_id, infer_toc=infer_toc)


# --------------------------------------------------------------------------------------------
# On disk


def write_extraction(extraction: Extraction, out_dir: str | Path) -> None:
    """Write the four files so that a reader sees the old set, the new set, or no set.

    Everything is written into a temporary sibling folder first. A fresh ``out_dir`` is then
    renamed into place in one step; an existing one loses its ``meta.json`` first, gets the
    new data files, and gets the new ``meta.json`` (which pins the others by SHA-256) last, so
    an interruption leaves a folder that :func:`read_extraction` rejects, never a mixed one.
    Other files in ``out_dir`` are left alone.
    """
    import shutil

    import pymupdf

    from searchtome.io import atomic_dir, sha256_file, write_json, write_jsonl
    from searchtome.version import __version__

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SearchTomeError(f"{out}: exists and is not a folder; choose another --out")
    rows = {
        TOC_FILE: [n.to_dict() for n in extraction.toc.nodes],
        LEAVES_FILE: [leaf.to_dict() for leaf in extraction.leaves],
        PARAGRAPHS_FILE: [p.to_dict() for p in extraction.paragraphs],
    }
    tmp = atomic_dir(out)
    try:
        files = {}
        for name, data in rows.items():
            write_jsonl(tmp / name, data)
            files[name] = sha256_file(tmp / name)
        write_json(
            tmp / META_FILE,
            {
                "format": FORMAT,
                "book_id": extraction.book_id,
                "source": extraction.toc.source,
                "n_pages": extraction.toc.n_pages,
                "warnings": list(extraction.toc.warnings),
                "counts": {
                    "nodes": len(extraction.toc.nodes),
                    "leaves": len(extraction.leaves),
                    "paragraphs": len(extraction.paragraphs),
                },
                "files": files,
                "versions": {"searchtome": __version__, "pymupdf": pymupdf.VersionBind},
            },
        )
        if not out.exists():
            os.replace(tmp, out)
            return
        (out / META_FILE).unlink(missing_ok=True)
        for name in (*rows, META_FILE):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_extraction(out_dir: str | Path) -> Extraction:
    """Read what :func:`write_extraction` wrote; a mixed or damaged set is an error."""
    from searchtome.io import read_json, read_jsonl, sha256_file

    out = Path(out_dir)
    meta_path = out / META_FILE
    if not meta_path.exists():
        raise SearchTomeError(
            f"{out}: no {META_FILE}, so not a complete extraction; run `searchtome extract` again"
        )
    meta = read_json(meta_path)
    if meta.get("format") != FORMAT:
        raise SearchTomeError(f"{meta_path}: unknown format {meta.get('format')!r}")
    for name, digest in meta["files"].items():
        if not (out / name).exists() or sha256_file(out / name) != digest:
            raise SearchTomeError(
                f"{out / name}: missing or changed since {META_FILE} was written; "
                "run `searchtome extract` again"
            )
    nodes = tuple(TocNode.from_dict(r) for r in read_jsonl(out / TOC_FILE))
    tree = TocTree(
        meta["book_id"], meta["source"], int(meta["n_pages"]), nodes, tuple(meta["warnings"])
    )
    leaves = tuple(Leaf.from_dict(r) for r in read_jsonl(out / LEAVES_FILE))
    paragraphs = tuple(Paragraph.from_dict(r) for r in read_jsonl(out / PARAGRAPHS_FILE))
    return Extraction(meta["book_id"], tree, leaves, paragraphs)


# --------------------------------------------------------------------------------------------
# CLI


def _extract_command(args: argparse.Namespace) -> int:
    from searchtome.ingest.toc import infer_mode

    extraction = extract_book(
        args.pdf, book_id=args.book_id, password=args.password, infer_toc=infer_mode(args)
    )
    write_extraction(extraction, args.out)
    n_chars = sum(len(leaf.text) for leaf in extraction.leaves)
    print(
        f"{extraction.book_id}: {len(extraction.toc.nodes)} ToC nodes "
        f"({extraction.toc.source}), {len(extraction.leaves)} leaves, "
        f"{len(extraction.paragraphs)} paragraphs, {n_chars:,} characters -> {args.out}"
    )
    warnings = extraction.toc.warnings
    for w in warnings[:10]:
        print(f"warning: {w}", file=sys.stderr)
    if len(warnings) > 10:
        print(
            f"warning: ... and {len(warnings) - 10} more, listed in {Path(args.out) / META_FILE}",
            file=sys.stderr,
        )
    return 0


def register(subparsers: Any) -> None:
    from searchtome.ingest.toc import add_source_arguments

    parser = subparsers.add_parser(
        "extract",
        help="extract the text of every ToC leaf and its paragraphs",
        description="Split a PDF into its ToC sections: each starts at its heading's position "
        "on the page and ends where the next ToC entry starts. Writes toc.jsonl, leaves.jsonl, "
        "paragraphs.jsonl and meta.json to --out.",
    )
    add_source_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    parser.set_defaults(func=_extract_command)
