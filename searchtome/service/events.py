"""The organiser's log: every event an organiser must see, in the database and in SRV/events.log.

The database is the record every process shares (web, workers on other machines, the CLI);
the file in the server home mirrors it, one line per event, for ``tail -f``. ``server log``
reads the database.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.service import store
from searchtome.service.db import submissions, write
from searchtome.service.kinds import Event
from searchtome.service.tables import events

LOG_FILE = "events.log"


def line(at: float, kind: str, subject: str | None, message: str) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    text = " ".join(message.split())
    return f"{stamp} {kind} {subject or '-'}: {text}"


def _append(root: Path | None, text: str) -> None:
    if root is None:
        return
    # One write() of one short line on an O_APPEND file: lines of concurrent processes never
    # interleave. A full disk loses the file's line, not the database's record.
    try:
        fd = os.open(root / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, (text + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def add(conn: Connection, kind: Event, subject: str | None, message: str) -> str:
    """Record in the caller's transaction; returns the line (for :func:`mirror`)."""
    at = time.time()
    conn.execute(events.insert().values(at=at, kind=kind.value, subject=subject, message=message))
    return line(at, kind.value, subject, message)


def mirror(root: Path | None, lines: list[str]) -> None:
    for text in lines:
        _append(root, text)


def record(engine: Engine, root: Path | None, kind: Event, subject: str | None, msg: str) -> str:
    with write(engine) as conn:
        text = add(conn, kind, subject, msg)
    mirror(root, [text])
    return text


def read(engine: Engine, kind: str | None = None, limit: int | None = None) -> list[str]:
    query = sa.select(events).order_by(events.c.id.desc())
    if kind:
        query = query.where(events.c.kind == kind)
    if limit:
        query = query.limit(limit)
    with engine.connect() as conn:
        rows = list(conn.execute(query))
    return [line(r.at, r.kind, r.subject, r.message) for r in reversed(rows)]


def fail_exhausted(engine: Engine, root: Path | None) -> list[str]:
    """Put back expired jobs (as a worker does before claiming) and log those that failed."""
    now = time.time()
    dead = (
        (submissions.c.state == "scoring")
        & (submissions.c.lease_until < now)
        & (submissions.c.attempts >= store.MAX_ATTEMPTS)
    )
    with engine.connect() as conn:  # a read first: most polls find nothing to fail
        if conn.execute(sa.select(submissions.c.id).where(dead).limit(1)).first() is None:
            return []
    with write(engine) as conn:
        dying = list(
            conn.execute(sa.select(submissions.c.public_id, submissions.c.claimed_by).where(dead))
        )
        store.requeue_expired(conn, now)
        lines = [
            add(
                conn,
                Event.JOB_FAILED,
                r.public_id,
                f"its scoring stopped {store.MAX_ATTEMPTS} times without finishing (last "
                f"worker {r.claimed_by}); see the worker log, fix, then "
                f"`searchtome server requeue --home SRV {r.public_id}`",
            )
            for r in dying
        ]
    mirror(root, lines)
    return lines
