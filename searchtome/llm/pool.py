"""Several replicas of one model behind one client: routing, taking a failing one out, taking it
back.

* Routing: a request goes to the replica with the fewest requests in flight (ties: the one
  given first), so a slow replica gets fewer.
* Taking out: the first transport failure (timeout, dropped connection, 429, 5xx) of a replica
  takes it out for an exponential back-off (``backoff(k)`` after ``k`` failures in a row; a
  ``Retry-After`` is a floor). Requests already in flight to it when that happened do not count
  again: their failures are the same outage, and their successes say nothing about the future.
* Taking back: once its back-off has passed a replica is *on probation*: it gets one request at
  a time; a success takes it back fully (counter reset), a failure takes it out for longer. A
  probation request is never sent twice: it is a request that needed an answer anyway.
* Giving up: when every replica has failed ``give_up_after`` times in a row, for at least two
  different requests, the requests that are waiting for one end with :class:`PoolDown` (with
  one replica this is the old per-request "max attempts" rule: about the same waits, the same
  end). One request that fails wherever it goes (a prompt that makes the server answer 500)
  only uses up its own attempts: it says nothing about the replicas, so it never ends the others.

Nothing here sends a request: :class:`searchtome.llm.client.ChatClient` leases a replica with
:meth:`EndpointPool.acquire`, sends, and reports the outcome with :meth:`EndpointPool.release`.
Everything runs on one event loop, so no lock is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class PoolDown(Exception):
    """Every replica failed too many times in a row; ``reason`` is the last failure."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ReplicaStats:
    """What one replica did: for the progress line, the summary and tests."""

    sent: int = 0
    ok: int = 0
    errors: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


@dataclass
class Replica:
    """One endpoint: where it is, and what the pool knows of it."""

    index: int
    base_url: str | None
    host: str
    in_flight: int = 0
    failures: int = 0  # transport failures in a row
    failed_requests: set[int] = field(default_factory=set)  # which requests failed in the row
    out_until: float = 0.0
    generation: int = 0  # bumped each time it is taken out
    probing: bool = False
    stats: ReplicaStats = field(default_factory=ReplicaStats)


@dataclass(frozen=True)
class Lease:
    """One request's use of one replica."""

    replica: Replica
    generation: int
    probe: bool
    requester: int = 0  # identifies the request across its attempts


class EndpointPool:
    """Routes requests over ``replicas``; see the module docstring for the rules.

    ``backoff(k, retry_after)`` is the time out after ``k`` failures in a row.
    """

    def __init__(
        self,
        replicas: Sequence[Replica],
        backoff: Callable[[int, float | None], float],
        give_up_after: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not replicas:
            raise ValueError("a pool needs at least one replica")
        self.replicas = list(replicas)
        self._backoff = backoff
        self._give_up_after = give_up_after
        self._clock = clock
        self._changed: asyncio.Event | None = None
        self._waiting: list[int] = []  # requesters waiting in acquire, in arrival order
        self._last_reason = "no attempt"
        self.started = clock()

    # -- leasing ---------------------------------------------------------------------------------
    def _pick(self, now: float, requester: int) -> Lease | None:
        best: Replica | None = None
        for r in self.replicas:
            if r.out_until > now or (r.failures and r.probing):
                continue  # out, or on probation with its one request in flight
            if best is None or r.in_flight < best.in_flight:
                best = r
        if best is None:
            return None
        probe = best.failures > 0
        best.probing = best.probing or probe
        best.in_flight += 1
        best.stats.sent += 1
        return Lease(best, best.generation, probe, requester)

    async def acquire(self, requester: int = 0) -> Lease:
        """The replica to send the next request to; waits while none can take it.

        ``requester`` identifies the request (the same value for each of its attempts; ids grow
        in the order requests start). While requests wait, the oldest one leases first, so the
        probe after an outage goes to a request that has waited longest (often a retry), never
        to whichever waiter's timer happens to fire first: the outcome does not depend on timing.
        """
        lease = self._pick(self._clock(), requester) if not self._waiting else None
        if lease is not None:
            return lease
        self._waiting.append(requester)
        try:
            while True:
                now = self._clock()
                if requester == min(self._waiting):
                    lease = self._pick(now, requester)
                    if lease is not None:
                        return lease
                if all(self._down(r) for r in self.replicas):
                    raise PoolDown(self._last_reason)
                back = [r.out_until for r in self.replicas if r.out_until > now]
                timeout = min(back) - now if back else None
                if self._changed is None:
                    self._changed = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)
        finally:
            self._waiting.remove(requester)
            self._notify()  # the next oldest waiter may lease now

    def _down(self, r: Replica) -> bool:
        return r.failures >= self._give_up_after and len(r.failed_requests) > 1

    def _notify(self) -> None:
        if self._changed is not None:
            # Wake every waiter once; later waiters wait on a fresh event.
            self._changed.set()
            self._changed = None

    # -- outcomes --------------------------------------------------------------------------------
    def _end(self, lease: Lease) -> Replica:
        r = lease.replica
        r.in_flight -= 1
        if lease.probe:
            r.probing = False
        self._notify()
        return r

    def succeeded(self, lease: Lease) -> None:
        """The replica answered (even with an error that concerns only this request)."""
        r = self._end(lease)
        r.stats.ok += 1
        if lease.generation == r.generation and r.failures:
            log.info("endpoint %s answers again; taken back", r.host)
            r.failures = 0
            r.failed_requests.clear()

    def failed(self, lease: Lease, reason: str, retry_after: float | None = None) -> None:
        """A transport failure: take the replica out unless this outage was already seen."""
        r = self._end(lease)
        r.stats.errors += 1
        r.stats.by_reason[reason] = r.stats.by_reason.get(reason, 0) + 1
        self._last_reason = reason
        if lease.generation != r.generation:
            return  # sent before the replica was taken out: the same outage
        r.failures += 1
        r.failed_requests.add(lease.requester)
        r.generation += 1
        delay = self._backoff(r.failures, retry_after)
        r.out_until = self._clock() + delay
        log.info(
            "endpoint %s failed (%s), %d in a row; out for %.2fs", r.host, reason, r.failures, delay
        )

    def cancelled(self, lease: Lease) -> None:
        """The request was abandoned (the batch was cancelled): no verdict on the replica."""
        r = self._end(lease)
        r.stats.sent -= 1

    # -- reporting -------------------------------------------------------------------------------
    def describe(self) -> str:
        """One line for a progress bar: per replica, answers per second and errors."""
        now = self._clock()
        elapsed = max(now - self.started, 1e-9)
        parts = []
        for r in self.replicas:
            text = f"{r.host} {r.stats.ok / elapsed:.1f}/s"
            if r.stats.errors:
                text += f" {r.stats.errors} err"
            if r.out_until > now:
                text += f" (out {r.out_until - now:.0f}s)"
            parts.append(text)
        return " | ".join(parts)
