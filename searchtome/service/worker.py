"""A scoring worker: claims queued submissions, validates and scores them against the gold.

Run by ``searchtome server run`` (``--workers N`` of them) or alone with ``server worker``.
While a job runs a thread renews its lease; a worker that dies stops renewing and the job is
claimed again by another worker once the lease runs out (see :mod:`searchtome.service.store`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import Any

from searchtome.dataset.blind import with_private
from searchtome.dataset.loader import Dataset, load
from searchtome.service import cache, events, health, memory, store
from searchtome.service.board import Scopes
from searchtome.service.checks import pack_scores, validate
from searchtome.service.db import check_version, make_engine, one_line
from searchtome.service.home import Home
from searchtome.submissions import Limits

log = logging.getLogger(__name__)
# Seconds a worker sleeps right after claiming a job: lets the fault tests kill it mid-job.
PAUSE_ENV = "SEARCHTOME_SERVER_PAUSE_AFTER_CLAIM"


def limits_of(home: Home) -> Limits:
    s = home.settings
    return Limits(
        max_file_bytes=s.upload_max_bytes, max_decompressed_bytes=s.max_decompressed_bytes
    )


class Worker:
    def __init__(self, home: Home) -> None:
        memory.give_back()
        self.home = home
        self.engine = make_engine(home.settings.db, home.settings.busy_timeout_ms)
        check_version(self.engine, str(home.root))
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.dataset: Dataset = with_private(load(home.public), home.private)
        self.limits = limits_of(home)
        self.scopes = Scopes.of(self.dataset, home.settings)
        self.board_at = 0.0  # when this worker last refreshed the board (monotonic)
        self.board_cost = 0.0  # seconds that refresh took

    def _keep_alive(self, job: store.Job, stop: threading.Event) -> None:
        lease = self.home.settings.lease_seconds
        while not stop.wait(lease / 3):
            if not store.heartbeat(self.engine, job, self.name, lease):
                log.warning("%s: lost the lease of %s", self.name, job.public_id)
                return

    def run_one(self) -> bool:
        """Score one queued job; ``False`` when the queue was empty."""
        events.fail_exhausted(self.engine, self.home.root)  # logged before claim fails them
        wall, cpu = time.perf_counter(), time.process_time()
        job = store.claim(self.engine, self.name, self.home.settings.lease_seconds)
        if job is None:
            return False
        log.info(
            "%s: claimed %s (attempt %d, %s bytes)",
            self.name,
            job.public_id,
            job.attempt,
            f"{len(job.predictions):,}",
        )
        blob, counts, error = self._score(job)
        done = store.finish(self.engine, job, self.name, scores=blob, counts=counts, error=error)
        if not done:
            log.warning(
                "%s: %s was claimed by another worker; result dropped", self.name, job.public_id
            )
            return True
        log.info(
            "%s: %s %s in %.2f s (%.2f s CPU)",
            self.name,
            job.public_id,
            "scored" if error is None else "rejected",
            time.perf_counter() - wall,
            time.process_time() - cpu,
        )
        return True

    def _score(self, job: store.Job) -> tuple[bytes | None, dict[str, Any] | None, str | None]:
        """Validate and score one claimed job, its lease kept alive meanwhile."""
        stop = threading.Event()
        beat = threading.Thread(target=self._keep_alive, args=(job, stop), daemon=True)
        beat.start()
        try:
            pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
            if pause:
                time.sleep(pause)
            split = self.home.settings.split
            report, error = validate(
                job.meta.encode(),
                job.predictions_name,
                job.predictions,
                self.dataset,
                split,
                self.limits,
            )
            if error is not None:
                return None, None, error
            return pack_scores(report, self.dataset, split), report.counts.to_dict(), None
        finally:
            stop.set()

    def refresh_board(self, busy: bool) -> None:
        """The board once the queue is empty; while jobs keep coming, at most every
        ``BUSY_REFRESH_SECONDS`` and five times its own cost (scoring keeps 5/6 of the time)."""
        now = time.monotonic()
        gap = max(cache.BUSY_REFRESH_SECONDS, 5 * self.board_cost)
        if busy and (now - self.board_at < gap or self._board_age() < gap):
            return
        try:
            if cache.refresh(self.engine, self.scopes, self.home.settings, self.name):
                self.board_cost = time.monotonic() - now
            self.board_at = now
        except Exception:  # a board refresh that fails is redone on the next poll
            log.exception("%s: refreshing the leaderboard failed", self.name)

    def _board_age(self) -> float:
        """Seconds since any worker stored the board: the busy cadence is the service's, so
        two workers refresh no more often than one (each kept its own clock: twice as often)."""
        with self.engine.connect() as conn:
            at = cache.stored_at(conn)
        return float("inf") if at is None else time.time() - at

    def _beat(self, stop: threading.Event) -> None:
        """The worker's heartbeat row (``/api/health`` counts live workers by it)."""
        started = time.time()
        while True:
            try:
                health.beat(self.engine, self.name, started)
            except Exception as exc:  # a busy database must not end the worker
                log.warning("%s: heartbeat not written (%s)", self.name, one_line(exc))
            if stop.wait(health.BEAT_SECONDS):
                return

    def serve(self, poll: float = 0.5, once: bool = False, parent: int = 0) -> None:
        """Score until stopped (or, with ``once``, until the queue is empty).

        ``parent``: the pid of the ``server run`` that forked this worker; when it is gone
        (killed with -9, say) the worker stops instead of scoring on alone.
        """
        stop = threading.Event()
        threading.Thread(target=self._beat, args=(stop,), daemon=True).start()
        try:
            self._loop(poll, once, parent)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                health.gone(self.engine, self.name)

    def _loop(self, poll: float, once: bool, parent: int) -> None:
        while True:
            if parent and os.getppid() != parent:
                log.warning("%s: `server run` (pid %d) is gone; stopping", self.name, parent)
                return
            try:
                worked = self.run_one()
            except Exception:  # one bad job or a database hiccup must not end the worker
                log.exception("%s: scoring failed; retrying in %.0f s", self.name, poll * 4)
                time.sleep(poll * 4)
                continue
            self.refresh_board(busy=worked)
            if once and not worked:
                return
            if not worked:
                time.sleep(poll)


def run_forked(root: str, parent: int) -> None:
    """The entry point of a worker forked by ``server run``."""
    import signal

    from searchtome.service.home import open_home
    from searchtome.service.supervise import service_logging

    service_logging()  # a restarted worker is spawned: it does not inherit the parent's set-up

    # SIGTERM (server run's shutdown) and Ctrl-C end the worker quietly; a job it held is
    # claimed again once its lease runs out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    Worker(open_home(root)).serve(parent=parent)
