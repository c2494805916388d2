"""Verified, cached, resumable downloads of the catalog's PDFs (what ``searchtome fetch`` does).

Where a book's PDF comes from, in order:

1. the cache, ``$SEARCHTOME_HOME/downloads/<book_id>/<sha256>.pdf`` (re-hashed on every use);
2. ``--source-dir DIR``: a file named ``<book_id>.pdf`` or the file name at the end of one of the
   entry's ``pdf_urls`` (copied into the cache after verification);
3. the entry's ``pdf_urls``, tried in order (never while ``SEARCHTOME_OFFLINE=1``).

Size and SHA-256 are checked against the catalog's pin, or, for an entry without ``sha256``,
against the lock file that pinned it on first download (:mod:`searchtome.ingest.lock`). The
cache is :mod:`searchtome.ingest.store`, the HTTP side :mod:`searchtome.ingest.download`.

A book with the paper's figures in its catalog entry is checked against them when its file first
arrives (:mod:`searchtome.ingest.figures`): page count, leaf count, and the outline depth whose
leaves come closest to the paper's, recorded in the lock file for later builds.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from searchtome.errors import OfflineError, SearchTomeError
from searchtome.ingest.catalog import STATUSES, book_facts
from searchtome.ingest.download import PermanentError, TransientError, download_into_cache
from searchtome.ingest.figures import FigureCheck, check_pdf, missing
from searchtome.ingest.lock import Lock, default_lock_path
from searchtome.ingest.store import (
    Expect,
    cache_path,
    commit,
    expectation,
    sha256_and_size,
    verify_file,
)
from searchtome.io import PathLike
from searchtome.records import Book, Catalog
from searchtome.settings import cache_dir, require_online

log = logging.getLogger(__name__)

DEFAULT_RETRIES = 4
DEFAULT_BACKOFF = 1.0
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch_books` got: a verified path per book, or the reason it failed."""

    paths: Mapping[str, Path]
    failures: Mapping[str, str]
    sources: Mapping[str, str]  # book_id → "cache" | "source-dir" | "download"
    lock_path: Path
    # Books checked against the paper's figures in this run (files that arrived just now).
    checks: Mapping[str, FigureCheck] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def raise_for_failures(self) -> None:
        """Raise one :class:`SearchTomeError` naming the first failure and how many there were."""
        if self.failures:
            first = next(iter(self.failures.values()))
            more = len(self.failures) - 1
            raise SearchTomeError(first + (f" (and {more} more book(s) failed)" if more else ""))


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
    checks: dict[str, FigureCheck] = {}
    for book in books:
        try:
            path, source = _fetch_one(book, source_dir, lock, retries, backoff, timeout)
        except SearchTomeError as exc:
            failures[book.book_id] = str(exc)
            log.debug("fetch of %s failed: %s", book.book_id, exc)
            continue
        paths[book.book_id] = path
        sources[book.book_id] = source
        if source != "cache" and book_facts(book).paper is not None:
            checks[book.book_id] = check_against_paper(book, path, lock)
    return FetchResult(paths, failures, sources, lock.path, checks)


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


def _hint(book: Book) -> str:
    names = _source_names(book)
    where = f" from {book.landing_url}" if book.landing_url else ""
    hint = (
        f"download it by hand{where} and rerun with --source-dir DIR, where DIR holds the file "
        f"named {' or '.join(names)}"
    )
    facts = book_facts(book)
    if facts.status in ("edition-open", "source-unknown", "unidentified"):
        hint += f" (catalog status {facts.status}: {STATUSES[facts.status]})"
    if facts.paper is not None:
        hint += (
            f"; the paper's copy has {facts.paper.pages} pages and {facts.paper.leaves} ToC "
            "leaves, and fetch checks the file against them"
        )
    return hint


def _fetch_one(
    book: Book,
    source_dir: PathLike | None,
    lock: Lock | None,
    retries: int,
    backoff: float,
    timeout: float,
) -> tuple[Path, str]:
    expect = expectation(book, lock)
    if expect.sha256:
        cached = cache_path(book.book_id, expect.sha256)
        if cached.exists():
            if sha256_and_size(cached) == (expect.sha256, expect.size or cached.stat().st_size):
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
            path = download_into_cache(book, url, expect, lock, retries, backoff, timeout)
            return path, "download"
        except PermanentError as exc:
            problems.append(f"{url}: {exc}")
        except TransientError as exc:
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


def _adopt_local_file(book: Book, src: Path, expect: Expect, lock: Lock | None) -> Path:
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
        problem = verify_file(tmp, sha, size, expect)
        if problem:
            raise SearchTomeError(
                f"book {book.book_id!r}: {src} is not the expected file ({problem}); check that "
                "it is the catalogued edition, or fix the entry in your catalog"
            )
        return commit(book, tmp, sha, size, expect, lock, f"source-dir:{src.name}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


# ---------------------------------------------------------------------------------------------
# The paper's figures


def check_against_paper(book: Book, path: Path, lock: Lock | None) -> FigureCheck:
    """Check a fetched PDF against the paper's figures; record the result in ``lock``.

    A mismatch is a warning, not a failure: the file is the one pinned, and whether another
    edition will do is the user's call (``fetch --verify`` prints the verdict).
    """
    sha = path.stem
    recorded = lock.check(book.book_id, sha) if lock is not None else None
    if recorded is not None and recorded.get("pages") is not None:
        return FigureCheck(
            book.book_id,
            book_facts(book).paper,
            recorded.get("pages"),
            recorded.get("outline_leaves"),
            recorded.get("leaves"),
            recorded.get("leaf_depth"),
        )
    check = check_pdf(book, path)
    if check.problem:
        log.warning(
            "%s: cannot check it against the paper's figures: %s", book.book_id, check.problem
        )
        return check
    if not check.ok:
        log.warning("%s", check.summary())
    if lock is not None:
        lock.record_check(book.book_id, sha, check.found())
    return check


def verify_books(
    catalog: Catalog, book_ids: Sequence[str] | None, result: FetchResult, lock: Lock
) -> list[FigureCheck]:
    """Every selected book's check against the paper's figures (``missing`` when not fetched)."""
    books = [catalog.get(b) for b in book_ids] if book_ids else list(catalog.books)
    checks = []
    for book in books:
        path = result.paths.get(book.book_id)
        if path is None:
            checks.append(missing(book))
        elif book.book_id in result.checks:
            checks.append(result.checks[book.book_id])
        else:
            checks.append(check_against_paper(book, path, lock))
    return checks


def book_state(book: Book, lock: Lock) -> tuple[str, bool]:
    """Where ``book``'s pin comes from (``catalog``, ``lock``, ``unpinned``) and if it is cached."""
    sha = expectation(book, lock).sha256
    pinned = "catalog" if book.sha256 else ("lock" if sha else "unpinned")
    return pinned, sha is not None and cache_path(book.book_id, sha).exists()
