"""Verified, cached, resumable downloads of the catalog's PDFs (``searchtome fetch``).

Where a book's PDF comes from, in order:

1. the cache, ``$SEARCHTOME_HOME/downloads/<book_id>/<sha256>.pdf`` (re-hashed on every use);
2. ``--source-dir DIR``: a file named ``<book_id>.pdf`` or the file name at the end of one of the
   entry's ``pdf_urls`` (copied into the cache after verification);
3. the entry's ``pdf_urls``, tried in order (never while ``SEARCHTOME_OFFLINE=1``).

Every byte is hashed as it streams in; size and SHA-256 are checked against the catalog's pin,
or, for an entry without ``sha256``, against the lock file that pinned it on first download.
Downloads go to ``downloads/.partial/`` and are renamed into place only once verified, so the
cache never holds a half-written or unverified PDF. A partial download is kept for an HTTP
``Range`` resume only when the server advertised ranges and a validator (ETag/Last-Modified) to
resume against; otherwise it restarts cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import logging
import os
import re
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from searchtome.errors import OfflineError, SearchTomeError
from searchtome.io import PathLike, read_json, write_json
from searchtome.records import Book, Catalog, slugify
from searchtome.settings import cache_dir, progress, require_online
from searchtome.version import __version__

log = logging.getLogger(__name__)

LOCK_FORMAT = "searchtome-lock-v1"
USER_AGENT = f"searchtome/{__version__} (+https://github.com/searchtome/searchtome)"
CHUNK = 1 << 16
DEFAULT_RETRIES = 4
DEFAULT_BACKOFF = 1.0
DEFAULT_TIMEOUT = 60.0
_PDF_MAGIC = b"%PDF-"
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


# ---------------------------------------------------------------------------------------------
# Lock file: pins for catalog entries that carry no sha256 of their own.


@dataclass
class Lock:
    """Pins (SHA-256 + size) recorded on first download of unpinned catalog entries.

    One JSON file per catalog (see :func:`default_lock_path`)::

        {"format": "searchtome-lock-v1", "catalog": {"name": ..., "version": ...},
         "books": {"<book_id>": {"sha256", "size", "source", "title", "edition"}}}

    ``title`` and ``edition`` tie a pin to the entry it was made for: when a catalog entry is
    swapped for another book under the same id, the stale pin is reported instead of silently
    serving the old file.
    """

    path: Path
    books: dict[str, dict[str, Any]] = field(default_factory=dict)
    catalog: dict[str, str] = field(default_factory=dict)

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
        if not isinstance(books, dict):
            raise SearchTomeError(f"{path}: 'books' must be an object keyed by book id")
        return cls(path, dict(books), data.get("catalog") or meta)

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
        fresh = Lock.load(self.path) if self.path.exists() else self
        books = dict(fresh.books)
        books[book.book_id] = {
            "sha256": sha256,
            "size": size,
            "source": source,
            "title": book.title,
            "edition": book.edition,
        }
        self.books = books
        self._write()
        log.info("pinned %s: sha256 %s, %d bytes (in %s)", book.book_id, sha256, size, self.path)

    def drop(self, book_ids: Iterable[str]) -> list[str]:
        dropped = [b for b in book_ids if b in self.books]
        if dropped:
            for book_id in dropped:
                del self.books[book_id]
            self._write()
        return dropped

    def _write(self) -> None:
        write_json(
            self.path,
            {"format": LOCK_FORMAT, "catalog": self.catalog, "books": self.books},
        )


def default_lock_path(catalog: Catalog) -> Path:
    """``$SEARCHTOME_HOME/locks/<name>-v<version>.lock.json``: one lock per catalog identity."""
    stem = f"{slugify(catalog.name)}-v{slugify(catalog.version)}"
    return cache_dir("locks") / f"{stem}.lock.json"


def pinned_catalog(catalog: Catalog, lock: Lock) -> Catalog:
    """The catalog with every lock pin written into its entries (for publishing a release)."""
    from dataclasses import replace

    books = []
    for book in catalog.books:
        pin = lock.entry(book) if book.sha256 is None else None
        if pin is not None:
            book = replace(book, sha256=pin["sha256"], size=pin["size"])
        books.append(book)
    return replace(catalog, books=tuple(books))


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch_books` got: a verified path per book, or the reason it failed."""

    paths: Mapping[str, Path]
    failures: Mapping[str, str]
    sources: Mapping[str, str]  # book_id → "cache" | "source-dir" | "download"
    lock_path: Path

    @property
    def ok(self) -> bool:
        return not self.failures

    def raise_for_failures(self) -> None:
        """Raise one :class:`SearchTomeError` naming the first failure and how many there were."""
        if self.failures:
            first = next(iter(self.failures.values()))
            more = len(self.failures) - 1
            raise SearchTomeError(first + (f" (and {more} more book(s) failed)" if more else ""))


