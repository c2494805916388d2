"""How many xdist workers ``-n auto`` starts: one more than the usable CPUs, as many as the
memory holds."""

from __future__ import annotations

import pytest

from searchtome import threads
from tests import conftest

GIB = 1 << 30


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch):
    """``machine(cpus, available_gib)``: what the worker count is computed from."""

    def make(cpus: int, available_gib: float) -> None:
        monkeypatch.setattr(threads, "usable_cpus", lambda: cpus)
        monkeypatch.setattr(conftest, "_available_memory", lambda: int(available_gib * GIB))

    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    return make


@pytest.mark.parametrize(
    ("cpus", "gib", "workers"),
    [
        (2, 16, 3),  # the CI box: one worker per core and one for their waits
        (1, 16, 1),  # one CPU: nothing to overlap with but itself
        (16, 64, 8),  # past eight workers the longest test bounds the run
        (16, 5, 2),  # two workers' worth of memory
        (4, 1, 1),  # never none
    ],
)
def test_workers_follow_cpus_and_memory(machine, cpus, gib, workers, pytestconfig) -> None:
    machine(cpus, gib)
    assert conftest.pytest_xdist_auto_num_workers(pytestconfig) == workers


def test_the_environment_still_overrides(machine, monkeypatch, pytestconfig) -> None:
    machine(2, 16)
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert conftest.pytest_xdist_auto_num_workers(pytestconfig) == 5


def test_available_memory_reads_meminfo() -> None:
    assert conftest._available_memory() > 0
