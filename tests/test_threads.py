"""The thread policy: the count is the usable CPUs whatever the load, its switches, and the
same torch settings on every path into a workload."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from searchtome import threads
from searchtome.errors import SearchTomeError
from tests.fixtures.llm_helpers import tiny_lm_fixture, tiny_run  # noqa: F401


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Set up a pretend machine: ``machine(affinity, cpu_max=None)``."""

    def make(affinity: int, cpu_max: str | None = None) -> None:
        monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(affinity)))
        quota = tmp_path / "cpu.max"
        if cpu_max is None:
            quota.unlink(missing_ok=True)
        else:
            quota.write_text(cpu_max + "\n")
        monkeypatch.setattr(threads, "CGROUP_CPU_MAX", quota)

    monkeypatch.delenv(threads.ENV_THREADS, raising=False)
    return make


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes running for the length of the block.

    They run at the lowest priority: they still keep every idle CPU busy and show in the load
    and the CPU counters (what a load-based policy reads), but yield to the job under test and to
    the suite's other xdist workers instead of tripling their time on a 2-core machine."""
    spin = "import os\nos.nice(19)\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(n)]
    try:
        time.sleep(0.3)  # running by now, as a job started beside them would see them
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_count_is_the_usable_cpus_even_beside_busy_processes(monkeypatch) -> None:
    """The old policy (CPUs less the busy ones) chose fewer threads here, and so gave another
    answer: the count must not follow the load (benchmarks/contention.py)."""
    monkeypatch.delenv(threads.ENV_THREADS, raising=False)
    idle = threads.decide()
    with busy_loops(threads.usable_cpus() + 1):
        loaded = threads.decide()
    assert idle == loaded == threads.ThreadChoice(threads.usable_cpus(), "cpus", idle.usable_cpus)


def test_cgroup_quota_caps_the_cpus(machine) -> None:
    machine(8, cpu_max="150000 100000")  # 1.5 CPUs → 2
    assert threads.usable_cpus() == 2 and threads.choose_threads() == 2
    machine(8, cpu_max="max 100000")
    assert threads.usable_cpus() == 8
    machine(8, cpu_max="50000 100000")  # half a CPU still gets one thread
    assert threads.choose_threads() == 1


def test_config_beats_env_beats_cpus(machine, monkeypatch) -> None:
    machine(4)
    monkeypatch.setenv(threads.ENV_THREADS, "3")
    assert threads.decide() == threads.ThreadChoice(3, "env", 4)
    assert threads.decide(1) == threads.ThreadChoice(1, "config", 4)
    monkeypatch.setenv(threads.ENV_THREADS, "0")  # 0 means "choose", like unset
    assert threads.decide() == threads.ThreadChoice(4, "cpus", 4)


def test_every_path_leaves_torch_in_the_same_state(monkeypatch) -> None:
    """Default, SEARCHTOME_THREADS and a config count equal to it set torch up identically,
    and always call torch.set_num_threads (which also turns MKL's dynamic threads off), even
    when torch already runs that many: no path skips a setting another applies."""
    torch = pytest.importorskip("torch")
    calls: list[int] = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (calls.append(n), real(n))[1])
    monkeypatch.delenv(threads.ENV_THREADS, raising=False)
    before = torch.get_num_threads()
    try:
        cpus = threads.usable_cpus()
        states = []
        for env, requested in ((None, 0), (str(cpus), 0), (None, cpus)):
            if env is None:
                monkeypatch.delenv(threads.ENV_THREADS, raising=False)
            else:
                monkeypatch.setenv(threads.ENV_THREADS, env)
            assert threads.use_torch_threads(requested) == cpus
            states.append((torch.get_num_threads(), torch.get_num_interop_threads()))
        assert calls == [cpus] * 3 and len(set(states)) == 1
    finally:
        real(before)


@pytest.mark.parametrize("value", ["two", "-1", "1.5"])
def test_bad_thread_switch_is_one_clear_error(machine, monkeypatch, value) -> None:
    machine(2)
    monkeypatch.setenv(threads.ENV_THREADS, value)
    with pytest.raises(SearchTomeError, match=rf"SEARCHTOME_THREADS='{value}': expected a whole"):
        threads.choose_threads()
    with pytest.raises(SearchTomeError, match="SEARCHTOME_THREADS"):
        threads.child_env()
    monkeypatch.delenv(threads.ENV_THREADS)
    with pytest.raises(SearchTomeError, match="threads=-2"):
        threads.decide(-2)


def test_bad_switch_through_the_console_script(tiny_dataset, tmp_path, monkeypatch, capsys):
    from searchtome.cli import main

    monkeypatch.setenv(threads.ENV_THREADS, "lots")
    args = ["run", "dsi", "--data", str(tiny_dataset), "--out", str(tmp_path / "run")]
    args += ["--set", "restricted=exclude"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "searchtome: error: SEARCHTOME_THREADS='lots': expected a whole number of threads "
        "(0 or unset: one per usable CPU)"
    ]
    monkeypatch.delenv(threads.ENV_THREADS)
    monkeypatch.setenv(threads.ENV_WAIT, "spin")
    assert main(args) == 1
    assert "SEARCHTOME_OMP_WAIT='spin': expected one of passive, default" in capsys.readouterr().err


