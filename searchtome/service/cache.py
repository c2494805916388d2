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

from searchtome.service import standings, store
from searchtome.service.board import Scopes, TestMemo, runs_from_rows
from searchtome.service.db import boards, flags, write
from searchtome.service.home import ServerSettings
from searchtome.service.kinds import ScoreMode

log = logging.getLogger(__name__)
BOARD = "leaderboard"
BUSY_REFRESH_SECONDS = 20.0  # while jobs keep coming, the board lags the scores by this at most
REFRESHING = "board_refreshing"  # flag: which worker refreshes the board, since when
TURN_SECONDS = 120.0  # a worker's turn; one that died mid-refresh is taken over after it


@dataclass(frozen=True)
class Cached:
    key: str
    document: str  # the JSON served as is
    computed_at: float
    tests: str | None = None  # the TestMemo's entries, JSON (never served)


def current_key(conn: Connection, now: float | None = None) -> str:
    """What the board depends on: the scored rows, finals, revocations, reveal, and the
    competition's state at ``now`` (which phase is open and shows scores, the freeze, the
    Ladder's releases), so a phase opening or closing moves the key as a new score does."""
    state = standings.state_key(conn, time.time() if now is None else now)
    return json.dumps([list(store.board_key(conn)), list(state)], default=str)


def stored_key(conn: Connection) -> str | None:
    return conn.execute(sa.select(boards.c.key).where(boards.c.name == BOARD)).scalar()


def stored_at(conn: Connection) -> float | None:
    """When any process last stored the board (``time.time()``), or ``None``."""
    return conn.execute(sa.select(boards.c.computed_at).where(boards.c.name == BOARD)).scalar()


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
    if settings.public_scores == ScoreMode.LADDER:  # release the runs the Ladder now shows
        standings.settle(engine, scopes, settings.ladder_margin)
    with engine.connect() as conn, conn.begin():
        key = current_key(conn)
        rows = store.scored_rows(conn)
        revealed = store.get_flag(conn, store.REVEALED) == "yes"
        ctx = standings.read_context(conn)
        raw = conn.execute(sa.select(boards.c.tests).where(boards.c.name == BOARD)).scalar()
    memo = TestMemo(json.loads(raw) if raw else {})
    runs = runs_from_rows(rows, anonymous=settings.anonymous and not revealed)
    del rows  # the packed scores: the runs hold them unpacked from here
    document = standings.competition_board(runs, ctx, scopes, settings, revealed, memo)
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


def _take_turn(engine: Engine, who: str) -> bool:
    """Whether ``who`` may refresh now: no other worker is refreshing (one that took its turn
    less than :data:`TURN_SECONDS` ago), so two workers do not compute the same board side by
    side; a worker that died mid-refresh holds the turn that long at most."""
    now = time.time()
    try:
        with write(engine) as conn:
            held = store.get_flag(conn, REFRESHING)
            if held:
                holder, _, at = held.rpartition(" ")
                if holder != who and float(at) > now - TURN_SECONDS:
                    return False
            conn.execute(flags.delete().where(flags.c.name == REFRESHING))
            conn.execute(flags.insert().values(name=REFRESHING, value=f"{who} {now}"))
    except sa.exc.IntegrityError:  # another worker inserted its turn first (PostgreSQL)
        return False
    return True


def refresh(
    engine: Engine, scopes: Scopes, settings: ServerSettings, worker: str | None = None
) -> bool:
    """Recompute and store the board when its rows changed; ``True`` when it did.

    A scoring ``worker`` first takes its turn (see :func:`_take_turn`); the web process and the
    admin commands refresh at once, since they answer after their own change."""
    with engine.connect() as conn:
        if stored_key(conn) == current_key(conn):
            return False
    if worker is not None and not _take_turn(engine, worker):
        return False
    started = time.perf_counter()
    try:
        board = compute(engine, scopes, settings)
        save(engine, board)
    finally:
        if worker is not None:  # the turn ends with the refresh: the next change is anyone's
            with write(engine) as conn:
                conn.execute(
                    flags.delete().where(
                        flags.c.name == REFRESHING, flags.c.value.startswith(f"{worker} ")
                    )
                )
    log.info("leaderboard refreshed in %.2f s", time.perf_counter() - started)
    return True


def refresh_after_change(engine: Engine, scopes: Scopes, settings: ServerSettings) -> bool:
    """Refresh after a change that is already recorded (a final mark, a hidden run, a revoke):
    a failure here (a busy database) must not report the change as failed, so it is logged,
    and the workers' next idle poll refreshes the board instead. ``False`` when it failed."""
    try:
        refresh(engine, scopes, settings)
    except Exception as exc:
        log.warning("leaderboard not refreshed now (%s); a scoring worker will do it", exc)
        return False
    return True


def refresh_home(root: Any) -> None:
    """Refresh the board of the server home ``root`` (the admin commands' changes)."""
    from searchtome.dataset.loader import load
    from searchtome.service.db import make_engine
    from searchtome.service.home import open_home

    home = open_home(root)
    engine = make_engine(home.settings.db, home.settings.busy_timeout_ms)
    try:
        refresh_after_change(engine, Scopes.of(load(home.public), home.settings), home.settings)
    finally:
        engine.dispose()
