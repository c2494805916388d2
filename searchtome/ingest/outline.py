"""Reading a PDF's outline (bookmarks) as flat, levelled entries, with every repair reported.

The outline is MuPDF's resolved outline tree (``Document.outline``). Entries that point nowhere
(an undefined named destination, a link out of the book) are kept with ``page=None`` and a
warning. One PyMuPDF behaviour needs care: when a single outline entry points to a page index
beyond the document, ``get_toc()`` returns an empty list for the whole document, without an
error. An empty result for a file whose catalog has a non-empty ``/Outlines`` is therefore never
taken as "no ToC": the outline is read again with pypdf, entry by entry.

:mod:`searchtome.ingest.toc` turns the entries, read here or inferred from the page layout
(:mod:`searchtome.ingest.infer_toc`), into a tree.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchtome.errors import SearchTomeError
from searchtome.titles import clean_title

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutlineEntry:
    """One outline entry as read, before it becomes a node: level, title, where it points."""

    level: int
    title: str
    page: int | None  # 1-based, None when it points nowhere in this document
    x: float | None = None  # destination point in top-left page coordinates, when given
    y: float | None = None


def has_outline(doc: pymupdf.Document) -> bool:
    """Whether the catalog holds a non-empty ``/Outlines`` tree, whatever get_toc says."""
    try:
        kind, value = doc.xref_get_key(doc.pdf_catalog(), "Outlines")
        if kind != "xref":
            return False
        outlines = int(value.split()[0])
        return doc.xref_get_key(outlines, "First")[0] == "xref"
    except Exception:  # not a PDF catalog we can inspect
        return False


def _valid_y(y: float | None, height: float | None) -> float | None:
    if y is None or math.isnan(y) or y < -1.0 or (height is not None and y > height + 1.0):
        return None
    return max(y, 0.0) if height is None else min(max(y, 0.0), height)


def _walk_outline(doc: pymupdf.Document, path: Path, warns: list[str]) -> list[OutlineEntry]:
    """MuPDF's outline tree, depth first.

    ``Document.outline`` items carry the resolved page and the destination point already in
    top-left page coordinates, for named destinations too (``get_toc(simple=False)`` reports
    named ones in raw PDF coordinates, and resolves every entry again, 15x slower).
    """
    entries: list[OutlineEntry] = []
    n_pages = doc.page_count
    heights: dict[int, float] = {}
    stack = [(doc.outline, 1)]
    while stack:
        item, level = stack.pop()
        while item is not None:
            title = item.title or ""
            number = len(entries) + 1
            page: int | None = item.page + 1 if item.page is not None and item.page >= 0 else None
            x = y = None
            if item.is_external:
                warns.append(
                    f"entry {number} {clean_title(title)!r} links to {item.uri}, not into this book"
                )
                page = None
            elif page is None:
                uri = item.uri or ""
                detail = (
                    f"named destination {uri.split('=', 1)[1]!r} is not defined"
                    if uri.startswith("#nameddest=")
                    else "no destination"
                )
                warns.append(f"entry {number} {clean_title(title)!r} points nowhere ({detail})")
            elif page <= n_pages:
                if page not in heights:
                    heights[page] = doc.page_cropbox(page - 1).height
                x = _valid_y(getattr(item, "x", None), None)
                y = _valid_y(getattr(item, "y", None), heights[page])
            entries.append(OutlineEntry(level, title, page, x, y))
            if item.down is not None:
                # Children come before the next sibling: finish them first.
                stack.append((item.next, level))
                item, level = item.down, level + 1
                continue
            item = item.next
    return entries


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _outline_with_pypdf(doc: pymupdf.Document, path: Path) -> list[OutlineEntry]:
    """Read the outline entry by entry with pypdf (used when PyMuPDF returns nothing)."""
    import pymupdf
    import pypdf

    if doc.metadata and doc.metadata.get("encryption"):
        # pypdf would need the optional `cryptography` package for AES; MuPDF already
        # decrypted the file, so hand pypdf an unencrypted copy.
        data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_NONE)
    else:
        data = path.read_bytes()
    pypdf_log = logging.getLogger("pypdf")
    old_level = pypdf_log.level
    pypdf_log.setLevel(logging.ERROR)  # its "multiple definitions" chatter is not ours to show
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        entries: list[OutlineEntry] = []

        def walk(items: Sequence[Any], level: int) -> None:
            for item in items:
                if isinstance(item, list):
                    walk(item, level + 1)
                    continue
                index = reader.get_destination_page_number(item)
                page = index + 1 if index is not None and 0 <= index < doc.page_count else None
                x = y = None
                if page is not None:
                    pdf_page = doc[page - 1]
                    left, top = _number(item.left), _number(item.top)
                    if top is not None:
                        point = pymupdf.Point(left or 0.0, top) * pdf_page.transformation_matrix
                        x, y = float(point.x), _valid_y(float(point.y), pdf_page.rect.height)
                entries.append(OutlineEntry(level, str(item.title or ""), page, x, y))

        walk(reader.outline, 1)
        return entries
    except Exception as exc:
        raise SearchTomeError(
            f"{path}: has an outline that neither PyMuPDF nor pypdf can read ({exc}); "
            "use --infer-toc to infer the ToC from the page layout"
        ) from None
    finally:
        pypdf_log.setLevel(old_level)


def outline_entries(doc: pymupdf.Document, path: Path) -> tuple[list[OutlineEntry], list[str]]:
    """The outline as flat entries plus warnings; empty when the file has no outline at all."""
    warns: list[str] = []
    try:
        # ``doc.outline`` is a non-None wrapper even when there is no outline, so the catalog
        # decides whether there is one to walk.
        if has_outline(doc):
            entries = _walk_outline(doc, path, warns)
            if entries:
                return entries, warns
    except Exception as exc:  # MuPDF may fail on a broken outline tree
        log.warning("%s: PyMuPDF cannot read the outline (%s); trying pypdf", path, exc)
        warns = []
    if not has_outline(doc):
        return [], warns
    log.warning(
        "%s: PyMuPDF returns an empty ToC although the file has an outline; reading it with pypdf",
        path,
    )
    entries = _outline_with_pypdf(doc, path)
    if not entries:
        raise SearchTomeError(
            f"{path}: has an /Outlines entry but no readable outline items; "
            "use --infer-toc to infer the ToC from the page layout"
        )
    warns.append(
        "PyMuPDF returned an empty ToC although the file has an outline "
        "(an entry points outside the document); the outline was read with pypdf"
    )
    for i, entry in enumerate(entries):
        if entry.page is None:
            warns.append(f"entry {i + 1} {clean_title(entry.title)!r} points outside the document")
    return entries, warns