def test_waiting_policy_and_child_env(monkeypatch) -> None:
    for key in (*threads.WAIT_ENV, threads.ENV_WAIT):
        monkeypatch.setenv(key, "x")  # recorded, so the test leaves the environment as it was
        monkeypatch.delenv(key)
    from searchtome.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])  # the console script sets passive waiting before anything else
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and os.environ["KMP_BLOCKTIME"] == "0"
    assert threads.child_env(3) == {
        "OMP_WAIT_POLICY": "PASSIVE",
        "KMP_BLOCKTIME": "0",
        "OMP_NUM_THREADS": "3",
        "MKL_NUM_THREADS": "3",
    }
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's own choice is kept
    threads.quiet_waiting()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert threads.child_env()["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.delenv("KMP_BLOCKTIME")
    monkeypatch.setenv(threads.ENV_WAIT, "default")  # the legacy opt-out leaves both unset
    threads.quiet_waiting()
    assert "OMP_WAIT_POLICY" not in os.environ and threads.child_env() == {}


def test_local_server_thread_switch(monkeypatch) -> None:
    from searchtome.llm import server

    monkeypatch.setenv("SEARCHTOME_LOCAL_THREADS", "3")
    assert server.default_threads() == 3
    monkeypatch.setenv("SEARCHTOME_LOCAL_THREADS", "x")
    with pytest.raises(SearchTomeError, match="SEARCHTOME_LOCAL_THREADS='x'"):
        server.default_threads()


def test_dsi_predictions_are_the_same_alone_and_beside_busy_processes(
    tiny_lm_dir, tiny_dataset, tmp_path, monkeypatch
) -> None:
    """The promise benchmarks/contention.py checks at full size: the default policy (no
    ``threads``) gives byte-identical predictions whatever else the machine runs."""
    pytest.importorskip("torch")
    from searchtome.baselines.runner import execute

    overrides = tiny_run(tiny_lm_dir, lr=0.01)
    monkeypatch.delenv(threads.ENV_THREADS, raising=False)
    checked: list[tuple[str, int]] = []
    real_require = threads.require_applied
    monkeypatch.setattr(
        threads, "require_applied", lambda what: checked.append((what, real_require(what)))
    )
    runs, counts, paths = {}, {}, {}
    for label in ("alone", "loaded"):
        checked.clear()
        # A fresh cache each time, so the second run trains its own adapter.
        home = tmp_path / f"home-{label}"
        home.mkdir()
        monkeypatch.setenv("SEARCHTOME_HOME", str(home))
        with (
            busy_loops(threads.usable_cpus() + 1) if label == "loaded" else contextlib.nullcontext()
        ):
            run, _, info = execute("dsi", tiny_dataset, "test", None, overrides, 3)
        assert not info.notes.adapter_reused
        runs[label], counts[label], paths[label] = run, info.threads, list(checked)
    # Training, each epoch's dev selection and prediction each checked the count before running.
    assert {what for what, _ in paths["alone"]} == {"training", "dev selection", "prediction"}
    assert paths["alone"] == paths["loaded"]
    assert {n for _, n in paths["alone"]} == {threads.usable_cpus()}
    assert counts["alone"] == counts["loaded"]
    assert runs["alone"].rankings == runs["loaded"].rankings
    assert runs["alone"].scores == runs["loaded"].scores


def test_minilm_vectors_are_bit_identical_with_one_or_two_threads() -> None:
    pytest.importorskip("transformers")
    from searchtome.baselines.encoders import Encoder, EncoderConfig

    words = [
        "infant",
        "caregiver",
        "sleep",
        "language",
        "play",
        "school",
        "reading",
        "friendship",
        "growth",
    ]
    # Long enough (up to ~200 tokens) that torch splits the matrix products between threads.
    texts = [" ".join(words[(i * 7 + k) % len(words)] for k in range(5 + 9 * i)) for i in range(24)]
    one = Encoder(EncoderConfig(threads=1, cache=False, batch_size=8)).encode_passages(texts)
    two = Encoder(EncoderConfig(threads=2, cache=False, batch_size=8)).encode_passages(texts)
    assert one.tobytes() == two.tobytes()


def test_a_workload_refuses_to_run_without_the_thread_setting(monkeypatch) -> None:
    """require_applied, the check every torch path makes first: an error when no
    use_torch_threads ran, or when torch's count changed since; torch_threads nests."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_APPLIED", [None])
    monkeypatch.delenv(threads.ENV_THREADS, raising=False)
    try:
        with pytest.raises(SearchTomeError, match=r"prediction started before .*use_torch_threads"):
            threads.require_applied("prediction")
        outer = threads.use_torch_threads(0)
        assert threads.require_applied("training") == outer
        with threads.torch_threads(outer + 1) as inner:  # e.g. an encoder with its own count
            assert inner == outer + 1 == threads.require_applied("encoding")
        assert threads.require_applied("prediction") == outer == torch.get_num_threads()
        torch.set_num_threads(outer + 2)  # a path that changed torch's count behind our back
        with pytest.raises(SearchTomeError, match=rf"with {outer + 2} torch thread.*set {outer}"):
            threads.require_applied("dev selection")
    finally:
        torch.set_num_threads(before)


def test_a_dsi_path_that_forgot_the_thread_setting_stops(
    tiny_lm_dir, tiny_dataset, tmp_path, monkeypatch
) -> None:
    """The guard end to end: with use_torch_threads made a no-op (a path that forgot it), DSI
    stops before training instead of running with whatever count torch had."""
    torch = pytest.importorskip("torch")
    from searchtome.baselines.runner import execute

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_APPLIED", [None])
    monkeypatch.setattr(threads, "use_torch_threads", lambda requested=0: before)
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path / "home"))
    overrides = {"model": str(tiny_lm_dir), "dtype": "float32", "device": "cpu"}
    with pytest.raises(SearchTomeError, match="training started before"):
        execute("dsi", tiny_dataset, "test", None, {**overrides, "restricted": "exclude"}, 3)
