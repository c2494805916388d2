"""The vectorised TREC reader: pyarrow's CSV parser and numpy, for well-formed runs.

It reads the common case (single spaces between six fields, ASCII or UTF-8 without exotic
whitespace, numbers that pyarrow and Python agree on, no duplicate ids) at C speed, without a
run-wide dict keyed on (query, doc), and returns ``None`` at the first sign of anything else,
so the line-by-line parser in :mod:`searchtome.submissions.trec` reads the file again and
reports every problem with its line. The two never disagree on a file both accept: what this
one would read differently (a tab, two spaces, ``1_0``, a lone carriage return) sends the file
to the line parser (tests/submissions/test_trec_fast.py checks this file by file).
"""

from __future__ import annotations

import codecs
import gzip
import itertools
import re
import zlib
from dataclasses import dataclass
from typing import Any

from searchtome.io import collector_paused
from searchtome.submissions.lines import InMemory, Limits, Source, open_source, source_size

# Non-ASCII whitespace: str.split() splits on it, pyarrow does not.
_OTHER_WHITESPACE = re.compile(r"[^\S \r\n]")
_COLUMNS = ("qid", "q0", "docno", "rank", "score", "tag")
# Smaller files go to the line parser, which reads them in milliseconds: importing pyarrow
# would cost a one-query `searchtome score` more than the parse.
MIN_BYTES = 1 << 20
_QUERIES_PER_SLICE = 2048
_SCAN_BYTES = 1 << 22  # bytes per numpy pass when checking the raw text


@dataclass
class FastRows:
    """A run read at C speed, ordered by the tie rule, with the validator's facts about it."""

    rankings: dict[str, tuple[str, ...]]
    scores: dict[str, tuple[float, ...]]
    line_of: dict[str, int]
    tags: list[str]
    tied: int  # rankings with two equal adjacent scores
    rank_disagrees: int  # rankings whose rank column is not ascending in score order


def read_fast(path: Source, limits: Limits) -> FastRows | None:
    """The run in ``path``, or ``None`` when the line parser must read it (see module doc)."""
    try:
        if source_size(path) < MIN_BYTES:
            return None
    except OSError:
        return None
    scanned = _scan_file(path, limits)
    if scanned is None:
        return None
    table = _parse(path, *scanned)
    if table is None:
        return None
    columns = _Columns.of(table)
    del table  # the arrow buffers go before the Python objects of the run are made
    with collector_paused():
        return _rows(columns)


def _open(path: Source) -> tuple[Any, bool]:
    raw = open_source(path)
    compressed = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    return (gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw), compressed


def _scan_file(path: Source, limits: Limits) -> tuple[int, bool] | None:
    """One streaming pass over the (decompressed) bytes, never holding the whole file: its line
    count and whether it is gzip, or ``None`` when a cap is hit, gzip is corrupt, or the text
    is not plain (a line over the cap, whitespace pyarrow would split differently, bad UTF-8)."""
    try:
        if source_size(path) > limits.max_file_bytes:
            return None
        stream, compressed = _open(path)
        with stream:
            scan = _Scan(limits)
            while chunk := stream.read(_SCAN_BYTES):
                if not scan.feed(chunk):
                    return None
    except (OSError, EOFError, zlib.error):
        return None
    return (scan.lines(), compressed) if scan.done() else None


