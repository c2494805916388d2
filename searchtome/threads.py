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
  the console script first thing, and by child processes through :func:`child_env`.

``SEARCHTOME_THREADS=N`` fixes the count everywhere (a baseline's own ``threads`` setting,
when not 0, wins over it). The count never changes results: the generative baselines and
the encoders give identical outputs for any thread count (tested), so choosing it from the
machine's load is safe.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from searchtome.errors import SearchTomeError

log = logging.getLogger(__name__)

ENV_THREADS = "SEARCHTOME_THREADS"
# Sleep instead of spinning: libgomp reads OMP_WAIT_POLICY, Intel's runtime KMP_BLOCKTIME.
WAIT_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}
_SAMPLES = 5
_SAMPLE_GAP_S = 0.02


def quiet_waiting() -> None:
    """Make idle OpenMP threads sleep; a no-op for settings the user already chose."""
    for key, value in WAIT_ENV.items():
        os.environ.setdefault(key, value)


def usable_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cpus = min(cpus, max(1, int(quota + 0.5)))
    return max(1, cpus)


def _cgroup_quota() -> float | None:
    try:
        text = Path("/sys/fs/cgroup/cpu.max").read_text().split()
    except OSError:
        return None
    if len(text) != 2 or text[0] == "max":
        return None
    try:
        return int(text[0]) / int(text[1])
    except (ValueError, ZeroDivisionError):
        return None


def busy_elsewhere() -> float:
    """How many CPUs other processes keep busy now: runnable tasks, less the one asking.

    ``/proc/stat``'s ``procs_running`` is instantaneous (the load average lags by a minute,
    which is too slow for a job that starts beside another one), so it is sampled a few times.
    """
    samples = []
    for i in range(_SAMPLES):
        running = _procs_running()
        if running is None:
            return max(0.0, os.getloadavg()[0] - 1.0) if hasattr(os, "getloadavg") else 0.0
        samples.append(running - 1)
        if i + 1 < _SAMPLES:
            time.sleep(_SAMPLE_GAP_S)
    return max(0.0, sum(samples) / len(samples))


def _procs_running() -> int | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running "):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def env_threads() -> int | None:
    """``SEARCHTOME_THREADS`` as a positive int, None when unset; a clear error when malformed."""
    raw = os.environ.get(ENV_THREADS, "").strip()
    if not raw or raw == "0":
        return None
    if not raw.isdigit():
        raise SearchTomeError(f"{ENV_THREADS}={raw!r}: expected a positive whole number")
    return int(raw)


def choose_threads(requested: int = 0) -> int:
    """The thread count for a torch workload: ``requested`` if > 0, else the env, else the load."""
    if requested > 0:
        return requested
    fixed = env_threads()
    if fixed is not None:
        return fixed
    cpus = usable_cpus()
    return max(1, min(cpus, round(cpus - busy_elsewhere())))


def use_torch_threads(requested: int = 0) -> int:
    """Set torch's intra-op threads from :func:`choose_threads`; returns the count used."""
    import torch

    n = choose_threads(requested)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    log.debug("torch uses %d thread(s) (usable CPUs %d)", n, usable_cpus())
    return n


def child_env(threads: int | None = None) -> dict[str, str]:
    """Environment entries for a child process that runs torch (e.g. the local LLM server)."""
    env = dict(WAIT_ENV)
    for key in WAIT_ENV:
        if key in os.environ:
            env[key] = os.environ[key]
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env
