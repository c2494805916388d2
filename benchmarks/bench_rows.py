"""A benchmark table's rows, each printed as soon as it is measured; a row that raises is kept
as a failed row with its one-line reason, and the rows after it are still measured.

A long run (``benchmarks/peers.py`` takes half an hour on a busy machine) must not lose the
rows it has finished because a later one fails: a peer's own error (a timeout of the peer's
client, a missing model) is a fact about that row, not a reason to print nothing.
"""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

REASON_CHARS = 200


@dataclass
class Row:
    what: str
    ours: float  # CPU seconds
    peers: dict[str, float | str] = field(default_factory=dict)  # seconds, or why not measured
    note: str = ""
    failed: str = ""  # why the row has no figures (one line); empty for a measured row


def reason(exc: BaseException) -> str:
    """``Type: message`` on one line, cut to :data:`REASON_CHARS`."""
    message = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def run_rows(
    makers: dict[str, Callable[[], Iterable[Row]]], emit: Callable[[Row], None]
) -> list[Row]:
    """Measure each maker's rows in order, handing each to ``emit`` as it finishes.

    A maker that raises (an ``Exception``; Ctrl-C still stops the run) keeps the rows it had
    given and adds one failed row named after it; its traceback goes to stderr.
    """
    rows: list[Row] = []
    for name, make in makers.items():
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        try:
            for row in make():
                rows.append(row)
                emit(row)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            failed = Row(name, math.nan, failed=reason(exc))
            rows.append(failed)
            emit(failed)
    return rows


HEADER = [
    "| what | searchtome CPU s | peer | peer CPU s | ratio | note |",
    "|---|---:|---|---:|---:|---|",
]


def markdown(row: Row) -> list[str]:
    """The row's lines of the table under :data:`HEADER` (one per peer)."""
    if row.failed:
        return [f"| {_cell(row.what)} | | **failed**: {_cell(row.failed)} | | | |"]
    lines = []
    for i, (peer, value) in enumerate(row.peers.items() or {"—": "no peer"}.items()):
        ours = f"{row.ours:.4g}" if i == 0 else ""
        if isinstance(value, str):
            cells = [peer, "", f"skipped: {value}"]
        else:
            cells = [peer, f"{value:.4g}", f"**{row.ours / value:.3g}**"]
        note = row.note if i == 0 else ""
        lines.append(f"| {row.what if i == 0 else ''} | {ours} | {' | '.join(cells)} | {note} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