class _Scan:
    """The plain-text checks of :func:`_scan_file`, fed chunk by chunk."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.total = 0
        self.newlines = 0
        self.longest = 0
        self.last_newline = -1  # offset of the previous line's newline
        self.last_byte = b""
        self.decoder: Any = None  # an incremental UTF-8 decoder once non-ASCII text is seen

    def feed(self, chunk: bytes) -> bool:
        import numpy as np

        start = self.total
        self.total += len(chunk)
        if self.total > self.limits.max_decompressed_bytes:
            return False
        view = np.frombuffer(chunk, dtype=np.uint8)
        newlines = int(np.count_nonzero(view == 10))
        controls = int(np.count_nonzero(view < 0x20))
        if controls != newlines and not self._only_crlf(chunk, controls - newlines):
            return False
        if newlines:
            self.newlines += newlines
            first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
            inner = 0 if self._short_lines(chunk, last) else _longest_gap(view)
            self.longest = max(self.longest, start + first - self.last_newline, inner)
            self.last_newline = start + last
        self.last_byte = chunk[-1:]
        return self._text_ok(chunk) and self._longest_so_far() <= self.limits.max_line_bytes

    def _short_lines(self, chunk: bytes, last: int) -> bool:
        """Whether every line between the chunk's first and last newline is surely within the
        cap, without the newline positions: when each aligned window of half the cap holds a
        newline, two consecutive newlines are less than two windows apart. (Finding one
        newline per window is ~1/10,000 of the chunk's bytes; the positions cost 2.5 ms/MiB.)"""
        window = self.limits.max_line_bytes // 2
        if window < 4096:  # many windows: the positions are cheaper
            return False
        return all(chunk.find(b"\n", lo, lo + window) >= 0 for lo in range(0, last, window))

    def _only_crlf(self, chunk: bytes, others: int) -> bool:
        # Only CR LF line ends may add to the newlines; a lone CR ends a row for pyarrow but
        # not a line for the line parser, and a tab or form feed splits only for the latter.
        # (A CR LF split between two chunks is a lone CR here: the line parser reads it then.)
        returns = chunk.count(b"\r")
        return others == returns and returns == chunk.count(b"\r\n")

    def _text_ok(self, chunk: bytes) -> bool:
        if self.decoder is None and chunk.isascii():
            return True
        if self.decoder is None:
            self.decoder = codecs.getincrementaldecoder("utf-8")()
            if self.total == len(chunk):
                chunk = chunk.removeprefix(b"\xef\xbb\xbf")  # the BOM both readers skip
        try:
            text = self.decoder.decode(chunk)
        except UnicodeDecodeError:
            return False
        return not _OTHER_WHITESPACE.search(text)

    def _longest_so_far(self) -> int:
        return max(self.longest, self.total - 1 - self.last_newline)

    def done(self) -> bool:
        """Whether the whole file passed: not empty, and its UTF-8 ends on a character."""
        if self.decoder is not None:
            try:
                self.decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                return False
        return self.total > 0

    def lines(self) -> int:
        return self.newlines + (self.last_byte != b"\n")


def _longest_gap(view: Any) -> int:
    """The longest distance between two consecutive newlines of a chunk (its longest inner
    line, newline included)."""
    import numpy as np

    return int(np.diff(np.flatnonzero(view == 10)).max(initial=0))


def _parse(path: Source, lines: int, compressed: bool) -> Any:
    """The columns as a pyarrow table, or ``None`` when a line does not fit the six fields."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    # Small blocks on one thread: peak memory about the table's own size (16 MiB blocks on
    # every core held four times as much), at the same CPU time.
    read = pcsv.ReadOptions(column_names=list(_COLUMNS), block_size=1 << 20, use_threads=False)
    parse = pcsv.ParseOptions(delimiter=" ", quote_char=False, ignore_empty_lines=False)
    # Ids as dictionaries: a run repeats its query ids and tags on every line and its doc ids
    # across queries, so each distinct string is held once.
    types = {"rank": pa.int32(), "score": pa.float64(), "q0": pa.string()}
    types.update({name: pa.dictionary(pa.int32(), pa.string()) for name in ("qid", "docno", "tag")})
    convert = pcsv.ConvertOptions(
        column_types=types,
        null_values=[],
        strings_can_be_null=False,
        include_columns=["qid", "docno", "rank", "score", "tag"],
    )
    try:
        where = pa.py_buffer(path.data) if isinstance(path, InMemory) else str(path)
        with pa.input_stream(where, compression="gzip" if compressed else None) as stream:
            table = pcsv.read_csv(stream, read, parse, convert)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return table if table.num_rows == lines else None


@dataclass
class _Columns:
    """The parsed run as numpy arrays in file order, and the distinct ids as Python strs."""

    qids: list[str]  # distinct, in first-appearance order
    names: list[str]  # distinct doc ids, in first-appearance order
    tags: list[str]
    q: Any  # per row: index into qids
    d: Any  # per row: index into names
    score: Any
    rank: Any

    @classmethod
    def of(cls, table: Any) -> _Columns:
        import numpy as np
        import pyarrow as pa

        # One dictionary per column, in first-appearance order (each block's, then new values).
        table = table.unify_dictionaries()
        qid, doc = table["qid"].combine_chunks(), table["docno"].combine_chunks()
        columns = cls(
            qid.dictionary.to_pylist(),
            doc.dictionary.to_pylist(),
            table["tag"].combine_chunks().dictionary.to_pylist(),
            _numbers(qid.indices, np.int32).copy(),
            _numbers(doc.indices, np.int32).copy(),
            _numbers(table["score"], np.float64).copy(),
            _numbers(table["rank"], np.int32).copy(),
        )
        del table, qid, doc
        pa.default_memory_pool().release_unused()
        return columns


def _rows(c: _Columns) -> FastRows | None:
    """Order each query's ids by the tie rule; ``None`` on non-finite scores or duplicates."""
    import numpy as np

    if not np.isfinite(c.score).all():
        return None
    # The tie rule breaks equal scores by id descending: each distinct id's place in id order
    # (Python's code-point order).
    doc_order = np.empty(len(c.names), dtype=np.int64)
    doc_order[sorted(range(len(c.names)), key=c.names.__getitem__)] = np.arange(len(c.names))
    # Query indices count up in first-appearance order, so a query's first line is where the
    # running maximum of the file-order indices first reaches it.
    seen = np.maximum.accumulate(c.q)
    first_rows = np.flatnonzero(np.r_[True, seen[1:] != seen[:-1]]) + 1
    del seen
    q, d, score, rank = c.q, c.d, c.score, c.rank
    if not _in_tie_rule_order(q, doc_order[d], score):  # runs are usually written sorted
        order = np.lexsort((-doc_order[d], -score, q))
        q, d, score, rank = q[order], d[order], score[order], rank[order]
    if _has_duplicates(q, d, len(c.qids), len(c.names)):
        return None
    same_query = q[1:] == q[:-1]
    group = np.cumsum(np.r_[0, ~same_query])[1:]  # the ranking of each sorted row but the first
    tied = len(np.unique(group[same_query & (score[1:] == score[:-1])]))
    disagree = len(np.unique(group[same_query & (rank[1:] < rank[:-1])]))
    del group, same_query, rank
    rankings, scores = _grouped(c.qids, c.names, q, d, score)
    line_of = dict(zip(c.qids, first_rows.tolist(), strict=True))
    return FastRows(rankings, scores, line_of, c.tags, tied, disagree)


def _grouped(
    qids: list[str], names: list[str], q: Any, d: Any, score: Any
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[float, ...]]]:
    """Each query's ids and scores from rows sorted by query index (first-appearance order,
    so the dicts keep the file's query order); one str object per distinct id, shared."""
    import numpy as np

    ids = np.asarray(names, dtype=object)
    bounds = [*np.flatnonzero(np.r_[True, q[1:] != q[:-1]]).tolist(), len(q)]
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    # A slice of queries at a time, so the flat lists never hold the whole run beside it.
    for first in range(0, len(qids), _QUERIES_PER_SLICE):
        cut = bounds[first : first + _QUERIES_PER_SLICE + 1]
        base = cut[0]
        ranked = ids[d[base : cut[-1]]].tolist()
        values = score[base : cut[-1]].tolist()
        for name, (lo, hi) in zip(qids[first:], itertools.pairwise(cut), strict=False):
            rankings[name] = tuple(ranked[lo - base : hi - base])
            scores[name] = tuple(values[lo - base : hi - base])
    return rankings, scores


