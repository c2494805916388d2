"""Atomic, deterministic file writing and the readers that go with it.

Every file searchtome writes goes through :func:`atomic_write`: a temporary file in the target's
own folder, fsync, then ``os.replace``. A killed process leaves either the old file or the new
one, never half of one. JSON is written with sorted keys and a trailing newline, parquet with
fixed writer settings, so identical inputs give identical bytes.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from searchtome.errors import SearchTomeError

# hashlib, shutil and tempfile are imported by the functions that write or hash: every command
# imports this module, and reading commands (`score`, `validate`) should not pay ~7 ms for them.
PathLike = str | os.PathLike[str]

_UMASK = os.umask(0)
os.umask(_UMASK)


# Failures of the file system rather than of the program: one line naming the path, no traceback.
_WRITE_ERRORS = {
    errno.ENOSPC: "no space left on device; free some space or write somewhere else",
    errno.EDQUOT: "disk quota exceeded; free some space or write somewhere else",
    errno.EFBIG: "file too large for this file system (or the process's file size limit)",
    errno.EROFS: "read-only file system; write somewhere else",
    errno.EACCES: "permission denied; write somewhere else",
    errno.EPERM: "operation not permitted; write somewhere else",
}


def write_failure(path: PathLike, exc: OSError) -> SearchTomeError | None:
    """The one-line error for a write that the file system refused, or ``None`` for other errors.

    pyarrow and gzip sometimes re-raise an ``OSError`` without ``errno``; the message still
    carries the system's text, which is matched as a fallback.
    """
    reason = _WRITE_ERRORS.get(exc.errno or 0)
    if reason is None:
        text = str(exc).lower()
        reason = next(
            (r for code, r in _WRITE_ERRORS.items() if os.strerror(code).lower() in text), None
        )
    return None if reason is None else SearchTomeError(f"{path}: cannot write: {reason}")


@contextlib.contextmanager
def atomic_write(
    path: PathLike, mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success.

    A full disk (or quota, size limit, read-only or forbidden folder) raises
    :class:`SearchTomeError` naming ``path``; the temporary file is removed and ``path`` keeps
    its old content.
    """
    import tempfile

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise (write_failure(path, exc) or exc) from None
    binary = "b" in mode
    os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes files private; ours should look like open()'s
    try:
        with os.fdopen(
            fd, mode, encoding=None if binary else encoding, newline=None if binary else "\n"
        ) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        failure = write_failure(path, exc) if isinstance(exc, OSError) else None
        if failure is not None:
            raise failure from None
        raise


def atomic_dir(path: PathLike) -> Path:
    """A fresh temporary sibling of ``path``; move it into place with :func:`commit_dir`. Its
    name carries this process's id and host (:func:`scratch_dir`), and stale ones left by a
    killed run for the same ``path`` are removed first (:func:`remove_stale`)."""
    try:
        tmp = scratch_dir(path, suffix=".tmp")
    except OSError as exc:
        raise (write_failure(path, exc) or exc) from None
    tmp.chmod(0o777 & ~_UMASK)  # mkdtemp makes it private; the committed folder should not be
    return tmp


def owner_tag(pid: int | None = None) -> str:
    """``st<pid>-<8 hex of the host name>``: who made a temporary folder, in its name."""
    import hashlib
    import socket

    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"st{os.getpid() if pid is None else pid}-{host}"


