"""Bomb-safe line reading: the size caps (:class:`Limits`) and the format sniffing.

File size, decompressed size and line length are capped before anything is parsed, so a hostile
or broken upload cannot exhaust memory. Gzip is recognised by its magic bytes, not the file name.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Literal

from searchtome.io import PathLike
from searchtome.limits import MAX_IDS
from searchtome.submissions.problems import KEEP_PER_KIND, Problem

# Errors a truncated or corrupt gzip stream raises while reading.
_READ_ERRORS = (OSError, EOFError, zlib.error)

Line = tuple[int, str | None, Problem | None]


@dataclass(frozen=True)
class Limits:
    """Caps applied before parsing. Generous for real submissions, fatal for bombs."""

    max_file_bytes: int = 256 << 20  # on disk, compressed or not
    max_decompressed_bytes: int = 1 << 30
    max_line_bytes: int = 1 << 20
    max_meta_bytes: int = 1 << 20
    # Findings kept per kind; every finding is still counted (see problems.ProblemLog).
    max_problems_per_kind: int = KEEP_PER_KIND
    # Reading stops after this many errors: a file of millions of bad lines is refused in
    # seconds rather than checked to its end (counts are then "at least").
    max_errors: int = 100_000
    # Lines read at most (blank ones too): a TREC run of 100 ids for 100,000 queries fits; a
    # gigabyte of newlines is refused in seconds rather than looped over for minutes.
    max_lines: int = 10_000_000
    # Ids one ranking may hold (the measures stop at 100; more would only cost memory).
    max_ids: int = MAX_IDS


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class InMemory:
    """A file's bytes held in memory (an upload to the scoring service), shown as ``path``.

    The readers take it wherever they take a path, so an upload is validated without being
    written to disk; it answers the few questions they ask of a path (name, suffixes, parent).
    """

    path: PurePosixPath
    data: bytes

    def __str__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def suffixes(self) -> list[str]:
        return self.path.suffixes

    @property
    def parent(self) -> PurePosixPath:
        return self.path.parent


# What the line readers read: a file on disk, or an upload's bytes.
Source = Path | InMemory


def source_size(source: Source) -> int:
    """Bytes in ``source`` (raises ``FileNotFoundError`` for a missing file)."""
    return len(source.data) if isinstance(source, InMemory) else source.stat().st_size


def open_source(source: Source) -> BinaryIO:
    """``source`` opened for binary reading (the caller closes it)."""
    if isinstance(source, InMemory):
        return io.BytesIO(source.data)
    return open(source, "rb")


def as_source(path: PathLike | InMemory) -> Source:
    return path if isinstance(path, InMemory) else Path(path)


def iter_lines(path: PathLike | InMemory, limits: Limits = DEFAULT_LIMITS) -> Iterator[Line]:
    """Yield ``(line number, text, None)`` or ``(line number, None, problem)``.

    Reading stops with a problem when the file, its decompressed content or a line exceeds the
    limits; an overlong line or one that is not UTF-8 is reported and reading goes on.
    """
    path = as_source(path)
    shown = str(path)
    try:
        size = source_size(path)
    except FileNotFoundError:
        yield 0, None, Problem(shown, None, "file", "not found", "missing-file")
        return
    if size > limits.max_file_bytes:
        message = (
            f"{size:,} bytes exceeds the {limits.max_file_bytes:,}-byte limit; "
            f"compress it (predictions.jsonl.gz) or cut rankings to {MAX_IDS} ids"
        )
        yield 0, None, Problem(shown, None, "size", message, "too-large")
        return
    with open_source(path) as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
        yield from _CappedReader(stream, shown, compressed, limits).lines()


class _CappedReader:
    """Reads a byte stream line by line, counting every byte it lets through against the caps."""

    def __init__(self, stream: Any, shown: str, compressed: bool, limits: Limits) -> None:
        self.stream = stream
        self.shown = shown
        self.compressed = compressed
        self.limits = limits
        self.total = 0  # bytes read so far (decompressed)
        self.lineno = 0

    def lines(self) -> Iterator[Line]:
        first = True
        while True:
            try:
                chunk = self.stream.readline(self.limits.max_line_bytes + 1)
            except _READ_ERRORS as exc:
                line = self.lineno + 1
                corrupt = f"corrupt compressed data ({exc})"
                yield line, None, Problem(self.shown, line, "gzip", corrupt, "gzip")
                return
            if not chunk:
                return
            if self._over_budget(chunk):
                yield self.lineno + 1, None, self._bomb()
                return
            self.lineno += 1
            if self.lineno > self.limits.max_lines:
                message = (
                    f"more than {self.limits.max_lines:,} lines; one line per query is expected"
                )
                yield self.lineno, None, Problem(self.shown, None, "size", message, "too-large")
                return
            if len(chunk) > self.limits.max_line_bytes:
                if not self._skip_rest_of_line(chunk):
                    yield self.lineno, None, self._bomb()
                    return
                yield self.lineno, None, self._too_long()
                continue
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                message = f"not valid UTF-8 (byte {exc.start + 1})"
                yield (
                    self.lineno,
                    None,
                    Problem(self.shown, self.lineno, "encoding", message, "encoding"),
                )
                continue
            if first:
                text = text.removeprefix("\ufeff")
                first = False
            yield self.lineno, text, None

    def _over_budget(self, chunk: bytes) -> bool:
        self.total += len(chunk)
        return self.total > self.limits.max_decompressed_bytes

    def _skip_rest_of_line(self, chunk: bytes) -> bool:
        """Read past the end of an overlong line without holding it; False when over budget."""
        while chunk and not chunk.endswith(b"\n"):
            try:
                chunk = self.stream.readline(1 << 16)
            except _READ_ERRORS:
                break
            if self._over_budget(chunk):
                return False
        return True

    def _bomb(self) -> Problem:
        compressed = self.compressed
        return Problem(
            self.shown,
            None,
            "gzip" if compressed else "size",
            f"content exceeds {self.limits.max_decompressed_bytes:,} bytes "
            + ("when decompressed (decompression bomb?)" if compressed else ""),
            "decompression-bomb" if compressed else "too-large",
        )

    def _too_long(self) -> Problem:
        message = f"longer than the {self.limits.max_line_bytes:,}-byte limit"
        return Problem(self.shown, self.lineno, "line", message, "line-too-long")


def detect_format(
    path: PathLike | InMemory, limits: Limits = DEFAULT_LIMITS
) -> Literal["jsonl", "trec"]:
    """``jsonl`` when the first non-blank line starts with ``{``, ``trec`` when it has 6 fields."""
    for _, text, problem in iter_lines(path, limits):
        if problem is not None:
            break
        assert text is not None
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith("{"):
            return "jsonl"
        if len(stripped.split()) == 6:
            return "trec"
        break
    return "jsonl"
