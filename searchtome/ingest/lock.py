"""The lock file: pins for catalog entries without a ``sha256``, and what was found in each PDF.

One JSON file per catalog (see :func:`default_lock_path`)::

    {"format": "searchtome-lock-v1", "catalog": {"name": ..., "version": ...},
     "books": {"<book_id>": {"sha256", "size", "source", "title", "edition"}},
     "checks": {"<book_id>": {"sha256", "pages", "outline_leaves", "leaves", "leaf_depth"}}}

``books`` pins a file on its first download, so later downloads must be the same bytes.
``checks`` records, for the file first fetched, its page count, its outline's leaves and the
outline depth whose leaves reproduce the paper's count, so every later build cuts the outline
the same way (:func:`searchtome.ingest.depth.leaf_depth_for`). ``checks`` is optional: a lock
file without it still reads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.ingest.catalog import replace_book
from searchtome.io import PathLike, read_json, write_json
from searchtome.records import Book, Catalog, slugify
from searchtome.settings import cache_dir

log = logging.getLogger(__name__)

LOCK_FORMAT = "searchtome-lock-v1"


@dataclass
class Lock:
    """Pins (SHA-256 + size) recorded on first download of unpinned catalog entries.

    ``title`` and ``edition`` tie a pin to the entry it was made for: when a catalog entry is
    swapped for another book under the same id, the stale pin is reported instead of silently
    serving the old file.
    """

    path: Path
    books: dict[str, dict[str, Any]] = field(default_factory=dict)
    catalog: dict[str, str] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: PathLike, catalog: Catalog | None = None) -> Lock:
        path = Path(path)
        meta = {"name": catalog.name, "version": catalog.version} if catalog else {}
        if not path.exists():
            return cls(path, {}, meta)
        data = read_json(path)
        if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT:
            raise SearchTomeError(
                f'{path}: not a searchtome lock file (expected "format": "{LOCK_FORMAT}"); '
                "point --lock elsewhere or delete the file to re-pin every book"
            )
        books = data.get("books", {})
        checks = data.get("checks", {})
        if not isinstance(books, dict) or not isinstance(checks, dict):
            raise SearchTomeError(f"{path}: 'books' and 'checks' must be objects keyed by book id")
        return cls(path, dict(books), data.get("catalog") or meta, dict(checks))

    def entry(self, book: Book) -> dict[str, Any] | None:
        """The pin recorded for ``book``, after checking it was made for this entry."""
        pin = self.books.get(book.book_id)
        if pin is None:
            return None
        if (pin.get("title"), pin.get("edition", "")) != (book.title, book.edition):
            raise SearchTomeError(
                f"book {book.book_id!r}: {self.path} pins a file for {pin.get('title')!r} "
                f"({pin.get('edition') or 'no edition'}), but the catalog entry now says "
                f"{book.title!r} ({book.edition or 'no edition'}); rerun with --repin to pin "
                "the new book"
            )
        return pin

    def pin(self, book: Book, sha256: str, size: int, source: str) -> None:
        """Record a pin and write the file at once (a crash later must not lose it)."""
        self._refresh()
        self.books[book.book_id] = {
            "sha256": sha256,
            "size": size,
            "source": source,
            "title": book.title,
            "edition": book.edition,
        }
        self._write()
        log.info("pinned %s: sha256 %s, %d bytes (in %s)", book.book_id, sha256, size, self.path)

    def check(self, book_id: str, sha256: str) -> dict[str, Any] | None:
        """What was recorded about the file ``sha256`` of ``book_id`` (None: nothing yet)."""
        found = self.checks.get(book_id)
        return found if found is not None and found.get("sha256") == sha256 else None

    def record_check(self, book_id: str, sha256: str, found: Mapping[str, Any]) -> None:
        """Record what a PDF holds (pages, leaves, leaf depth); written at once like a pin."""
        self._refresh()
        self.checks[book_id] = {"sha256": sha256, **found}
        self._write()

    def drop(self, book_ids: Iterable[str]) -> list[str]:
        dropped = [b for b in book_ids if b in self.books]
        if dropped:
            for book_id in dropped:
                del self.books[book_id]
                self.checks.pop(book_id, None)
            self._write()
        return dropped

    def _refresh(self) -> None:
        # Another process may have pinned other books since this one loaded the file.
        if self.path.exists():
            fresh = Lock.load(self.path)
            self.books, self.checks = fresh.books, fresh.checks

    def _write(self) -> None:
        data: dict[str, Any] = {"format": LOCK_FORMAT, "catalog": self.catalog, "books": self.books}
        if self.checks:
            data["checks"] = self.checks
        write_json(self.path, data)


def default_lock_path(catalog: Catalog) -> Path:
    """``$SEARCHTOME_HOME/locks/<name>-v<version>.lock.json``: one lock per catalog identity."""
    stem = f"{slugify(catalog.name)}-v{slugify(catalog.version)}"
    return cache_dir("locks") / f"{stem}.lock.json"


def pinned_catalog(catalog: Catalog, lock: Lock) -> Catalog:
    """The catalog with every lock pin written into its entries (for publishing a release)."""
    books = []
    for book in catalog.books:
        pin = lock.entry(book) if book.sha256 is None else None
        if pin is not None:
            book = replace_book(book, sha256=pin["sha256"], size=pin["size"])
        books.append(book)
    return replace(catalog, books=tuple(books))
