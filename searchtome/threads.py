"""CPU threads for torch work: how many to use, and how idle ones wait.

* **How many**: the CPUs this process may run on (its affinity mask, capped by a cgroup CPU
  quota), never fewer than one. The count is a fact of the machine and never of its load: torch
  splits reductions (``sum``, softmax denominators, the loss) and small matrix products between
  its threads, so the last bits of a float result depend on how many there are. DSI trained and
  predicted with 1 and with 2 threads gave different scores (benchmarks/contention.py, AMD EPYC,
  float32: 3 of 40 queries; the issue's Intel Xeon, bfloat16: all 40, 21 rankings). A count that
  followed the load, as it once did (CPUs less the busy ones), made the same command's answer
  depend on what else the machine was running.
* **How they wait**: OpenMP threads that spin at every barrier waiting for a sibling the
  kernel has descheduled turn a fair 2-3x slowdown into 20x or more, so idle threads sleep
  (``OMP_WAIT_POLICY=PASSIVE``, ``KMP_BLOCKTIME=0``). This is what keeps a busy machine
  bearable with the full count. It must be in the environment before the OpenMP runtime starts,
  i.e. before ``import torch``: :func:`quiet_waiting` is called by the console script first
  thing, and child processes get it through :func:`child_env`.

The count is applied the same way whatever decided it (:func:`use_torch_threads` always calls
``torch.set_num_threads``, which also turns MKL's dynamic thread adjustment off), so an
explicit count equal to the default gives the default's results bit for bit. That one call is
the whole setting: it sets OpenMP's count (which oneDNN's CPU kernels also use) and MKL's, in
the calling thread, and torch re-applies it in its own worker threads (autograd). The inter-op
pool is left alone: it only runs ``torch.jit.fork`` tasks, which no workload here uses, and it
can be sized once per process only. ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` (``torchrun`` sets
the first to 1 in every rank) only seed torch's starting count, which the call overrides.

Every path into a torch workload (DSI/STAIR training, dev selection and prediction, in one
process or in each rank of a distributed launch; zero-shot generation) calls
:func:`require_applied` first: a path that forgot :func:`use_torch_threads`, or something that
changed torch's count since, stops with an error instead of giving load- or order-dependent
results.

Switches: ``SEARCHTOME_THREADS=N`` fixes the count everywhere (a baseline's own ``threads``
setting, when not 0, wins over it); it is how to reproduce a run from a machine with another
number of CPUs (meta.json records the count). ``SEARCHTOME_OMP_WAIT=default`` leaves the OpenMP
runtime's own waiting (spinning) in place, which only the before/after benchmark should want.
"""

from __future__ import annotations

import contextlib
import logging
import os
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
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


@dataclass(frozen=True)
class ThreadChoice:
    """How many threads a workload got and why (``source``: config, env or cpus)."""

    count: int
    source: str
    usable_cpus: int


# Choices made inside :func:`recording` blocks (innermost last), for a run's meta.json.
_RECORDERS: list[list[ThreadChoice]] = []
# The count use_torch_threads last set in this process (None: never), for require_applied.
_APPLIED: list[int | None] = [None]


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


def env_threads() -> int | None:
    """``SEARCHTOME_THREADS`` as a positive int, None when unset or 0; a clear error when malformed."""
    raw = os.environ.get(ENV_THREADS, "").strip()
    if not raw.isdigit():
        if not raw:
            return None
        raise SearchTomeError(
            f"{ENV_THREADS}={raw!r}: expected a whole number of threads "
            "(0 or unset: one per usable CPU)"
        )
    return int(raw) or None


def decide(requested: int = 0) -> ThreadChoice:
    """The thread count: ``requested`` if > 0, else ``SEARCHTOME_THREADS``, else the usable CPUs.

    Never the load: the count changes float results (see the module docstring).
    """
    if requested < 0:
        raise SearchTomeError(f"threads={requested}: expected 0 (one per usable CPU) or more")
    cpus = usable_cpus()
    if requested > 0:
        return ThreadChoice(requested, "config", cpus)
    fixed = env_threads()
    if fixed is not None:
        return ThreadChoice(fixed, "env", cpus)
    return ThreadChoice(cpus, "cpus", cpus)


def choose_threads(requested: int = 0) -> int:
    """The thread count for a torch workload (see :func:`decide`)."""
    return decide(requested).count


def use_torch_threads(requested: int = 0) -> int:
    """Set torch's intra-op threads from :func:`decide`; returns the count used."""
    import torch

    wait_policy()  # a malformed switch is an error here, inside the command's error handling
    choice = decide(requested)
    # Always, even when torch already has that count: the call also fixes MKL's dynamic
    # adjustment off, so every path into a workload leaves the runtimes in the same state.
    torch.set_num_threads(choice.count)
    _APPLIED[0] = choice.count
    for recorder in _RECORDERS:
        recorder.append(choice)
    log.info(
        "torch uses %d thread(s) (%s; usable CPUs %d)",
        choice.count,
        choice.source,
        choice.usable_cpus,
    )
    return choice.count


@contextlib.contextmanager
def torch_threads(requested: int = 0) -> Iterator[int]:
    """:func:`use_torch_threads` for the block (yields the count); afterwards torch's count, and
    what :func:`require_applied` expects, are as before (a workload inside another one, e.g. an
    encoder with its own ``threads``, leaves the outer one's setting intact)."""
    import torch

    before, applied = torch.get_num_threads(), _APPLIED[0]
    try:
        yield use_torch_threads(requested)
    finally:
        torch.set_num_threads(before)
        _APPLIED[0] = applied


def require_applied(what: str) -> int:
    """Refuse to start ``what`` (a torch workload) unless :func:`use_torch_threads` set torch's
    threads in this process and nothing changed them since; returns the count."""
    import torch

    applied, now = _APPLIED[0], torch.get_num_threads()
    if applied is None:
        raise SearchTomeError(
            f"internal error: {what} started before searchtome.threads.use_torch_threads set "
            "torch's threads; every path into a torch workload must call it"
        )
    if now != applied:
        raise SearchTomeError(
            f"internal error: {what} would run with {now} torch thread(s), but "
            f"use_torch_threads set {applied}: something changed torch's threads since"
        )
    return now


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
        out.update(source=last.source, usable_cpus=last.usable_cpus)
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
