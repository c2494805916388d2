"""Opening PDFs, with one clear error per way a file can be unusable.

PyMuPDF raises a generic ``FileDataError`` for most bad inputs and opens user-password files
without complaint (every later call then fails), so each case is checked here and turned into
a one-line :class:`~searchtome.errors.SearchTomeError` that names the file and says what to do.
Owner-password-only files ("permissions" encryption) open and read normally.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.errors import SearchTomeError

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

# MuPDF itself accepts a header anywhere in the first KiB (some producers prepend junk).
_HEADER_WINDOW = 1024


def _sniff(path: Path) -> None:
    """Reject what is plainly not a PDF before MuPDF turns it into a vague message."""
    if not path.exists():
        raise SearchTomeError(f"{path}: file not found; check the path")
    if path.is_dir():
        raise SearchTomeError(f"{path}: is a folder, not a PDF file; give the path of a .pdf file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEADER_WINDOW)
    except OSError as exc:
        raise SearchTomeError(
            f"{path}: cannot be read ({exc.strerror}); check permissions"
        ) from None
    if not head:
        raise SearchTomeError(f"{path}: empty file (0 bytes); download or copy it again")
    if b"%PDF-" not in head:
        lowered = head.lstrip().lower()
        if lowered.startswith((b"<!doctype html", b"<html")):
            what = "an HTML page (a failed download?)"
        else:
            what = "not a PDF (no %PDF- header)"
        raise SearchTomeError(f"{path}: {what}; supply the book's PDF file")


def open_pdf(path: PathLike, *, password: str | None = None) -> pymupdf.Document:
    """Open ``path`` read-only; raise :class:`SearchTomeError` for every unusable file.

    ``password`` opens user-password-encrypted files; it is ignored for files that do not need
    one (including owner-only encryption, which restricts nothing we do).
    """
    import pymupdf

    path = Path(path)
    _sniff(path)
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except pymupdf.FileDataError as exc:
        raise SearchTomeError(
            f"{path}: cannot be read as a PDF, the file is damaged or truncated ({exc}); "
            "download it again"
        ) from None
    except RuntimeError as exc:  # other MuPDF failures: out of memory, unsupported features
        raise SearchTomeError(f"{path}: MuPDF cannot open it ({exc})") from None
    try:
        _unlock(doc, path, password)
        if doc.page_count == 0:
            raise SearchTomeError(
                f"{path}: has no readable pages, the file is damaged or truncated; "
                "download it again"
            )
    except BaseException:
        doc.close()
        raise
    if is_damaged(doc):
        log.info("%s: damaged cross-reference table, repaired by MuPDF", path)
    return doc


def is_damaged(doc: pymupdf.Document) -> bool:
    """Whether MuPDF had to repair the file (truncated or corrupt), so content may be missing."""
    return bool(getattr(doc, "is_repaired", False))


def _unlock(doc: pymupdf.Document, path: Path, password: str | None) -> None:
    if not doc.needs_pass:
        return
    if password is None:
        raise SearchTomeError(
            f"{path}: is encrypted with a user password; give it with --password PASSWORD"
        )
    if not doc.authenticate(password):
        raise SearchTomeError(f"{path}: the password given does not open it; check --password")
    log.info("%s: opened with the given password", path)


@contextlib.contextmanager
def opened(path: PathLike, *, password: str | None = None) -> Iterator[pymupdf.Document]:
    """:func:`open_pdf` as a context manager that always closes the document."""
    doc = open_pdf(path, password=password)
    try:
        yield doc
    finally:
        doc.close()


def page_error(path: PathLike, page: int, exc: Exception) -> SearchTomeError:
    """The error for a page whose content MuPDF cannot read (1-based ``page``)."""
    return SearchTomeError(
        f"{path}: page {page} cannot be read, the file is damaged ({exc}); download it again"
    )
