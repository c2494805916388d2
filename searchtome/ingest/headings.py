"""Where each ToC entry starts on its page: the heading that spells its title.

Each entry starts at its heading: the line(s) on its page that spell the title (optionally
after a number such as "4.2" or "Chapter 4"), nearest to the outline destination's point;
failing that, the first line at or below the destination point; failing that, the top of the
page. The heading lines themselves are not section text. Entries that point nowhere are placed
when their title occurs exactly once between their neighbours' headings.

:func:`norm` and :func:`strip_label` are also how ToC inference compares titles.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from searchtome.ingest.layout import Block, Page
from searchtome.ingest.outline import OutlineEntry
from searchtome.records import TocNode

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


def strip_label(text: str) -> str:
    """``"4.2 Breakpoints"`` → ``"Breakpoints"``; ``"Chapter 4"`` → ``""``."""
    return text[_LABEL_RE.match(text).end() :]  # type: ignore[union-attr]


class Position(NamedTuple):
    """A point in reading order: page index (0-based), block index, line index."""

    page: int
    block: int
    line: int


@dataclass(frozen=True)
class Start:
    """Where a ToC entry's section starts, and how that place was found."""

    pos: Position
    heading: tuple[Position, ...]  # the heading's own lines, left out of the section text
    y: float | None
    how: str  # "heading", "run-in", "destination" or "page"


def _title_variants(title: str) -> list[str]:
    variants = [norm(title)]
    bare = norm(strip_label(title))
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


def _block_norms(block: Block) -> list[tuple[str, str]]:
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
    page: Page, title: str, variants: Sequence[str], after: Position | None, page_index: int
) -> list[_Match]:
    """Places on ``page`` whose whole line(s) spell the title, or whose line starts with it."""
    # Only blocks holding the title's first word can start a heading; this spares normalising
    # every line of every page that has a ToC entry.
    word = _WORD_RE.search(strip_label(title).casefold())
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


def _line_at(page: Page, page_index: int, x: float | None, y: float) -> Position:
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
    pages: Sequence[Page], nodes: Sequence[TocNode], entries: Sequence[OutlineEntry]
) -> list[Start | None]:
    """Each node's start position (``None`` for nodes that point nowhere)."""
    starts: list[Start | None] = []
    previous: Start | None = None
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
            start = Start(chosen.pos, heading, round(chosen.y, 2), how)
        elif dest_y is not None:
            start = Start(_line_at(page, pi, entry.x, dest_y), (), dest_y, "destination")
        else:
            start = Start(Position(pi, 0, 0), (), None, "page")
        starts.append(start)
        previous = start
    _recover_dangling(pages, nodes, starts)
    return starts


def _recover_dangling(
    pages: Sequence[Page], nodes: Sequence[TocNode], starts: list[Start | None]
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
            starts[i] = Start(m.pos, m.lines, round(m.y, 2), "recovered")
