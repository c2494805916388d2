"""The leaderboard computed once per change and kept in the database (the ``boards`` table).

Computing the board costs seconds with hundreds of runs (every run tested against the top), so
readers never compute it: ``GET /`` and ``/api/leaderboard`` serve the stored document. Whoever
changes what the board shows refreshes it: a scoring worker after its jobs (at once when the
queue is empty, else at most every :data:`BUSY_REFRESH_SECONDS`), ``POST .../final`` after a
mark, ``server revoke`` and ``server reveal``. The document is stored with the key of the rows
it was computed from (:func:`store.board_key`): a worker that finds the key moved refreshes it,
so a refresh lost to a crash or a race is redone on the next idle poll.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.service import store
from searchtome.service.board import Scopes, TestMemo, leaderboard, runs_from_rows
from searchtome.service.db import boards, write
from searchtome.service.home import ServerSettings

log = logging.getLogger(__name__)
BOARD = "leaderboard"
BUSY_REFRESH_SECONDS = 20.0  # while jobs keep coming, the board lags the scores by this at most


@dataclass(frozen=True)
class Cached:
    key: str
    document: str  # the JSON served as is
    computed_at: float
    tests: str | None = None  # the TestMemo's entries, JSON (never served)


def current_key(conn: Connection) -> str:
    return json.dumps(list(store.board_key(conn)), default=str)


def stored_key(conn: Connection) -> str | None:
    return conn.execute(sa.select(boards.c.key).where(boards.c.name == BOARD)).scalar()


def stored(conn: Connection) -> Cached | None:
    row = conn.execute(
        sa.select(boards.c.key, boards.c.document, boards.c.computed_at).where(
            boards.c.name == BOARD
        )
    ).first()
    return None if row is None else Cached(row.key, row.document, row.computed_at)


def compute(engine: Engine, scopes: Scopes, settings: ServerSettings) -> Cached:
    """The board of the rows as they are now, with their key (read in one transaction); the
    stored board's tests against the top are reused where still valid."""
    with engine.connect() as conn, conn.begin():
        key = current_key(conn)
        rows = store.scored_rows(conn)
        revealed = store.get_flag(conn, store.REVEALED) == "yes"
        raw = conn.execute(sa.select(boards.c.tests).where(boards.c.name == BOARD)).scalar()
    memo = TestMemo(json.loads(raw) if raw else {})
    document = leaderboard(runs_from_rows(rows), scopes, settings, revealed, memo)
    return Cached(key, json.dumps(document), time.time(), json.dumps(memo.kept()))


def save(engine: Engine, board: Cached) -> None:
    with write(engine) as conn:
        conn.execute(boards.delete().where(boards.c.name == BOARD))
        conn.execute(
            boards.insert().values(
                name=BOARD,
                key=board.key,
                document=board.document,
                tests=board.tests,
                computed_at=board.computed_at,
            )
        )


def refresh(engine: Engine, scopes: Scopes, settings: ServerSettings) -> bool:
    """Recompute and store the board when its rows changed; ``True`` when it did."""
    with engine.connect() as conn:
        if stored_key(conn) == current_key(conn):
            return False
    started = time.perf_counter()
    board = compute(engine, scopes, settings)
    save(engine, board)
    log.info("leaderboard refreshed in %.2f s", time.perf_counter() - started)
    return True


def refresh_home(root: Any) -> None:
    """Refresh the board of the server home ``root`` (the admin commands' changes)."""
    from searchtome.dataset.loader import load
    from searchtome.service.db import make_engine
    from searchtome.service.home import open_home

    home = open_home(root)
    engine = make_engine(home.settings.db, home.settings.busy_timeout_ms)
    try:
        refresh(engine, Scopes.of(load(home.public), home.settings), home.settings)
    finally:
        engine.dispose()