def scratch_dir(path: PathLike, kind: str = "", suffix: str = "") -> Path:
    """A fresh private folder beside ``path`` named ``.NAME.[KIND.]st<pid>-<host>.XXXX``, after
    removing the stale ones a killed run left for ``path``."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    middle = f"{kind}." if kind else ""
    return Path(
        tempfile.mkdtemp(
            prefix=f".{path.name}.{middle}{owner_tag()}.", suffix=suffix, dir=path.parent
        )
    )


def remove_stale(path: PathLike) -> list[Path]:
    """Remove the temporary folders beside ``path`` that a searchtome process on this host
    made for it and that outlived it (killed mid-write). Only names with our owner tag are
    looked at, and only when that process is gone: a live build's folders, another host's (on a
    shared disk) and anything else are left alone. Returns what was removed."""
    import re
    import shutil

    path = Path(path)
    if not path.parent.is_dir():
        return []
    host = owner_tag(0).rpartition("-")[2]
    pattern = re.compile(
        rf"\.{re.escape(path.name)}\.(?:[a-z]+\.)?st(\d+)-([0-9a-f]{{8}})(?:\..*)?"
    )
    removed = []
    for entry in path.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if not match or match.group(2) != host or not entry.is_dir() or entry.is_symlink():
            continue
        if process_alive(int(match.group(1))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    if removed:
        import logging

        logging.getLogger(__name__).info(
            "removed %d temporary folder(s) left by killed runs: %s",
            len(removed),
            ", ".join(p.name for p in removed),
        )
    return removed


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` on this host may still be running (ours always is; one we may
    not signal, or a number we cannot judge, counts as alive, so nothing of it is removed)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or a number we cannot judge: leave it
    return True


@contextlib.contextmanager
def staged_dir(path: PathLike) -> Iterator[Path]:
    """A temporary sibling folder (:func:`atomic_dir`) to fill; when the block ends it replaces
    ``path`` (:func:`commit_dir`); on any failure, Ctrl-C included, it is removed and ``path``
    stays as it was."""
    import shutil

    tmp = atomic_dir(path)
    try:
        yield tmp
        commit_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def exclusive(lock: PathLike) -> Iterator[None]:
    """Hold an exclusive advisory lock on the file ``lock`` (created if missing) for the block:
    processes on this host that take the same lock run the block one at a time. Where there is
    no ``fcntl`` (not POSIX) the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    Path(lock).parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block, restored after. For readers that make
    hundreds of thousands of objects without a cycle (a book's spans and lines, a run's tuples):
    reference counting frees them, yet every collection walks all those kept so far, a fifth of
    a 400-page manual's extraction and a third of a 20,000-query run's grouping in a process
    that already holds one."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def commit_dir(tmp: PathLike, path: PathLike) -> None:
    """Replace ``path`` by the folder ``tmp`` (the old folder, if any, is removed afterwards;
    its temporary name carries our owner tag, so a kill between the two steps is cleaned up)."""
    import shutil

    tmp, path = Path(tmp), Path(path)
    old = None
    if path.exists():
        old = path.with_name(f".{path.name}.old.{owner_tag()}")
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def dumps(obj: Any, *, indent: int | None = 2) -> str:
    """Canonical JSON: sorted keys, UTF-8 kept, trailing newline when indented."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=indent)
    return text + "\n" if indent is not None else text


def write_json(path: PathLike, obj: Any) -> Path:
    with atomic_write(path) as fh:
        fh.write(dumps(obj))
    return Path(path)


def read_json(path: PathLike) -> Any:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise SearchTomeError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def write_jsonl(path: PathLike, rows: Iterable[Mapping[str, Any]]) -> Path:
    """One canonical JSON object per line; ``.gz`` paths are gzip-compressed (mtime 0)."""
    path = Path(path)
    if path.suffix == ".gz":
        with (
            atomic_write(path, "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
        ):
            for row in rows:
                gz.write((dumps(row, indent=None) + "\n").encode("utf-8"))
    else:
        with atomic_write(path) as fh:
            for row in rows:
                fh.write(dumps(row, indent=None) + "\n")
    return path


def read_jsonl(path: PathLike) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSON-lines file (``.gz`` allowed); errors name file and line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SearchTomeError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: file not found") from None


def sha256_file(path: PathLike, chunk: int = 1 << 20) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stable_hash(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (cache keys, config fingerprints)."""
    return sha256_text(dumps(obj, indent=None))


# Parquet: fixed settings so the same rows give the same bytes with the same pyarrow version.
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
    "row_group_size": 1 << 16,
}


def write_parquet(path: PathLike, rows: Sequence[Mapping[str, Any]], schema: Any) -> Path:
    """Write ``rows`` (already in their final order) with an explicit pyarrow ``schema``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
    # No pandas metadata or wall-clock values may enter the file.
    table = table.replace_schema_metadata(None)
    with atomic_write(path, "wb") as fh:
        pq.write_table(table, fh, **PARQUET_OPTIONS)
    return Path(path)


def read_parquet(path: PathLike) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        # One file, read whole: ParquetFile, not read_table, whose dataset layer imports
        # pandas (about 65 MiB more resident in each server process, for nothing).
        with pq.ParquetFile(path) as parquet:
            return parquet.read().to_pylist()
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: file not found") from None
