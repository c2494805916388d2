"""CPU threads for torch work: how many to use, and how idle ones wait.

A busy machine is the normal case (a laptop, a shared box, CI running other jobs), so the
defaults are chosen to share it instead of fighting it:

* **How many**: the CPUs this process may run on (affinity and cgroup quota), less the ones
  other processes keep busy right now (runnable tasks sampled from ``/proc/stat``), never
  fewer than one. On an idle 2-core machine that is 2; beside two busy processes it is 1.
* **How they wait**: OpenMP threads that spin at every barrier waiting for a sibling the
  kernel has descheduled turn a fair 2-3x slowdown into 20x or more, so idle threads sleep
  (``OMP_WAIT_POLICY=PASSIVE``, ``KMP_BLOCKTIME=0``). This must be in the environment before
  the OpenMP runtime starts, i.e. before ``import torch``: :func:`quiet_waiting` is called by
  the console script first thing, and child processes get it through :func:`child_env`.

Switches: ``SEARCHTOME_THREADS=N`` fixes the count everywhere (a baseline's own ``threads``
setting, when not 0, wins over it); ``SEARCHTOME_OMP_WAIT=default`` leaves the OpenMP runtime's
own waiting (spinning) in place, which only the before/after benchmark should want. The count
does not change results: the generative baselines' predictions and MiniLM's embeddings are the
same with 1 and 2 threads (tests/test_threads.py), so choosing it from the load is safe.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError

log = logging.getLogger(__name__)

ENV_THREADS = "SEARCHTOME_THREADS"
ENV_WAIT = "SEARCHTOME_OMP_WAIT"
WAIT_CHOICES = ("passive", "default")
# Sleep instead of spinning: libgomp reads OMP_WAIT_POLICY, Intel's runtime KMP_BLOCKTIME.
WAIT_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}
PROC_STAT = Path("/proc/stat")
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
SAMPLES = 5
SAMPLE_GAP_S = 0.02


@dataclass(frozen=True)
class ThreadChoice:
    """How many threads a workload got and why (``source``: config, env or load)."""

    count: int
    source: str
    usable_cpus: int
    busy_elsewhere: float | None = None  # sampled only when the load decided


# Choices made inside :func:`recording` blocks (innermost last), for a run's meta.json.
_RECORDERS: list[list[ThreadChoice]] = []


def wait_policy() -> str:
    """``SEARCHTOME_OMP_WAIT`` checked: ``passive`` (the default) or ``default``."""
    raw = os.environ.get(ENV_WAIT, "").strip().lower() or "passive"
    if raw not in WAIT_CHOICES:
        raise SearchTomeError(
            f"{ENV_WAIT}={os.environ[ENV_WAIT]!r}: expected one of {', '.join(WAIT_CHOICES)}"
        )
    return raw


def quiet_waiting() -> None:
    """Make idle OpenMP threads sleep; leaves alone settings the user already chose.

    Never raises (it runs before the console script can report errors); a malformed
    ``SEARCHTOME_OMP_WAIT`` still gets passive waiting and is reported by the first torch
    workload through :func:`use_torch_threads`.
    """
    if os.environ.get(ENV_WAIT, "").strip().lower() == "default":
        return
    for key, value in WAIT_ENV.items():
        os.environ.setdefault(key, value)


def usable_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cgroup_quota()
    if quota is not None:
        cpus = min(cpus, max(1, int(quota + 0.5)))
    return max(1, cpus)


def cgroup_quota() -> float | None:
    """CPUs allowed by ``cpu.max`` (``"200000 100000"`` → 2.0); None when unlimited or absent."""
    try:
        text = CGROUP_CPU_MAX.read_text().split()
    except OSError:
        return None
    if len(text) != 2 or text[0] == "max":
        return None
    try:
        return int(text[0]) / int(text[1])
    except (ValueError, ZeroDivisionError):
        return None


def read_stat() -> tuple[int | None, int]:
    """``procs_running`` (None when unreadable) and the number of CPUs ``/proc/stat`` covers."""
    try:
        lines = PROC_STAT.read_text().splitlines()
    except OSError:
        return None, os.cpu_count() or 1
    running = None
    cpus = 0
    for line in lines:
        head = line.split(maxsplit=1)[0] if line.strip() else ""
        if head.startswith("cpu") and head[3:].isdigit():
            cpus += 1
        elif head == "procs_running":
            with contextlib.suppress(ValueError, IndexError):
                running = int(line.split()[1])
    return running, cpus or os.cpu_count() or 1


def busy_elsewhere(usable: int | None = None) -> float:
    """How many of our usable CPUs other processes keep busy now.

    ``procs_running`` counts runnable tasks on the whole machine, this one included (hence the
    minus one). It is instantaneous (the load average lags by a minute, too slow for a job that
    starts beside another one), so it is sampled a few times. When this process may use only
    some of the machine's CPUs (a container, a taskset), other tasks are spread over all of
    them, so only our share of them counts.
    """
    usable = usable or usable_cpus()
    samples = []
    online = 1
    for i in range(SAMPLES):
        running, online = read_stat()
        if running is None:
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 1.0
            return max(0.0, load - 1.0)
        samples.append(running - 1)
        if i + 1 < SAMPLES:
            time.sleep(SAMPLE_GAP_S)
    busy = max(0.0, sum(samples) / len(samples))
    return busy * usable / online if online > usable else busy


def env_threads() -> int | None:
    """``SEARCHTOME_THREADS`` as a positive int, None when unset or 0; a clear error when malformed."""
    raw = os.environ.get(ENV_THREADS, "").strip()
    if not raw.isdigit():
        if not raw:
            return None
        raise SearchTomeError(
            f"{ENV_THREADS}={raw!r}: expected a whole number of threads "
            "(0 or unset: chosen from the CPUs and the load)"
        )
    return int(raw) or None


def decide(requested: int = 0) -> ThreadChoice:
    """The thread count: ``requested`` if > 0, else ``SEARCHTOME_THREADS``, else the load."""
    if requested < 0:
        raise SearchTomeError(f"threads={requested}: expected 0 (from the load) or more")
    cpus = usable_cpus()
    if requested > 0:
        return ThreadChoice(requested, "config", cpus)
    fixed = env_threads()
    if fixed is not None:
        return ThreadChoice(fixed, "env", cpus)
    busy = busy_elsewhere(cpus)
    # round(): a CPU counts as taken when other tasks hold it more than half the time.
    count = max(1, min(cpus, round(cpus - busy)))
    return ThreadChoice(count, "load", cpus, round(busy, 2))


def choose_threads(requested: int = 0) -> int:
    """The thread count for a torch workload (see :func:`decide`)."""
    return decide(requested).count


def use_torch_threads(requested: int = 0) -> int:
    """Set torch's intra-op threads from :func:`decide`; returns the count used."""
    import torch

    wait_policy()  # a malformed switch is an error here, inside the command's error handling
    choice = decide(requested)
    if torch.get_num_threads() != choice.count:
        torch.set_num_threads(choice.count)
    for recorder in _RECORDERS:
        recorder.append(choice)
    log.info(
        "torch uses %d thread(s) (%s; usable CPUs %d, busy elsewhere %s)",
        choice.count,
        choice.source,
        choice.usable_cpus,
        choice.busy_elsewhere,
    )
    return choice.count


@contextlib.contextmanager
def recording() -> Iterator[list[ThreadChoice]]:
    """Collect every :func:`use_torch_threads` choice made inside the block."""
    choices: list[ThreadChoice] = []
    _RECORDERS.append(choices)
    try:
        yield choices
    finally:
        _RECORDERS.remove(choices)


def summary(choices: Sequence[ThreadChoice]) -> dict[str, Any]:
    """For meta.json: the counts used, the last choice's reasons and how idle threads waited."""
    out: dict[str, Any] = {
        "counts": sorted({c.count for c in choices}),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "runtime default"),
    }
    if choices:
        last = choices[-1]
        out.update(
            source=last.source, usable_cpus=last.usable_cpus, busy_elsewhere=last.busy_elsewhere
        )
    return out


def child_env(threads: int | None = None) -> dict[str, str]:
    """Environment entries for a child process that runs torch (e.g. the local LLM server).

    The switches are checked here, so a malformed one is an error in the parent, not a child
    that dies at start-up.
    """
    env_threads()
    wait_policy()
    env = {} if os.environ.get(ENV_WAIT, "").strip().lower() == "default" else dict(WAIT_ENV)
    for key in WAIT_ENV:
        if key in os.environ:
            env[key] = os.environ[key]
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env