# ---------------------------------------------------------------------------------------------
# Public API


def cache_path(book_id: str, sha256: str) -> Path:
    """Where a verified PDF lives: content-addressed under the book's folder."""
    return cache_dir("downloads") / book_id / f"{sha256}.pdf"


def fetch_books(
    catalog: Catalog,
    book_ids: Sequence[str] | None = None,
    source_dir: PathLike | None = None,
    *,
    lock: Lock | PathLike | None = None,
    repin: bool = False,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    timeout: float = DEFAULT_TIMEOUT,
) -> FetchResult:
    """Fetch and verify the PDFs of ``book_ids`` (all books by default); never raises per book.

    Unknown ids raise at once (with a did-you-mean). ``repin`` forgets the lock pins of the
    selected books first, so a book that changed upstream on purpose can be pinned again.
    """
    books = [catalog.get(b) for b in book_ids] if book_ids else list(catalog.books)
    if source_dir is not None and not Path(source_dir).is_dir():
        raise SearchTomeError(f"{source_dir}: --source-dir must be an existing folder")
    lock = _as_lock(lock, catalog)
    if repin:
        dropped = lock.drop(b.book_id for b in books)
        if dropped:
            log.info("forgot lock pins of %s", ", ".join(dropped))
    paths: dict[str, Path] = {}
    failures: dict[str, str] = {}
    sources: dict[str, str] = {}
    for book in books:
        try:
            path, source = _fetch_one(book, source_dir, lock, retries, backoff, timeout)
        except SearchTomeError as exc:
            failures[book.book_id] = str(exc)
            log.debug("fetch of %s failed: %s", book.book_id, exc)
            continue
        paths[book.book_id] = path
        sources[book.book_id] = source
    return FetchResult(paths, failures, sources, lock.path)


def fetch_book(
    book: Book,
    source_dir: PathLike | None = None,
    *,
    lock: Lock | PathLike | None = None,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    timeout: float = DEFAULT_TIMEOUT,
) -> Path:
    """The verified cached PDF of one book; raises :class:`SearchTomeError` with what to do.

    Without a ``lock``, an entry without ``sha256`` is accepted as downloaded (it must still be a
    PDF of the catalogued size, when a size is given) but nothing pins it for next time: use
    :func:`fetch_books` with the catalog to get the lock-file behaviour.
    """
    lock_obj = _as_lock(lock, None) if lock is not None else None
    return _fetch_one(book, source_dir, lock_obj, retries, backoff, timeout)[0]


def _as_lock(lock: Lock | PathLike | None, catalog: Catalog | None) -> Lock:
    if isinstance(lock, Lock):
        return lock
    if lock is None:
        assert catalog is not None
        return Lock.load(default_lock_path(catalog), catalog)
    return Lock.load(lock, catalog)


# ---------------------------------------------------------------------------------------------
# One book


class _Transient(Exception):
    """Worth retrying the same URL (5xx, timeouts, cut connections)."""


class _Permanent(Exception):
    """Retrying this URL cannot help (4xx, wrong size or checksum, not a PDF)."""


@dataclass(frozen=True)
class _Expect:
    sha256: str | None
    size: int | None
    origin: str  # where the pin comes from, for messages


def _expectation(book: Book, lock: Lock | None) -> _Expect:
    if book.sha256:
        return _Expect(book.sha256, book.size, "the catalog")
    pin = lock.entry(book) if lock is not None else None
    if pin is not None:
        return _Expect(pin["sha256"], pin["size"], f"the lock file {lock.path}")  # type: ignore[union-attr]
    return _Expect(None, book.size, "the catalog")


def _hint(book: Book) -> str:
    names = _source_names(book)
    where = f" from {book.landing_url}" if book.landing_url else ""
    return (
        f"download it by hand{where} and rerun with --source-dir DIR, where DIR holds the file "
        f"named {' or '.join(names)}"
    )


