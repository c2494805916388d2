"""What keeps one client from holding the web process: body clocks, body caps, team slots.

* **Body clock**: a request body must arrive within a deadline and, after a grace period, at a
  minimum average rate; a stalled body is cut while it waits, not when its next byte comes.
* **Body cap**: every request other than an upload may send at most :data:`SMALL_BODY_BYTES`
  (``POST /api/submissions/ID/final`` included); uploads have their own cap (``--upload-max-mb``).
* **Team slots**: at most ``team_uploads`` uploads of one team in flight per web process, fewer
  than the process's ``upload_slots``, so one team never holds every slot.
* **Body places**: an upload's body is received before it takes one of the process's upload
  slots (so a slow body holds no slot), each file part spooled to a temporary file past
  :data:`SPOOL_BYTES`; at most ``upload_bodies`` bodies are received at once per web process,
  which bounds the memory and the temporary disk that bodies in flight take; one more waits
  for a place up to ``upload_body_wait`` seconds, then is refused (503 with ``Retry-After``).
* **Revocation**: a team revoked while its upload streams is cut within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool
from starlette.formparsers import MultiPartParser

from searchtome.service.db import teams
from searchtome.service.refusal import Refused, error

SMALL_BODY_BYTES = 64 << 10  # a final mark is a dozen bytes; nothing else takes a body
SMALL_BODY_SECONDS = 30.0
UPLOAD_PATH = "/api/submissions"
CHECK_EVERY = 1.0  # seconds between looks at the revoked teams while an upload streams
SPOOL_BYTES = 64 << 10  # a file part past this goes to a temporary file while it arrives
RETRY_AFTER = 2  # seconds a client refused for want of a body place is told to wait

Receive = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class Clock:
    """A body's deadline (``timeout`` seconds) and minimum rate (bytes/s after ``grace`` s)."""

    timeout: float
    min_rate: float = 0.0
    grace: float = 0.0

    def due(self, start: float, received: int) -> float:
        """The time by which the next chunk must arrive."""
        end = start + self.timeout
        if self.min_rate > 0:
            end = min(end, start + self.grace + received / self.min_rate)
        return end

    def refusal(self, start: float, received: int, now: float) -> Refused:
        took = now - start
        if took >= self.timeout:
            why = f"the body took over the {self.timeout:g} s limit"
        else:
            why = (
                f"the body arrived at {received / max(took, 1e-9) / 1024:.2f} KiB/s, "
                f"below the minimum of {self.min_rate / 1024:g} KiB/s"
            )
        return Refused(
            408, f"{why} ({received:,} bytes in {took:.0f} s); nothing was accepted; send it again"
        )


def clocked(inner: Receive, clock: Clock, still_allowed: Receive | None = None) -> Receive:
    """``inner`` (an ASGI receive) that raises :class:`Refused` past the clock or when
    ``still_allowed()`` returns a reason to stop (checked about once a second)."""
    start = time.monotonic()
    received = 0
    last_check = start
    finished = False  # after the last body chunk, receive() only waits for a disconnect

    async def check(now: float) -> None:
        nonlocal last_check
        if still_allowed is not None and now - last_check >= CHECK_EVERY:
            last_check = now
            reason = await still_allowed()
            if reason:
                raise Refused(403, reason)

    async def receive() -> Any:
        nonlocal received, finished
        if finished:
            return await inner()
        task = asyncio.ensure_future(inner())
        try:
            while True:
                now = time.monotonic()
                due = clock.due(start, received)
                if now >= due:
                    raise clock.refusal(start, received, now)
                await check(now)
                done, _ = await asyncio.wait({task}, timeout=min(CHECK_EVERY, due - now))
                if done:
                    break
        except BaseException:
            task.cancel()
            raise
        message = task.result()
        received += len(message.get("body", b""))
        finished = message["type"] != "http.request" or not message.get("more_body", False)
        if not finished:
            await check(time.monotonic())
        return message

    return receive


class TeamSlots:
    """Uploads in flight per team in this process; a team at its limit is refused at once."""

    def __init__(self, per_team: int) -> None:
        self.per_team = per_team
        self.active: Counter[int] = Counter()

    @contextlib.contextmanager
    def hold(self, team_id: int, team_name: str) -> Iterator[None]:
        if self.active[team_id] >= self.per_team:
            raise Refused(
                429,
                f"team {team_name!r} already has {self.per_team} uploads in flight; wait for "
                "one to finish before sending another",
            )
        self.active[team_id] += 1
        try:
            yield
        finally:
            self.active[team_id] -= 1
            if self.active[team_id] <= 0:
                del self.active[team_id]


class SpooledParts(MultiPartParser):
    """Starlette's multipart parser with a smaller in-memory spool (its default is 1 MiB): a
    body in flight holds at most this much of each file part in memory, the rest on disk."""

    spool_max_size = SPOOL_BYTES


class BodyPlaces:
    """Upload bodies being received in this process: at most ``limit``; one more waits up to
    ``wait`` seconds for a place (its body unread, so it costs no CPU), then is refused."""

    def __init__(self, limit: int, wait: float) -> None:
        self.limit, self.wait = limit, wait
        self.places = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        try:
            if self.places.locked():  # a wait of 0 refuses at once
                await asyncio.wait_for(self.places.acquire(), max(self.wait, 0.0))
            else:
                await self.places.acquire()
        except TimeoutError:
            raise Refused(
                503,
                f"the server has been receiving {self.limit} uploads at once for {self.wait:g} "
                f"s; nothing was accepted or counted; send it again in {RETRY_AFTER} s",
                headers={"Retry-After": str(RETRY_AFTER)},
            ) from None
        try:
            yield
        finally:
            self.places.release()


class RevokedTeams:
    """The ids of revoked teams, read from the database at most once a second."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ids: frozenset[int] = frozenset()
        self.read_at = -1e9
        self.lock = asyncio.Lock()

    def _read(self) -> frozenset[int]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(teams.c.id).where(teams.c.revoked_at.is_not(None)))
            return frozenset(rows.scalars())

    async def contains(self, team_id: int) -> bool:
        async with self.lock:
            if time.monotonic() - self.read_at >= CHECK_EVERY:
                self.ids = await run_in_threadpool(self._read)
                self.read_at = time.monotonic()
        return team_id in self.ids


class SmallBodies:
    """ASGI middleware: every request but an upload sends at most :data:`SMALL_BODY_BYTES`
    within :data:`SMALL_BODY_SECONDS`; past either it is answered with one JSON line."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (scope["method"] == "POST" and scope["path"] == UPLOAD_PATH):
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > SMALL_BODY_BYTES:
            response = error(413, _too_big(int(length)))
            await response(scope, receive, send)
            return
        timed = clocked(receive, Clock(SMALL_BODY_SECONDS))
        received = 0

        async def capped() -> Any:
            nonlocal received
            message = await timed()
            received += len(message.get("body", b""))
            if received > SMALL_BODY_BYTES:
                raise Refused(413, _too_big(received))
            return message

        await self.app(scope, capped, send)


def _too_big(size: int) -> str:
    return (
        f"request body of {size:,} bytes or more exceeds the {SMALL_BODY_BYTES:,}-byte limit "
        "of everything but an upload"
    )
