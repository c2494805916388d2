"""Data-parallel STAIR/DSI: two real processes under ``accelerate launch`` against one process.

Two processes with ``grad_accum=1`` average two batches per optimizer step, which is what one
process does with ``grad_accum=2``: the adapters must agree (measured: bit for bit on CPU with
gloo, float32; the test allows 1e-6), and so must the training history. Prediction is sharded:
each rank appends its own share to its own partial file, and rank 0 writes one submission
with every test query in split order.

``accelerate launch --cpu --num_processes 2`` would start a single process (accelerate's simple
launcher spawns several only through ``--mpirun_hostfile``), so the test launches with
``--multi_gpu`` (torchrun underneath) and ``--set device=cpu``, the documented CPU command.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.llm_helpers import one_thread, tiny_lm_fixture  # noqa: F401

pytest.importorskip("torch")
pytest.importorskip("accelerate")

import torch
from searchtome.baselines.generative.train import rank_batches

from searchtome.dataset.loader import load

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

# 16 + 14 training questions in batches of 5 → 7 batches: an odd count, so one rank has a
# step without a batch of its own (it must still join the all-reduce).
SETTINGS = {
    "dtype": "float32",
    "device": "cpu",
    "restricted": "allow",
    "max_epochs": 1,
    "batch_size": 5,
    "lora_dropout": 0,  # dropout masks depend on each process's random stream
    "lora_layers": 0,
    "threads": 1,
    "dev_max_queries": 0,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch_two(model: Path, data: Path, out: Path, home: Path) -> None:
    sets = [f"--set={k}={v}" for k, v in {**SETTINGS, "model": model}.items()]
    # `accelerate launch` through this interpreter: a venv layered on another (as in a worktree)
    # has the package but not its console script.
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()),
        "-m", "searchtome.cli", "run", "dsi", "--data", str(data), "--split", "test",
        "--out", str(out), *sets,
    ]  # fmt: skip
    env = {**os.environ, "SEARCHTOME_HOME": str(home), "OMP_NUM_THREADS": "1"}
    # Only a hang should meet this: the launch takes ~60 s idle and took 186 s on a busy 2-core
    # machine, so the limit is several times the slowest time seen, not a near miss.
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


def _adapter(meta: dict, home: Path) -> dict:
    from safetensors.torch import load_file

    folder = meta["run_info"]["notes"]["adapter"].replace("$SEARCHTOME_HOME", str(home))
    return load_file(str(Path(folder) / "adapter_model.safetensors"))


@pytest.mark.slow(seconds=30)  # idle 2-core AMD EPYC
def test_two_processes_train_the_one_process_adapter_and_shard_prediction(
    tiny_lm_dir, tiny_dataset, tmp_path
) -> None:
    from searchtome.baselines.runner import OutputOptions, RunOptions, run_baseline

    one_thread()
    one = run_baseline(
        "dsi",
        tiny_dataset,
        RunOptions("test", overrides={**SETTINGS, "model": str(tiny_lm_dir), "grad_accum": 2}),
        OutputOptions(out=tmp_path / "one"),
    )
    home = tmp_path / "home2"
    home.mkdir()
    _launch_two(tiny_lm_dir, tiny_dataset, tmp_path / "two", home)
    two = tmp_path / "two"
    meta1 = json.loads((one / "meta.json").read_text())
    meta2 = json.loads((two / "meta.json").read_text())
    assert meta2["run_info"]["notes"]["processes"] == 2
    w1, w2 = _adapter(meta1, Path(os.environ["SEARCHTOME_HOME"])), _adapter(meta2, home)
    assert w1.keys() == w2.keys()
    assert any(float(w.abs().max()) > 0 for k, w in w2.items() if "lora_B" in k)  # it trained
    for k in w1:
        torch.testing.assert_close(w2[k], w1[k], atol=1e-6, rtol=0)
    h1, h2 = (m["run_info"]["notes"]["training"] for m in (meta1, meta2))
    assert h2["steps"] == h1["steps"] == 4
    assert [r["dev_r1"] for r in h2["history"]] == [r["dev_r1"] for r in h1["history"]]
    assert h2["history"][0]["train_loss"] == pytest.approx(h1["history"][0]["train_loss"], 1e-9)

    # One submission, every query in split order; the same rankings as one process.
    rows1 = [json.loads(x) for x in (one / "predictions.jsonl").read_text().splitlines()]
    rows2 = [json.loads(x) for x in (two / "predictions.jsonl").read_text().splitlines()]
    split = [q.query_id for q in load(tiny_dataset).queries("test")]
    assert [r["query_id"] for r in rows2] == [r["query_id"] for r in rows1] == split
    for a, b in zip(rows1, rows2, strict=True):
        assert a["leaf_ids"] == b["leaf_ids"]
        assert b["scores"] == pytest.approx(a["scores"], abs=1e-5)  # batches differ per rank
    # Each rank decoded its own half, into its own partial file.
    parts = sorted((home / "baselines" / "dsi" / "predictions").glob("*.jsonl"))
    shares = [{json.loads(x)["q"] for x in p.read_text().splitlines()} for p in parts]
    assert [len(s) for s in shares] == [len(split) // 2] * 2 and set.union(*shares) == set(split)


def test_rank_batches_pad_every_rank_to_the_same_step_count() -> None:
    batches = [[i] for i in range(7)]
    got = [rank_batches(batches, r, 3) for r in range(3)]  # type: ignore[arg-type]
    assert got == [[[0], [3], [6]], [[1], [4], None], [[2], [5], None]]
    assert rank_batches(batches, 0, 1) == batches  # type: ignore[arg-type]


def test_deepspeed_and_fsdp_launches_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop averages LoRA gradients itself; a sharding launch would silently shard nothing."""
    from searchtome.baselines.generative.parallel import start

    from searchtome.errors import SearchTomeError

    monkeypatch.setenv("WORLD_SIZE", "2")
    for switch in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.setenv(switch, "true")
        with pytest.raises(SearchTomeError, match=f"{switch} is set.*--multi_gpu"):
            start("cuda")
        monkeypatch.delenv(switch)
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert start("cpu") == "cpu"  # one process: nothing to join
