"""``GET /api/leaderboard.csv``: the stored board's tables as one CSV, a ``scope`` column apart.

Written from the stored JSON document itself, so every value is the one ``/api/leaderboard``
serves under the competition's ``--public-scores`` mode (rounded there, rounded here); floats
are written with ``repr`` and read back equal.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

SCOPES = ("public", "private", "after_deadline")  # the tables the board may hold, in page order
FIXED = ("scope", "rank", "baseline", "team", "system", "id", "submitted", "final")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def board_csv(document: str) -> str:
    """The CSV of a stored board document: one row per board row, every scope it holds."""
    board = json.loads(document)
    tables = [(s, board[s]) for s in SCOPES if isinstance(board.get(s), dict)]
    rows = [(scope, row) for scope, table in tables for row in table.get("rows", [])]
    measures = [m for m in board.get("measures", []) if any(m in r["aggregate"] for _, r in rows)]
    domains = sorted({d for _, r in rows for d in r.get("per_domain", {})})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*FIXED, *measures, *(f"R@1 {d}" for d in domains)])
    for scope, r in rows:
        fixed = [scope, *(r.get(k) for k in FIXED[1:])]
        per_domain = [r.get("per_domain", {}).get(d, {}).get("R@1") for d in domains]
        values = [*fixed, *(r["aggregate"].get(m) for m in measures), *per_domain]
        writer.writerow([_cell(v) for v in values])
    return out.getvalue()