def _fetch_one(
    book: Book,
    source_dir: PathLike | None,
    lock: Lock | None,
    retries: int,
    backoff: float,
    timeout: float,
) -> tuple[Path, str]:
    expect = _expectation(book, lock)
    if expect.sha256:
        cached = cache_path(book.book_id, expect.sha256)
        if cached.exists():
            if _sha256_and_size(cached) == (expect.sha256, expect.size or cached.stat().st_size):
                log.info("%s: using cached %s", book.book_id, cached)
                return cached, "cache"
            log.warning("%s: cached file %s is corrupt; fetching it again", book.book_id, cached)
            cached.unlink()

    if source_dir is not None:
        found = _find_in_source_dir(book, Path(source_dir))
        if found is not None:
            return _adopt_local_file(book, found, expect, lock), "source-dir"

    first_url = book.pdf_urls[0] if book.pdf_urls else "its PDF"
    try:
        require_online(f"book {book.book_id!r} is not in the cache; downloading {first_url}")
    except OfflineError as exc:
        raise OfflineError(f"{exc}: {_hint(book)}") from None
    if not book.pdf_urls:
        raise SearchTomeError(
            f"book {book.book_id!r}: the catalog gives no pdf_urls; {_hint(book)}"
        )

    problems = []
    for url in book.pdf_urls:
        try:
            return _download_into_cache(
                book, url, expect, lock, retries, backoff, timeout
            ), "download"
        except _Permanent as exc:
            problems.append(f"{url}: {exc}")
        except _Transient as exc:
            problems.append(f"{url}: {exc} (gave up after {retries + 1} attempts)")
    raise SearchTomeError(
        f"book {book.book_id!r}: could not download it ({'; '.join(problems)}); {_hint(book)}"
    )


def _source_names(book: Book) -> list[str]:
    """File names accepted in --source-dir: ``<book_id>.pdf`` or a pdf_url's own file name."""
    names = [f"{book.book_id}.pdf"]
    for url in book.pdf_urls:
        name = urllib.parse.unquote(Path(urllib.parse.urlparse(url).path).name)
        if name.lower().endswith(".pdf") and name not in names:
            names.append(name)
    return names


def _find_in_source_dir(book: Book, source_dir: Path) -> Path | None:
    if not source_dir.is_dir():
        raise SearchTomeError(f"{source_dir}: --source-dir must be an existing folder")
    for name in _source_names(book):
        candidate = source_dir / name
        if candidate.is_file():
            return candidate
    return None