def _numbers(column: Any, dtype: Any) -> Any:
    """A null-free numeric arrow column as a numpy array, without a copy where it is one chunk.

    Not ``to_numpy()``: pyarrow imports pandas for it (0.7 s of start-up CPU).
    """
    import numpy as np
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * width)


def _in_tie_rule_order(q: Any, doc_rank: Any, score: Any) -> bool:
    """Whether the rows already are in the order :func:`_rows` sorts them into."""
    import numpy as np

    if not (q[1:] >= q[:-1]).all():
        return False
    same = q[1:] == q[:-1]
    ahead = (score[:-1] > score[1:]) | ((score[:-1] == score[1:]) & (doc_rank[:-1] > doc_rank[1:]))
    return bool(np.all(ahead | ~same))


def _has_duplicates(q: Any, d: Any, n_queries: int, n_docs: int) -> bool:
    """Whether some (query, doc) pair occurs twice, with one flag per possible pair (or one
    sort of int64 keys when that table would be large), never a dict."""
    import numpy as np

    keys = q.astype(np.int64) * n_docs + d
    if n_queries * n_docs <= 64 * len(keys) + (1 << 20):
        flags = np.zeros(n_queries * n_docs, dtype=bool)
        flags[keys] = True
        return int(np.count_nonzero(flags)) != len(keys)
    keys.sort()
    return bool((keys[1:] == keys[:-1]).any())
