"""Downloading one URL into the cache: retries, timeouts, HTTP ``Range`` resume, streaming checks.

Every byte is hashed as it streams in; size and SHA-256 are checked against the pin. Downloads go
to ``downloads/.partial/`` and are renamed into place only once verified (:func:`commit`), so the
cache never holds a half-written or unverified PDF. A partial download is kept for a ``Range``
resume only when the server advertised ranges and a validator (ETag/Last-Modified) to resume
against; otherwise it restarts cleanly.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from searchtome.errors import SearchTomeError
from searchtome.ingest.lock import Lock
from searchtome.ingest.store import Expect, commit, verify_file
from searchtome.io import exclusive, read_json, write_json
from searchtome.records import Book
from searchtome.settings import cache_dir, progress
from searchtome.version import __version__

log = logging.getLogger(__name__)

USER_AGENT = f"searchtome/{__version__} (+https://github.com/searchtome/searchtome)"
CHUNK = 1 << 16
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


class TransientError(Exception):
    """Worth retrying the same URL (5xx, timeouts, cut connections)."""


class PermanentError(Exception):
    """Retrying this URL cannot help (4xx, wrong size or checksum, not a PDF)."""


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


def _partial_for(book: Book, url: str, expect: Expect) -> _Partial:
    key = hashlib.sha256(f"{url}\n{expect.sha256}".encode()).hexdigest()[:16]
    folder = cache_dir("downloads", ".partial")
    return _Partial(folder / f"{book.book_id}-{key}.part", folder / f"{book.book_id}-{key}.json")


def download_into_cache(
    book: Book,
    url: str,
    expect: Expect,
    lock: Lock | None,
    retries: int,
    backoff: float,
    timeout: float,
) -> Path:
    partial = _partial_for(book, url, expect)
    with exclusive(partial.data.with_suffix(".lock")):  # one appender per partial file
        attempt = 0
        while True:
            try:
                sha, size = _download_once(book, url, partial, expect, timeout)
                break
            except PermanentError:
                partial.clear()
                raise
            except TransientError as exc:
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
            return commit(book, partial.data, sha, size, expect, lock, url)
        finally:
            partial.clear()


def _strong_validator(headers: Mapping[str, str]) -> str | None:
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return headers.get("Last-Modified")


def _download_once(
    book: Book, url: str, partial: _Partial, expect: Expect, timeout: float
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
            raise TransientError("server refused to resume the partial file; restarting") from None
        if exc.code in _RETRY_STATUS:
            raise TransientError(f"HTTP {exc.code} {exc.reason}") from None
        raise PermanentError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, FileNotFoundError | PermissionError | IsADirectoryError):
            raise PermanentError(f"cannot read it ({exc.reason})") from None
        raise TransientError(f"cannot connect ({exc.reason})") from None
    except TimeoutError:
        raise TransientError(f"no response within {timeout:g}s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise TransientError(f"connection failed ({exc.__class__.__name__}: {exc})") from None
    with response:
        return _stream(book, url, response, partial, expect, offset, timeout)


_CONTENT_RANGE_RE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def _stream(
    book: Book,
    url: str,
    response: Any,
    partial: _Partial,
    expect: Expect,
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
        raise TransientError("server sent a partial response to a plain request")
    length = headers.get("Content-Length")
    total = offset + int(length) if length and length.isdigit() else None
    if total is not None and expect.size is not None and total != expect.size:
        raise PermanentError(
            f"server offers {total} bytes, but {expect.origin} expects {expect.size}"
        )
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
        raise TransientError(f"connection closed after {size} of {total} bytes")
    sha = digest.hexdigest()
    problem = verify_file(partial.data, sha, size, expect)
    if problem:
        if offset:
            partial.clear()
            raise TransientError(f"resumed file is wrong ({problem}); restarting from scratch")
        raise PermanentError(problem)
    return sha, size


def _copy(
    response: BinaryIO,
    out: BinaryIO,
    digest: Any,
    size: int,
    expect: Expect,
    bar: Any,
    timeout: float,
) -> int:
    while True:
        try:
            block = response.read(CHUNK)
        except TimeoutError:
            raise TransientError(f"stalled for more than {timeout:g}s after {size} bytes") from None
        except http.client.IncompleteRead as exc:
            out.write(exc.partial)
            digest.update(exc.partial)
            size += len(exc.partial)
            raise TransientError(f"connection closed after {size} bytes") from None
        except (OSError, http.client.HTTPException) as exc:
            raise TransientError(f"connection failed after {size} bytes ({exc})") from None
        if not block:
            return size
        out.write(block)
        digest.update(block)
        size += len(block)
        bar.update(len(block))
        if expect.size is not None and size > expect.size:
            raise PermanentError(f"more than the expected {expect.size} bytes")
