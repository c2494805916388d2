"""The organiser's actions on submissions: requeue a failed job, rescore after a fix, reveal.

Each action is one transaction and one event in the log (:mod:`searchtome.service.events`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from searchtome.errors import SearchTomeError
from searchtome.service import events, store
from searchtome.service.db import flags, submissions, write
from searchtome.service.kinds import Event
from searchtome.service.standings import FROZEN_AT, forget_releases
from searchtome.service.tables import score_history

REQUEUABLE = ("failed", "rejected")
BACK_IN_QUEUE: dict[str, Any] = {
    "state": "queued",
    "attempts": 0,
    "claimed_by": None,
    "lease_until": None,
    "error": None,
}


def _row(conn: Any, public_id: str) -> Any:
    row = conn.execute(
        sa.select(submissions.c.id, submissions.c.state, submissions.c.team_id).where(
            submissions.c.public_id == public_id
        )
    ).first()
    if row is None:
        raise SearchTomeError(
            f"no submission {public_id!r}; `searchtome server log --home SRV` names failed ones"
        )
    return row


def requeue(engine: Engine, root: Path, public_id: str) -> str:
    """Put a failed (or rejected) upload back in the queue, its attempts reset."""
    with write(engine) as conn:
        row = _row(conn, public_id)
        if row.state not in REQUEUABLE:
            hint = "use `server rescore`" if row.state == "scored" else "it is still in the queue"
            raise SearchTomeError(
                f"submission {public_id} is {row.state}; only a failed or rejected one is "
                f"requeued ({hint})"
            )
        conn.execute(submissions.update().where(submissions.c.id == row.id).values(BACK_IN_QUEUE))
        text = events.add(conn, Event.REQUEUED, public_id, f"was {row.state}; queued again")
    events.mirror(root, [text])
    return text


def rescore(engine: Engine, root: Path, public_id: str | None, reason: str) -> int:
    """Queue scored runs again (one, or all with ``None``); their old scores go to history."""
    now = time.time()
    with write(engine) as conn:
        query = sa.select(
            submissions.c.id,
            submissions.c.public_id,
            submissions.c.team_id,
            submissions.c.state,
            submissions.c.scores,
            submissions.c.error,
            submissions.c.scored_at,
        ).where(submissions.c.state.in_(("scored", "rejected")))
        if public_id is not None:
            row = _row(conn, public_id)
            if row.state not in ("scored", "rejected"):
                raise SearchTomeError(
                    f"submission {public_id} is {row.state}; only a scored or rejected run is "
                    "rescored (`server requeue` takes a failed one)"
                )
            query = query.where(submissions.c.id == row.id)
        rows = list(conn.execute(query))
        for r in rows:
            conn.execute(
                score_history.insert().values(
                    submission_id=r.id,
                    state=r.state,
                    scores=r.scores,
                    error=r.error,
                    scored_at=r.scored_at,
                    archived_at=now,
                    reason=reason,
                )
            )
        ids = [r.id for r in rows]
        if ids:
            conn.execute(
                submissions.update().where(submissions.c.id.in_(ids)).values(BACK_IN_QUEUE)
            )
            forget_releases(conn, {r.team_id for r in rows})
        subject = public_id or "all"
        text = events.add(
            conn, Event.RESCORED, subject, f"{len(ids)} run(s) queued for scoring again: {reason}"
        )
    events.mirror(root, [text])
    return len(ids)


def history(engine: Engine, public_id: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        row = _row(conn, public_id)
        rows = conn.execute(
            sa.select(score_history)
            .where(score_history.c.submission_id == row.id)
            .order_by(score_history.c.id)
        ).mappings()
        return [dict(r) for r in rows]


def reveal(engine: Engine, root: Path, undo: bool) -> None:
    with write(engine) as conn:
        conn.execute(flags.delete().where(flags.c.name == store.REVEALED))
        conn.execute(flags.insert().values(name=store.REVEALED, value="no" if undo else "yes"))
        if not undo and store.get_flag(conn, FROZEN_AT) is None:
            conn.execute(flags.insert().values(name=FROZEN_AT, value=repr(time.time())))
        kind = Event.HIDDEN if undo else Event.REVEALED
        text = events.add(
            conn, kind, None, "private scores hidden" if undo else "private scores revealed"
        )
    events.mirror(root, [text])


def frozen_ranking(root: Path, engine: Engine) -> list[str]:
    """The ranking ``server reveal`` prints: the frozen private table (or, with no private
    part, the public one), as the board shows it."""
    from searchtome.dataset.loader import load
    from searchtome.service.board import Scopes, runs_from_rows
    from searchtome.service.home import open_home
    from searchtome.service.standings import competition_board, read_context

    home = open_home(root)
    scopes = Scopes.of(load(home.public), home.settings)
    with engine.connect() as conn:
        runs = runs_from_rows(store.scored_rows(conn))
        ctx = read_context(conn)
    board = competition_board(runs, ctx, scopes, home.settings, revealed=True)
    table = board.get("private") or board["public"]
    scope = "private" if "private" in board else "public"
    frozen = board.get("frozen_at") or "now"
    lines = [f"{scope} ranking ({table['n_queries']} queries), frozen at {frozen}:"]
    for r in table["rows"]:
        r1 = 100 * r["aggregate"]["R@1"]
        lines.append(f"{r['rank'] or '-':>3}  {r['team']:<24} {r['system']:<32} R@1 {r1:5.1f}")
    return lines
