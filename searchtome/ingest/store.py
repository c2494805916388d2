"""The verified PDF cache: content-addressed files, what a file must be, and putting one in place.

``$SEARCHTOME_HOME/downloads/<book_id>/<sha256>.pdf`` holds only verified files: bytes arrive in
``downloads/.partial/`` (a download or a copy of a user's file) and are renamed into place only
once their size and SHA-256 match what the catalog or the lock file expects.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from searchtome.ingest.lock import Lock
from searchtome.records import Book
from searchtome.settings import cache_dir

log = logging.getLogger(__name__)

PDF_MAGIC = b"%PDF-"


@dataclass(frozen=True)
class Expect:
    """What a book's file must be: its pin (if any) and where that pin comes from."""

    sha256: str | None
    size: int | None
    origin: str  # where the pin comes from, for messages


def cache_path(book_id: str, sha256: str) -> Path:
    """Where a verified PDF lives: content-addressed under the book's folder."""
    return cache_dir("downloads") / book_id / f"{sha256}.pdf"


def expectation(book: Book, lock: Lock | None) -> Expect:
    """The catalog's pin, else the lock file's, else only the catalogued size (if any)."""
    if book.sha256:
        return Expect(book.sha256, book.size, "the catalog")
    pin = lock.entry(book) if lock is not None else None
    if pin is not None and lock is not None:
        return Expect(pin["sha256"], pin["size"], f"the lock file {lock.path}")
    return Expect(None, book.size, "the catalog")


def verify_file(path: Path, sha: str, size: int, expect: Expect) -> str | None:
    """None when the file is what we expect, else why not (for one-line messages)."""
    if expect.size is not None and size != expect.size:
        return f"{size} bytes, but {expect.origin} expects {expect.size}"
    if expect.sha256 is not None and sha != expect.sha256:
        return f"sha256 {sha}, but {expect.origin} pins {expect.sha256}"
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if PDF_MAGIC not in head:
        return "it does not start like a PDF (an HTML error page?)"
    return None


def commit(
    book: Book, tmp: Path, sha: str, size: int, expect: Expect, lock: Lock | None, source: str
) -> Path:
    """Move a verified file into the cache and pin it when nothing pinned it before."""
    final = cache_path(book.book_id, sha)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, final)
    if expect.sha256 is None and lock is not None:
        lock.pin(book, sha, size, source)
    elif expect.sha256 is None:
        log.warning(
            "%s is not pinned (no sha256 in the catalog and no lock file); got sha256 %s",
            book.book_id,
            sha,
        )
    return final


def sha256_and_size(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size
