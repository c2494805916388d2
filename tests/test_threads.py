"""The thread policy: its arithmetic on given /proc/stat contents, its switches, and that the
thread count changes no result (DSI predictions, MiniLM vectors)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from searchtome import threads
from searchtome.errors import SearchTomeError
from tests.fixtures.llm_helpers import tiny_lm_fixture  # noqa: F401


def _stat(tmp_path: Path, cpus: int, running: int) -> Path:
    lines = ["cpu  10 0 10 100 0 0 0 0 0 0"]
    lines += [f"cpu{i} 5 0 5 50 0 0 0 0 0 0" for i in range(cpus)]
    lines += ["intr 1 2 3", "ctxt 42", f"procs_running {running}", "procs_blocked 0"]
    path = tmp_path / "stat"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Set up a pretend machine: ``machine(online, affinity, running, cpu_max=None)``."""

    def make(online: int, affinity: int, running: int, cpu_max: str | None = None) -> None:
        monkeypatch.setattr(threads, "PROC_STAT", _stat(tmp_path, online, running))
        monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(affinity)))
        quota = tmp_path / "cpu.max"
        if cpu_max is None:
            quota.unlink(missing_ok=True)
        else:
            quota.write_text(cpu_max + "\n")
        monkeypatch.setattr(threads, "CGROUP_CPU_MAX", quota)

    monkeypatch.setattr(threads, "SAMPLE_GAP_S", 0.0)
    monkeypatch.delenv(threads.ENV_THREADS, raising=False)
    return make


@pytest.mark.parametrize(
    ("online", "affinity", "running", "expected"),
    [
        (4, 4, 1, 4),  # idle: only the asking process runs
        (4, 4, 3, 2),  # two busy processes take two of four CPUs
        (2, 2, 3, 1),  # an idle-looking 2-core box beside two busy loops: one thread
        (2, 2, 20, 1),  # never fewer than one
        (8, 2, 9, 1),  # 8 busy tasks spread over 8 CPUs: 2 of them land on our 2
        (8, 2, 3, 2),  # 2 busy tasks over 8 CPUs: half a CPU of ours, rounds to 2 free
    ],
)
def test_count_is_usable_cpus_less_busy_ones(machine, online, affinity, running, expected):
    machine(online, affinity, running)
    choice = threads.decide()
    assert (choice.count, choice.source, choice.usable_cpus) == (expected, "load", affinity)
    assert threads.choose_threads() == expected


def test_cgroup_quota_caps_the_cpus(machine) -> None:
    machine(8, 8, 1, cpu_max="150000 100000")  # 1.5 CPUs → 2
    assert threads.usable_cpus() == 2 and threads.choose_threads() == 2
    machine(8, 8, 1, cpu_max="max 100000")
    assert threads.usable_cpus() == 8
    machine(8, 8, 1, cpu_max="50000 100000")  # half a CPU still gets one thread
    assert threads.choose_threads() == 1


def test_config_beats_env_beats_load(machine, monkeypatch) -> None:
    machine(4, 4, 1)
    monkeypatch.setenv(threads.ENV_THREADS, "3")
    assert threads.decide() == threads.ThreadChoice(3, "env", 4)
    assert threads.decide(1) == threads.ThreadChoice(1, "config", 4)
    monkeypatch.setenv(threads.ENV_THREADS, "0")  # 0 means "choose", like unset
    assert threads.decide().source == "load"


@pytest.mark.parametrize("value", ["two", "-1", "1.5"])
def test_bad_thread_switch_is_one_clear_error(machine, monkeypatch, value) -> None:
    machine(2, 2, 1)
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
        "(0 or unset: chosen from the CPUs and the load)"
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


def test_dsi_predictions_do_not_depend_on_the_thread_count(
    tiny_lm_dir, tiny_dataset, tmp_path, monkeypatch
) -> None:
    pytest.importorskip("torch")
    from searchtome.baselines.runner import execute

    overrides = {
        "model": str(tiny_lm_dir),
        "dtype": "float32",
        "device": "cpu",
        "restricted": "exclude",
        "max_epochs": 1,
        "lr": 0.01,
        "dev_max_queries": 4,
        "lora_layers": 0,
    }
    runs = {}
    for n in (1, 2):
        # A fresh cache each time: `threads` is not part of the adapter's key, so the second
        # run would otherwise reuse the first one's adapter instead of training its own.
        home = tmp_path / f"home-{n}"
        home.mkdir()
        monkeypatch.setenv("SEARCHTOME_HOME", str(home))
        run, _, info = execute("dsi", tiny_dataset, "test", None, {**overrides, "threads": n}, 3)
        assert info["threads"]["counts"] == [n] and info["threads"]["source"] == "config"
        assert not info["notes"].get("adapter_reused")
        runs[n] = run
    assert runs[1].rankings == runs[2].rankings
    for qid, scores in runs[1].scores.items():
        assert runs[2].scores[qid] == pytest.approx(scores, abs=1e-5)


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
