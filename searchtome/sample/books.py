"""The sample corpus: short books written for the project, rendered to PDF at run time.

No real textbook may ship inside the repository, so the demo and the tests use three primers of our
own (Medicine, Finance, Law; CC BY 4.0), kept as structured source text in
``searchtome/data/sample/``: ``catalog.toml`` (the entries, in the ordinary catalog format) and one
``<book_id>.md`` per book. The source format is a strict subset of Markdown:

* ``#``, ``##``, ``###`` headings are the ToC levels (at most three, no level skipped);
* a heading without sub-headings is a leaf and must have at least one paragraph;
* paragraphs are separated by blank lines (lines inside a paragraph are joined with a space);
  text under a heading that has sub-headings is that node's own introduction.

:func:`render_sample` turns each book into a PDF with a real outline through
:mod:`searchtome.sample.render`, and skips books whose PDF is already there for the same content hash.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, read_json, sha256_text, stable_hash, write_json
from searchtome.records import Book, Catalog, node_id

log = logging.getLogger(__name__)

MAX_LEVEL = 3
_HEADING_RE = re.compile(r"^(#+)(\s.*)?$")


def sample_dir() -> Path:
    """The packaged folder holding the sample corpus sources."""
    return Path(str(resources.files("searchtome") / "data" / "sample"))


def sample_catalog() -> Catalog:
    """The sample corpus as a catalog (validated like any user catalog)."""
    from searchtome.ingest.catalog import load_catalog

    return load_catalog(sample_dir() / "catalog.toml")


@dataclass(frozen=True)
class SampleSection:
    """One heading of a sample book with its own paragraphs and its sub-headings."""

    title: str
    level: int
    paragraphs: tuple[str, ...]
    children: tuple[SampleSection, ...] = ()
    line: int = 0  # line of the heading in the source file

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class SampleLeaf:
    """What extraction should recover for one leaf: its id, path and exact text."""

    leaf_id: str
    path: tuple[str, ...]
    title: str
    text: str


@dataclass(frozen=True)
class SampleBook:
    """A parsed sample book: its catalog entry and its heading tree."""

    book: Book
    sections: tuple[SampleSection, ...]
    source: Path
    source_sha256: str

    @property
    def book_id(self) -> str:
        return self.book.book_id

    def walk(self) -> Iterator[tuple[tuple[int, ...], tuple[str, ...], SampleSection]]:
        """Every section in document order with its ordinal and title path."""

        def visit(nodes, ordinal, path):
            for i, node in enumerate(nodes, 1):
                here, names = (*ordinal, i), (*path, node.title)
                yield here, names, node
                yield from visit(node.children, here, names)

        yield from visit(self.sections, (), ())

    def leaves(self) -> list[SampleLeaf]:
        return [
            SampleLeaf(node_id(self.book_id, ordinal), path, node.title, node.text)
            for ordinal, path, node in self.walk()
            if node.is_leaf
        ]

    def depth(self) -> int:
        return max(len(ordinal) for ordinal, _, _ in self.walk())

    def content_hash(self) -> str:
        """Changes whenever the rendered PDF could change: source text or catalog entry."""
        return stable_hash({"source": self.source_sha256, "book": self.book.to_dict()})


def parse_book(text: str, source: PathLike = "<text>") -> tuple[SampleSection, ...]:
    """Parse the source text of one sample book into its heading tree (strictly)."""
    source = str(source)

    def fail(lineno: int, message: str) -> SearchTomeError:
        return SearchTomeError(f"{source}:{lineno}: {message}")

    # Flat list of (level, title, line, paragraphs) first, then nest.
    flat: list[tuple[int, str, int, list[str]]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            flat[-1][3].append(" ".join(para))
            para.clear()

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        match = _HEADING_RE.match(line)
        if match:
            flush()
            level = len(match.group(1))
            title = (match.group(2) or "").strip().rstrip("#").strip()
            if level > MAX_LEVEL:
                raise fail(lineno, f"heading level {level}; sample books have at most {MAX_LEVEL}")
            if not title:
                raise fail(lineno, "empty heading")
            previous = flat[-1][0] if flat else 0
            if level > previous + 1:
                raise fail(lineno, f"level-{level} heading {title!r} skips a level")
            flat.append((level, title, lineno, []))
        elif not line:
            if flat:
                flush()
        else:
            if not flat:
                raise fail(lineno, "text before the first heading")
            para.append(line)
    if flat:
        flush()
    if not flat:
        raise SearchTomeError(
            f"{source}: no headings; a sample book needs at least one '# ' heading"
        )

    def nest(start: int, level: int) -> tuple[list[SampleSection], int]:
        out: list[SampleSection] = []
        i = start
        while i < len(flat) and flat[i][0] == level:
            _, title, lineno, paragraphs = flat[i]
            children, i = nest(i + 1, level + 1)
            if not children and not paragraphs:
                raise fail(lineno, f"leaf {title!r} has no text")
            out.append(SampleSection(title, level, tuple(paragraphs), tuple(children), lineno))
        return out, i

    sections, _ = nest(0, 1)
    return tuple(sections)


def load_sample_books() -> list[SampleBook]:
    """Parse every book of the sample catalog from its source file, in catalog order."""
    books = []
    folder = sample_dir()
    for book in sample_catalog().books:
        path = folder / f"{book.book_id}.md"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SearchTomeError(
                f"{path}: source of sample book {book.book_id!r} is missing; reinstall searchtome"
            ) from None
        sections = parse_book(text, path)
        books.append(SampleBook(book, sections, path, sha256_text(text)))
    return books


# ---------------------------------------------------------------------------------------------
# Rendering


def render_spec(sample: SampleBook) -> Any:
    """The :class:`searchtome.sample.render.BookSpec` of a sample book.

    Chapters print as "Chapter N Title" and sections as "N.M Title" while the outline keeps the
    bare titles, as many real books do; a title page precedes the first chapter.
    """
    from searchtome.sample import render

    def convert(section: SampleSection, ordinal: tuple[int, ...]) -> Any:
        if len(ordinal) == 1:
            label = f"Chapter {ordinal[0]}"
        elif len(ordinal) == 2:
            label = f"{ordinal[0]}.{ordinal[1]}"
        else:
            label = ""
        return render.Section(
            section.title,
            text=section.paragraphs,
            children=tuple(convert(c, (*ordinal, i)) for i, c in enumerate(section.children, 1)),
            label=label,
        )

    book = sample.book
    title_page = (
        f"{book.title}. {book.edition}, by {', '.join(book.authors) or book.publisher}. "
        f"Licensed under {book.license}. Written for the SearchTome sample corpus; "
        "an educational text, not professional advice."
    )
    return render.BookSpec(
        title=book.title,
        sections=tuple(convert(s, (i,)) for i, s in enumerate(sample.sections, 1)),
        author=", ".join(book.authors),
        front_matter=(title_page,),
    )


def _render_key(sample: SampleBook) -> str:
    """Everything the PDF bytes depend on: content, renderer code, PyMuPDF version."""
    import pymupdf

    from searchtome.sample import render

    renderer = Path(render.__file__).read_bytes()
    return stable_hash(
        {
            "content": sample.content_hash(),
            "renderer": hashlib.sha256(renderer).hexdigest(),
            "pymupdf": pymupdf.VersionBind,
        }
    )


def render_sample(out_dir: PathLike, book_ids: list[str] | None = None) -> dict[str, Path]:
    """Render the sample books to ``out_dir/<book_id>.pdf``; unchanged books are not redone.

    A ``<book_id>.pdf.json`` stamp next to each PDF records the hash of everything the PDF
    depends on (source text, catalog entry, renderer version) and the PDF's own SHA-256; a PDF
    is re-rendered when either no longer matches.
    """
    from searchtome.io import sha256_file
    from searchtome.sample import render

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    books = load_sample_books()
    if book_ids is not None:
        known = {b.book_id: b for b in books}
        from searchtome.errors import unknown_name

        for book_id in book_ids:
            if book_id not in known:
                raise unknown_name("sample book", book_id, known)
        books = [known[b] for b in book_ids]
    paths: dict[str, Path] = {}
    for sample in books:
        pdf = out / f"{sample.book_id}.pdf"
        stamp = out / f"{sample.book_id}.pdf.json"
        key = _render_key(sample)
        if pdf.exists() and stamp.exists():
            try:
                recorded = read_json(stamp)
            except SearchTomeError:
                recorded = {}
            if recorded.get("key") == key and recorded.get("sha256") == sha256_file(pdf):
                log.info("sample %s: up to date (%s)", sample.book_id, pdf)
                paths[sample.book_id] = pdf
                continue
        log.info("sample %s: rendering %s", sample.book_id, pdf)
        render.render_book(render_spec(sample), pdf)
        write_json(stamp, {"key": key, "sha256": sha256_file(pdf), "book_id": sample.book_id})
        paths[sample.book_id] = pdf
    return paths
