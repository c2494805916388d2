"""Render a structured book to a PDF with a real outline, and know exactly what is in it.

Used for the sample corpus of the demo and for tests that need PDFs whose section texts are
known: :func:`render_book` lays out chapters, sections and leaves with PyMuPDF (headings land
mid-page wherever the text flow puts them, long sections run over several pages, short ones
share a page), adds running headers and page numbers, writes an outline whose destinations
point at each heading, and returns a :class:`RenderedBook` holding every section's exact text.

Example::

    from searchtome.sample.render import BookSpec, Section, render_book

    spec = BookSpec(
        title="Tiny Botany",
        sections=(
            Section("Roots", text=("Roots anchor the plant.",), children=(
                Section("Root hairs", text=("Root hairs take up water.", "They are short-lived.")),
                Section("Tap roots", text=("A tap root grows straight down.",)),
            )),
        ),
    )
    book = render_book(spec, "tiny.pdf")
    book.leaf("1.1").text   # "Root hairs take up water.\\n\\nThey are short-lived."

Edge-case files for tests are derived from a rendered PDF with :func:`encrypt`,
:func:`remove_outline` and :func:`break_outline_entry`.

Text is set in the PDF base-14 Helvetica fonts, which PyMuPDF encodes as Latin-1, so page
text must be Latin-1 (no typographic quotes or dashes); outline titles may hold any Unicode.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pymupdf

BODY_FONT, BOLD_FONT = "helv", "hebo"
_HEADING_SIZES = {1: 17.0, 2: 13.5, 3: 11.5}


@dataclass(frozen=True)
class Section:
    """One ToC entry: its title, its own text (paragraphs), its children.

    A section without children is a leaf and ``text`` is its body; a section with children
    keeps ``text`` as the introduction printed between its heading and its first child.
    """

    title: str
    text: tuple[str, ...] = ()
    children: tuple[Section, ...] = ()
    # Printed before the title on the page only ("2.1", "Chapter 2"); the outline shows the
    # bare title, as texinfo and LaTeX books often do.
    label: str = ""
    # What the outline says, when it should differ from the printed heading (quirk tests).
    outline_title: str | None = None
    new_page: bool = False


@dataclass(frozen=True)
class BookSpec:
    """A whole book; chapters are the top-level sections."""

    title: str
    sections: tuple[Section, ...]
    author: str = ""
    page_size: tuple[float, float] = (612.0, 792.0)  # US Letter, in points
    margin: float = 72.0
    font_size: float = 10.5
    running_header: bool = True  # book title on even pages, chapter title on odd ones
    page_numbers: bool = True
    chapters_on_new_page: bool = True
    outline: bool = True
    # Point outline entries at named destinations (as LaTeX and texinfo do) instead of
    # explicit page/position arrays.
    named_destinations: bool = False
    # Pages of text before the first chapter (a title page and a preface-like blurb).
    front_matter: tuple[str, ...] = ()


@dataclass(frozen=True)
class RenderedSection:
    """Where a section landed and exactly what it says."""

    ordinal: tuple[int, ...]
    path: tuple[str, ...]
    outline_title: str
    is_leaf: bool
    page: int  # 1-based page of the heading
    y: float  # top of the heading, in points from the top of the page
    page_end: int
    paragraphs: tuple[str, ...]
    # (paragraph index, last line before, first line after) for each page break inside one.
    page_breaks: tuple[tuple[int, str, str], ...] = ()

    @property
    def key(self) -> str:
        """The ordinal path as in node ids: ``"2.1.3"``."""
        return ".".join(map(str, self.ordinal))

    @property
    def level(self) -> int:
        return len(self.ordinal)

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class RenderedBook:
    path: Path
    n_pages: int
    sections: tuple[RenderedSection, ...]  # document order
    running_heads: tuple[str, ...] = ()  # every header/footer string printed

    def leaves(self) -> list[RenderedSection]:
        return [s for s in self.sections if s.is_leaf]

    def section(self, key: str) -> RenderedSection:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)

    leaf = section

    def toc(self) -> list[list[object]]:
        """``[level, outline title, page]`` rows, as ``get_toc()`` reports them."""
        return [[s.level, s.outline_title, s.page] for s in self.sections]


# --------------------------------------------------------------------------------------------
# Layout


@functools.lru_cache(maxsize=65536)
def _width(text: str, font: str, size: float) -> float:
    import pymupdf

    return pymupdf.get_text_length(text, font, size)


@dataclass
class _Layout:
    spec: BookSpec
    doc: pymupdf.Document
    page: pymupdf.Page | None = None
    y: float = 0.0  # baseline of the last line set on the page
    chapter: str = ""
    heads: set[str] = field(default_factory=set)

    @property
    def width(self) -> float:
        return self.spec.page_size[0] - 2 * self.spec.margin

    @property
    def bottom(self) -> float:
        return self.spec.page_size[1] - self.spec.margin

    @property
    def leading(self) -> float:
        return self.spec.font_size * 1.45

    def new_page(self) -> None:
        import pymupdf

        w, h = self.spec.page_size
        self.page = self.doc.new_page(width=w, height=h)
        self.y = self.spec.margin
        number = self.page.number + 1
        if self.spec.running_header and number > 1:
            head = self.spec.title if number % 2 == 0 or not self.chapter else self.chapter
            x = (
                self.spec.margin
                if number % 2 == 0
                else w - self.spec.margin - (pymupdf.get_text_length(head, BODY_FONT, 8))
            )
            self.page.insert_text(
                (x, self.spec.margin / 2 + 8), head, fontname=BODY_FONT, fontsize=8
            )
            self.heads.add(head)
        if self.spec.page_numbers:
            label = str(number)
            x = (w - pymupdf.get_text_length(label, BODY_FONT, 9)) / 2
            self.page.insert_text(
                (x, h - self.spec.margin / 2), label, fontname=BODY_FONT, fontsize=9
            )
            self.heads.add(label)

    def fits(self, height: float) -> bool:
        return self.page is not None and self.y + height <= self.bottom

    def wrap(self, text: str, font: str, size: float) -> list[str]:
        """Greedy line breaking at spaces (no hyphenation, so the text stays exact)."""
        space = _width(" ", font, size)
        lines: list[list[str]] = []
        used = 0.0
        for word in text.split():
            width = _width(word, font, size)
            if width > self.width:
                raise ValueError(f"word {word[:30]!r} is wider than the text column")
            if lines and used + space + width <= self.width:
                lines[-1].append(word)
                used += space + width
            else:
                lines.append([word])
                used = width
        return [" ".join(words) for words in lines]

    def heading(self, text: str, level: int) -> tuple[int, float]:
        """Set a heading (kept with two body lines); return its page and top y."""
        size = _HEADING_SIZES.get(level, self.spec.font_size + 1)
        lines = self.wrap(text, BOLD_FONT, size)
        step = size * 1.3
        before = 0.0 if self.page is None or self.y <= self.spec.margin else size * 1.1
        needed = before + step * len(lines) + size * 0.5 + 2 * self.leading
        if not self.fits(needed):
            self.new_page()
            before = 0.0
        self.y += before
        top = self.y + (step - size)
        for line in lines:
            self.y += step
            self.page.insert_text(
                (self.spec.margin, self.y), line, fontname=BOLD_FONT, fontsize=size
            )
        self.y += size * 0.5
        return self.page.number + 1, round(top, 2)

    def paragraph(self, text: str) -> tuple[int, list[tuple[str, str]]]:
        """Set a paragraph, breaking pages as needed: its last page, and where it broke."""
        breaks: list[tuple[str, str]] = []
        previous = ""
        for line in self.wrap(text, BODY_FONT, self.spec.font_size):
            if not self.fits(self.leading):
                self.new_page()
                if previous:
                    breaks.append((previous, line))
            previous = line
            self.y += self.leading
            self.page.insert_text(
                (self.spec.margin, self.y), line, fontname=BODY_FONT, fontsize=self.spec.font_size
            )
        self.y += self.spec.font_size * 0.8  # paragraph gap: MuPDF splits blocks here
        return self.page.number + 1, breaks


def _walk(
    sections: Sequence[Section], prefix: tuple[int, ...] = (), path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[int, ...], tuple[str, ...], Section]]:
    for i, section in enumerate(sections, 1):
        ordinal = (*prefix, i)
        here = (*path, section.title)
        yield ordinal, here, section
        yield from _walk(section.children, ordinal, here)


def _check_text(spec: BookSpec) -> None:
    pieces = [spec.title, *spec.front_matter]
    for _, _, s in _walk(spec.sections):
        pieces += [s.title, s.label, *s.text]
    for piece in pieces:
        try:
            piece.encode("latin-1")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{piece[:40]!r}: character {piece[exc.start]!r} cannot be set in the base-14 "
                "fonts; keep page text to Latin-1 (outline titles may hold any Unicode)"
            ) from None


def render_book(spec: BookSpec, path: str | Path) -> RenderedBook:
    """Lay ``spec`` out as a PDF at ``path`` (overwritten) and return what went where."""
    import pymupdf

    from searchtome.io import atomic_write

    if not spec.sections:
        raise ValueError("a book needs at least one section")
    _check_text(spec)
    doc = pymupdf.open()
    layout = _Layout(spec, doc)
    for blurb in spec.front_matter:
        layout.new_page()
        layout.paragraph(blurb)
    placed: list[dict[str, object]] = []
    for ordinal, path_titles, section in _walk(spec.sections):
        level = len(ordinal)
        if level == 1:
            layout.chapter = section.title
        if (
            layout.page is None
            or section.new_page
            or (level == 1 and spec.chapters_on_new_page and (placed or spec.front_matter))
        ):
            layout.new_page()
        printed = f"{section.label} {section.title}" if section.label else section.title
        page, top = layout.heading(printed, level)
        end = page
        breaks = []
        for i, para in enumerate(section.text):
            end, cut = layout.paragraph(para)
            breaks += [(i, before, after) for before, after in cut]
        placed.append(
            {
                "ordinal": ordinal,
                "path": path_titles,
                "outline_title": section.outline_title
                if section.outline_title is not None
                else section.title,
                "is_leaf": not section.children,
                "page": page,
                "y": top,
                "page_end": end,
                "paragraphs": tuple(section.text),
                "page_breaks": tuple(breaks),
            }
        )
    # A section's text ends where the next heading starts; record the last page it used.
    sections = tuple(RenderedSection(**p) for p in placed)  # type: ignore[arg-type]
    if spec.outline:
        toc = [
            [
                s.level,
                s.outline_title,
                s.page,
                {
                    "kind": pymupdf.LINK_GOTO,
                    "page": s.page - 1,
                    "to": pymupdf.Point(spec.margin, max(s.y - 4, 0)),
                    "zoom": 0,
                },
            ]
            for s in sections
        ]
        doc.set_toc(toc)
        if spec.named_destinations:
            _use_named_destinations(doc, sections, spec)
    doc.set_metadata(
        {
            "title": spec.title,
            "author": spec.author,
            "producer": "searchtome.sample.render",
            "creator": "searchtome.sample.render",
            "creationDate": "",
            "modDate": "",
        }
    )
    target = Path(path)
    data = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    with atomic_write(target, "wb") as fh:
        fh.write(data)
    return RenderedBook(target, doc.page_count, sections, tuple(sorted(layout.heads)))


def _outline_items(doc: pymupdf.Document) -> list[int]:
    """Outline item xrefs in document order."""
    return [item[3]["xref"] for item in doc.get_toc(simple=False)]


def _use_named_destinations(
    doc: pymupdf.Document, sections: Sequence[RenderedSection], spec: BookSpec
) -> None:
    """Point every outline item at a named destination, as LaTeX and texinfo output does."""
    height = spec.page_size[1]
    names = []
    for xref, s in zip(_outline_items(doc), sections, strict=True):
        name = f"section.{s.key}"
        page_xref = doc.page_xref(s.page - 1)
        # Named destinations hold raw PDF coordinates (origin at the bottom left).
        names.append(
            (name, f"[{page_xref} 0 R /XYZ {spec.margin:g} {height - max(s.y - 4, 0):.2f} 0]")
        )
        doc.xref_set_key(xref, "A", f"<</S/GoTo/D({name})>>")
    names.sort(key=lambda item: item[0].encode())
    tree = doc.get_new_xref()
    body = " ".join(f"({n}) {d}" for n, d in names)
    doc.update_object(tree, f"<</Names[{body}]>>")
    doc.xref_set_key(doc.pdf_catalog(), "Names", f"<</Dests {tree} 0 R>>")


# --------------------------------------------------------------------------------------------
# Edge cases for tests


def encrypt(
    src: str | Path,
    dst: str | Path,
    *,
    user_password: str | None = None,
    owner_password: str = "owner-secret",
) -> Path:
    """AES-256 copy of ``src``: needs ``user_password`` to open, or opens freely (owner-only)."""
    import pymupdf

    with pymupdf.open(src) as doc:
        doc.save(
            dst,
            encryption=pymupdf.PDF_ENCRYPT_AES_256,
            owner_pw=owner_password,
            user_pw=user_password or "",
            permissions=pymupdf.PDF_PERM_ACCESSIBILITY,  # owner-only: copying, printing off
        )
    return Path(dst)


def remove_outline(src: str | Path, dst: str | Path) -> Path:
    import pymupdf

    with pymupdf.open(src) as doc:
        doc.set_toc([])
        doc.save(dst, garbage=3)
    return Path(dst)


Breakage = Literal["beyond", "nowhere", "title"]


def break_outline_entry(
    src: str | Path, dst: str | Path, entry: int, how: Breakage, *, title: str = ""
) -> Path:
    """Copy ``src`` with outline entry ``entry`` (0-based, document order) damaged.

    * ``"beyond"``: its destination is a page index past the end of the document. PyMuPDF then
      returns an empty ToC for the whole file, without an error.
    * ``"nowhere"``: it names a destination that does not exist (``get_toc`` page -1 or 0).
    * ``"title"``: its title becomes ``title`` verbatim (empty, stray whitespace...).
    """
    import pymupdf

    with pymupdf.open(src) as doc:
        xref = _outline_items(doc)[entry]
        if how in ("beyond", "nowhere"):
            source = doc.xref_object(xref, compressed=True)
            source = re.sub(r"/A\s*<<.*?>>", "", source, flags=re.S)
            source = re.sub(r"/Dest\s*(\[[^\]]*\]|\([^)]*\)|/\S+)", "", source)
            if how == "beyond":
                dest = f"/Dest[{doc.page_count + 5} /XYZ 0 0 0]"
            else:
                dest = "/A<</S/GoTo/D(no-such-destination)>>"
            doc.update_object(xref, source.replace("<<", f"<<{dest}", 1))
        elif how == "title":
            doc.xref_set_key(xref, "Title", pymupdf.get_pdf_str(title))
        else:
            raise ValueError(f"unknown breakage {how!r}")
        doc.save(dst, garbage=0)
    return Path(dst)


_WORDS = (
    "river", "stone", "lantern", "harbor", "meadow", "signal", "copper", "violet", "summit",
    "orchard", "glacier", "canyon", "ember", "thistle", "compass", "anchor", "beacon", "cinder",
    "delta", "falcon", "garnet", "hollow", "island", "jasper", "kernel", "ledger", "marble",
    "nectar", "oyster", "pepper", "quarry", "raven", "saddle", "timber", "umbra", "velvet",
    "willow", "yonder", "zephyr", "amber", "birch", "cobalt", "dune",
)  # fmt: skip


def sample_spec(title: str = "Sample Book", chapters: int = 3, seed: int = 0) -> BookSpec:
    """A deterministic small book (2-3 levels, short and multi-page leaves) for tests."""
    import random

    rng = random.Random(seed)
    words = _WORDS

    def sentence() -> str:
        n = rng.randint(7, 16)
        ws = [rng.choice(words) for _ in range(n)]
        return " ".join(ws).capitalize() + rng.choice([".", ".", ".", ";", ","])

    def paragraph(sentences: int) -> str:
        text = " ".join(sentence() for _ in range(sentences))
        return text[:-1] + "." if not text.endswith(".") else text

    chapters_out = []
    for c in range(1, chapters + 1):
        sections = []
        for s in range(1, rng.randint(2, 3) + 1):
            size = rng.choice([1, 2, 6, 14])  # some share a page, some run over several
            leaves = tuple(
                Section(
                    f"Topic {c}.{s}.{leaf} {rng.choice(words).title()}",
                    text=tuple(paragraph(rng.randint(2, 5)) for _ in range(size)),
                )
                for leaf in range(1, rng.randint(1, 3) + 1)
            )
            if len(leaves) == 1:
                sections.append(Section(f"Section {c}.{s}", text=leaves[0].text, label=f"{c}.{s}"))
            else:
                sections.append(
                    Section(
                        f"Section {c}.{s}", text=(paragraph(2),), children=leaves, label=f"{c}.{s}"
                    )
                )
        chapters_out.append(
            Section(
                f"Chapter {c} {rng.choice(words).title()}",
                text=(paragraph(3),),
                children=tuple(sections),
            )
        )
    return BookSpec(title=title, sections=tuple(chapters_out), author="searchtome tests")
