"""``GET /api/health``: the queue's age and the live scoring workers, non-ok when stuck.

A worker writes a heartbeat row every :data:`BEAT_SECONDS` (``workers`` table) and counts as
live while its last beat is under :data:`LIVE_SECONDS` old, so workers on other machines count
too. The answer turns 503, with the reason, once the oldest queued upload has waited longer than
``health_max_queue_age`` (``server init --health-max-queue-age``): the sign that no worker is
scoring, whatever the cause. No live worker alone is not an error (``--workers 0`` is allowed).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from searchtome.service.db import submissions, workers, write

BEAT_SECONDS = 5.0
LIVE_SECONDS = 3 * BEAT_SECONDS


def beat(engine: Engine, name: str, started_at: float) -> None:
    """Record that worker ``name`` is alive now."""
    with write(engine) as conn:
        conn.execute(workers.delete().where(workers.c.name == name))
        conn.execute(workers.insert().values(name=name, started_at=started_at, seen_at=time.time()))


def gone(engine: Engine, name: str) -> None:
    """A worker stopping cleanly removes its row; a killed one's row just grows old."""
    with write(engine) as conn:
        conn.execute(workers.delete().where(workers.c.name == name))
        conn.execute(workers.delete().where(workers.c.seen_at < time.time() - 86400))


def report(engine: Engine, max_age: float) -> dict[str, Any]:
    now = time.time()
    with engine.connect() as conn:
        queued, oldest = conn.execute(
            sa.select(sa.func.count(), sa.func.min(submissions.c.created_at)).where(
                submissions.c.state == "queued"
            )
        ).one()
        scoring = conn.execute(
            sa.select(sa.func.count()).where(submissions.c.state == "scoring")
        ).scalar()
        live = conn.execute(
            sa.select(workers.c.name)
            .where(workers.c.seen_at > now - LIVE_SECONDS)
            .order_by(workers.c.name)
        ).scalars()
        names = list(live)
    age = round(now - oldest, 1) if oldest is not None else 0.0
    out: dict[str, Any] = {
        "ok": age <= max_age,
        "queue": {"queued": queued, "scoring": scoring, "oldest_queued_s": age},
        "max_queue_age_s": max_age,
        "workers": {"live": len(names), "names": names},
    }
    if not out["ok"]:
        out["error"] = (
            f"the oldest queued upload has waited {age:.0f} s, over the {max_age:g} s limit, "
            f"with {len(names)} live scoring worker(s); check `server run`'s log and the workers"
        )
    return out


async def health(request: Request) -> Response:
    service = request.app.state.service
    body = await run_in_threadpool(report, service.engine, service.settings.health_max_queue_age)
    return JSONResponse(body, status_code=200 if body["ok"] else 503)