def _adopt_local_file(book: Book, src: Path, expect: _Expect, lock: Lock | None) -> Path:
    """Verify a user-supplied file and copy it into the cache (atomically)."""
    partial_dir = cache_dir("downloads", ".partial")
    fd, tmp_name = tempfile.mkstemp(prefix=f"{book.book_id}.", suffix=".part", dir=partial_dir)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        size = 0
        with open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
            while block := fin.read(1 << 20):
                digest.update(block)
                fout.write(block)
                size += len(block)
            fout.flush()
            os.fsync(fout.fileno())
        sha = digest.hexdigest()
        problem = _verify(tmp, sha, size, expect)
        if problem:
            raise SearchTomeError(
                f"book {book.book_id!r}: {src} is not the expected file ({problem}); check that "
                "it is the catalogued edition, or fix the entry in your catalog"
            )
        return _commit(book, tmp, sha, size, expect, lock, f"source-dir:{src.name}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _verify(path: Path, sha: str, size: int, expect: _Expect) -> str | None:
    """None when the file is what we expect, else why not (for one-line messages)."""
    if expect.size is not None and size != expect.size:
        return f"{size} bytes, but {expect.origin} expects {expect.size}"
    if expect.sha256 is not None and sha != expect.sha256:
        return f"sha256 {sha}, but {expect.origin} pins {expect.sha256}"
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if _PDF_MAGIC not in head:
        return "it does not start like a PDF (an HTML error page?)"
    return None


def _commit(
    book: Book, tmp: Path, sha: str, size: int, expect: _Expect, lock: Lock | None, source: str
) -> Path:
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


def _sha256_and_size(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


# ---------------------------------------------------------------------------------------------
# HTTP


@dataclass
class _Partial:
    """A resumable partial download and what it may be resumed against."""

    data: Path
    meta: Path

    def load_meta(self) -> dict[str, Any]:
        if not (self.data.exists() and self.meta.exists()):
            return {}
        try:
            meta = read_json(self.meta)
        except SearchTomeError:
            return {}
        return meta if isinstance(meta, dict) else {}

    def clear(self) -> None:
        for path in (self.data, self.meta):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _partial_for(book: Book, url: str, expect: _Expect) -> _Partial:
    key = hashlib.sha256(f"{url}\n{expect.sha256}".encode()).hexdigest()[:16]
    folder = cache_dir("downloads", ".partial")
    return _Partial(folder / f"{book.book_id}-{key}.part", folder / f"{book.book_id}-{key}.json")


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Keep two processes from appending to the same partial file."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _download_into_cache(
    book: Book,
    url: str,
    expect: _Expect,
    lock: Lock | None,
    retries: int,
    backoff: float,
    timeout: float,
) -> Path:
    partial = _partial_for(book, url, expect)
    with _exclusive(partial.data.with_suffix(".lock")):
        attempt = 0
        while True:
            try:
                sha, size = _download_once(book, url, partial, expect, timeout)
                break
            except _Permanent:
                partial.clear()
                raise
            except _Transient as exc:
                attempt += 1
                if attempt > retries:
                    if not partial.load_meta().get("resumable"):
                        partial.clear()
                    raise
                delay = backoff * 2 ** (attempt - 1)
                log.info(
                    "%s: %s (%s); retry %d/%d in %.1fs",
                    book.book_id,
                    exc,
                    url,
                    attempt,
                    retries,
                    delay,
                )
                time.sleep(delay)
        try:
            return _commit(book, partial.data, sha, size, expect, lock, url)
        finally:
            partial.clear()


def _strong_validator(headers: Mapping[str, str]) -> str | None:
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return headers.get("Last-Modified")


def _download_once(
    book: Book, url: str, partial: _Partial, expect: _Expect, timeout: float
) -> tuple[str, int]:
    meta = partial.load_meta()
    offset = partial.data.stat().st_size if meta.get("resumable") else 0
    if offset and expect.size is not None and offset >= expect.size:
        offset = 0  # nothing sensible to resume; start over
    if not offset:
        partial.clear()
    headers = {"User-Agent": USER_AGENT, "Accept": "application/pdf,*/*"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        headers["If-Range"] = meta["validator"]
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416:
            partial.clear()
            raise _Transient("server refused to resume the partial file; restarting") from None
        if exc.code in _RETRY_STATUS:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        raise _Permanent(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, FileNotFoundError | PermissionError | IsADirectoryError):
            raise _Permanent(f"cannot read it ({exc.reason})") from None
        raise _Transient(f"cannot connect ({exc.reason})") from None
    except TimeoutError:
        raise _Transient(f"no response within {timeout:g}s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise _Transient(f"connection failed ({exc.__class__.__name__}: {exc})") from None
    with response:
        return _stream(book, url, response, partial, expect, offset, timeout)


_CONTENT_RANGE_RE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def _stream(
    book: Book,
    url: str,
    response: Any,
    partial: _Partial,
    expect: _Expect,
    offset: int,
    timeout: float,
) -> tuple[str, int]:
    status = getattr(response, "status", None) or 200
    headers = response.headers
    if offset:
        match = _CONTENT_RANGE_RE.match(headers.get("Content-Range", ""))
        if status == 206 and match and int(match.group(1)) == offset:
            log.info("%s: resuming at byte %d", book.book_id, offset)
        else:
            log.info("%s: server sent the whole file instead of a range; restarting", book.book_id)
            offset = 0
            partial.clear()
    elif status == 206:
        raise _Transient("server sent a partial response to a plain request")
    length = headers.get("Content-Length")
    total = offset + int(length) if length and length.isdigit() else None
    if total is not None and expect.size is not None and total != expect.size:
        raise _Permanent(f"server offers {total} bytes, but {expect.origin} expects {expect.size}")
    validator = _strong_validator(headers)
    resumable = headers.get("Accept-Ranges", "").lower() == "bytes" and validator is not None
    write_json(partial.meta, {"url": url, "resumable": resumable, "validator": validator})

    digest = hashlib.sha256()
    if offset:
        with open(partial.data, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    size = offset
    bar = progress(
        total=total,
        initial=offset,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=book.book_id,
        leave=False,
    )
    try:
        with open(partial.data, "ab" if offset else "wb") as out:
            size = _copy(response, out, digest, size, expect, bar, timeout)
            out.flush()
            os.fsync(out.fileno())
    finally:
        bar.close()
    if total is not None and size < total:
        raise _Transient(f"connection closed after {size} of {total} bytes")
    sha = digest.hexdigest()
    problem = _verify(partial.data, sha, size, expect)
    if problem:
        if offset:
            partial.clear()
            raise _Transient(f"resumed file is wrong ({problem}); restarting from scratch")
        raise _Permanent(problem)
    return sha, size


def _copy(
    response: BinaryIO,
    out: BinaryIO,
    digest: Any,
    size: int,
    expect: _Expect,
    bar: Any,
    timeout: float,
) -> int:
    while True:
        try:
            block = response.read(CHUNK)
        except TimeoutError:
            raise _Transient(f"stalled for more than {timeout:g}s after {size} bytes") from None
        except http.client.IncompleteRead as exc:
            out.write(exc.partial)
            digest.update(exc.partial)
            size += len(exc.partial)
            raise _Transient(f"connection closed after {size} bytes") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Transient(f"connection failed after {size} bytes ({exc})") from None
        if not block:
            return size
        out.write(block)
        digest.update(block)
        size += len(block)
        bar.update(len(block))
        if expect.size is not None and size > expect.size:
            raise _Permanent(f"more than the expected {expect.size} bytes")


# ---------------------------------------------------------------------------------------------
# CLI


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fetch",
        help="download and verify the catalog's PDFs into the cache",
        description=(
            "Download the catalog's PDFs into $SEARCHTOME_HOME/downloads, verifying size and "
            "SHA-256 while streaming. Books that cannot be downloaded can be supplied by hand "
            "with --source-dir (file named <book_id>.pdf or the URL's file name)."
        ),
    )
    parser.add_argument("--catalog", metavar="FILE", help="catalog TOML (default: SearchTome v1)")
    parser.add_argument("--books", metavar="ID,...", help="comma-separated book ids (default: all)")
    parser.add_argument(
        "--source-dir", metavar="DIR", help="folder of PDFs supplied by hand (checked first)"
    )
    parser.add_argument(
        "--lock",
        metavar="FILE",
        help="lock file pinning unpinned entries (default: $SEARCHTOME_HOME/locks/<catalog>.lock.json)",
    )
    parser.add_argument(
        "--repin",
        action="store_true",
        help="forget the lock pins of the selected books and pin what is fetched now",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=DEFAULT_RETRIES,
        metavar="N",
        help=f"retries per URL after a transient failure, with exponential backoff (default {DEFAULT_RETRIES})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"limit for connecting and for each read; a stall this long is a failure (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the catalog and cache state; fetch nothing"
    )
    parser.add_argument(
        "--write-pinned",
        metavar="FILE",
        help="after fetching, write the catalog with every lock pin filled in to FILE",
    )
    parser.set_defaults(func=_run)


def _parse_ids(text: str | None) -> list[str] | None:
    if not text:
        return None
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise SearchTomeError("--books is empty; give comma-separated book ids")
    return ids


def _run(args: argparse.Namespace) -> int:
    import sys

    from searchtome.ingest.catalog import catalog_to_toml, load_catalog
    from searchtome.io import atomic_write

    catalog = load_catalog(args.catalog)
    ids = _parse_ids(args.books)
    books = [catalog.get(b) for b in ids] if ids else list(catalog.books)
    lock = Lock.load(args.lock or default_lock_path(catalog), catalog)
    if args.retries < 0 or args.timeout <= 0:
        raise SearchTomeError("--retries must be >= 0 and --timeout > 0")

    if args.list:
        for book in books:
            expect = _expectation(book, lock)
            pinned = "catalog" if book.sha256 else ("lock" if expect.sha256 else "unpinned")
            cached = bool(expect.sha256) and cache_path(book.book_id, expect.sha256).exists()
            restrictions = ",".join(book.restrictions) or "-"
            print(
                f"{book.book_id}\t{book.domain}\t{pinned}\t{'cached' if cached else '-'}"
                f"\t{restrictions}\t{book.title}"
            )
        return 0

    result = fetch_books(
        catalog,
        [b.book_id for b in books],
        args.source_dir,
        lock=lock,
        repin=args.repin,
        retries=args.retries,
        timeout=args.timeout,
    )
    for book_id, path in result.paths.items():
        print(f"{book_id}\t{result.sources[book_id]}\t{path}")
    for message in result.failures.values():
        print(f"searchtome: error: {message}", file=sys.stderr)
    if args.write_pinned:
        text = catalog_to_toml(pinned_catalog(catalog, Lock.load(result.lock_path)))
        with atomic_write(args.write_pinned) as fh:
            fh.write(text)
    if result.failures:
        return 1
    return 0
