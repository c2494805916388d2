"""``server run``'s scoring workers, watched: a worker that dies is started again, with a log line.

A worker that exits with status 0 was asked to stop (SIGTERM or Ctrl-C: its handlers exit 0)
and is not restarted; any other end (a signal such as SIGKILL, an error status) is a death.

The first workers are forked (they start with the parent's imports done). A replacement is
spawned instead: it is started from the watching thread while the web server runs in the main
one, and forking a process that has several threads running can copy a lock another thread
holds. A worker that keeps dying soon after it starts is restarted after a growing pause
(1, 2, 4 ... 60 s), so a broken set-up does not spin.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess

log = logging.getLogger(__name__)
CHECK_SECONDS = 0.5
SOON = 30.0  # a worker that dies within this many seconds of its start "keeps dying"
MAX_PAUSE = 60.0


def service_logging() -> None:
    """One line per event of the service on stderr, with the UTC date and time."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(
        "%(asctime)s %(levelname)s %(processName)s: %(message)s", "%Y-%m-%dT%H:%M:%SZ"
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    logger = logging.getLogger("searchtome.service")
    logger.handlers[:] = [handler]
    logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
    logger.propagate = False


def _exit_text(code: int | None) -> str:
    if code is None:
        return "stopped"
    return f"killed by signal {-code}" if code < 0 else f"exited with status {code}"


class Supervisor:
    """Keeps ``n`` processes running ``target(*args)``; :meth:`stop` ends them."""

    def __init__(self, n: int, target: Callable[..., None], args: tuple[object, ...]) -> None:
        self.target, self.args = target, args
        self.procs: list[BaseProcess] = []
        self.started: list[float] = []
        self.quick_deaths = [0] * n
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self.restarts = 0
        fork = multiprocessing.get_context("fork")
        for i in range(n):
            self.procs.append(fork.Process(target=target, args=args, name=f"worker-{i}"))
            self.procs[-1].start()
            self.started.append(time.monotonic())

    def start(self) -> None:
        self.thread.start()

    def _restart(self, i: int) -> None:
        old = self.procs[i]
        lived = time.monotonic() - self.started[i]
        self.quick_deaths[i] = self.quick_deaths[i] + 1 if lived < SOON else 0
        pause = min(MAX_PAUSE, 2.0 ** (self.quick_deaths[i] - 1)) if self.quick_deaths[i] else 0
        log.warning(
            "worker-%d (pid %s) %s after %.0f s; restarting it%s",
            i,
            old.pid,
            _exit_text(old.exitcode),
            lived,
            f" in {pause:.0f} s" if pause else "",
        )
        if pause and self.halt.wait(pause):
            return
        spawn = multiprocessing.get_context("spawn")
        new = spawn.Process(target=self.target, args=self.args, name=f"worker-{i}")
        new.start()
        self.procs[i], self.started[i] = new, time.monotonic()
        self.restarts += 1
        log.warning("worker-%d restarted as pid %s", i, new.pid)

    def _watch(self) -> None:
        stopped: set[int] = set()
        while not self.halt.wait(CHECK_SECONDS):
            for i, proc in enumerate(self.procs):
                if i in stopped or proc.is_alive() or self.halt.is_set():
                    continue
                proc.join(timeout=0)
                if proc.exitcode == 0:
                    # Asked to stop (SIGTERM, Ctrl-C on the terminal's process group): a
                    # shutdown, not a crash.
                    log.info("worker-%d (pid %s) stopped; not restarted", i, proc.pid)
                    stopped.add(i)
                    continue
                self._restart(i)

    def stop(self) -> None:
        self.halt.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10)
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(timeout=30)
