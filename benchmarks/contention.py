"""Slowdown of an LLM baseline on a shared machine: DSI alone, then beside busy processes.

    python benchmarks/contention.py [--legacy] [--competitors 2] [--work /tmp/searchtome-contention]

The workload is fixed: ``searchtome run dsi`` (SmolLM2-135M, LoRA training for one epoch, then
beam-search prediction) on a slice of *The Whole Child*: the first ``--leaves`` leaves of its
ToC with 64 training, 16 dev and ``--queries`` test questions about them, imported once from
``../shared/peer/whole-child`` into ``--work`` (CC BY-NC-SA data: it stays outside the repository). Each run gets a fresh cache folder, so
nothing (adapter, predictions) is reused between them; only the converted model is shared.

It runs once alone, then once while ``--competitors`` CPU-bound processes (pure-Python busy
loops, started before and stopped after) compete for the cores. It prints both wall times, the
torch thread counts the runs recorded, whether the predictions are byte-identical, and as its
last line ``slowdown N.Nx`` (loaded / alone). Target: at most 2.5x with two competitors. When
the predictions differ it says on how many queries the scores and the rankings differ and exits
with status 1: the same answer under any load is the benchmark's first promise.

A smaller slice finishes sooner (``--leaves 6 --queries 16``); the first run on an empty cache
also converts SmolLM2 into ``$SEARCHTOME_HOME/models`` (~15 s), which both runs then share.

``--legacy`` reproduces the defaults before searchtome.threads, for the "before" figure: torch's
own thread count (one per usable CPU, fixed through SEARCHTOME_THREADS) and the OpenMP runtime's
default waiting (SEARCHTOME_OMP_WAIT=default: idle threads spin).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "peer" / "whole-child"
# DSI at a size that takes about a minute alone on two idle cores.
WORKLOAD = (
    "max_epochs=1",
    "patience=1",
    "dev_max_queries=8",
    "num_beams=3",
    "lora_layers=4",
)
# Settings the runs must not inherit from the caller: each mode sets its own.
THREAD_ENV = (
    "SEARCHTOME_THREADS",
    "SEARCHTOME_OMP_WAIT",
    "OMP_WAIT_POLICY",
    "KMP_BLOCKTIME",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def say(text: str) -> None:
    print(text, flush=True)


def cli(*args: str, env: dict[str, str] | None = None) -> None:
    """Run the console script through this interpreter; its error line ends the benchmark."""
    cmd = [sys.executable, "-m", "searchtome.cli", "--no-progress", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"contention: {' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")


def imported(source: Path, work: Path) -> Path:
    """The Whole Child as a SearchTome dataset, imported once."""
    out = work / "whole-child"
    if not (out / "manifest.json").is_file():
        if not source.is_dir():
            sys.exit(f"contention: {source}: not found (give --source)")
        say(f"importing {source} ...")
        cli("import", "repro", str(source), "--out", str(out))
    return out


def sliced(full: Path, work: Path, n_leaves: int, per_split: dict[str, int]) -> Path:
    """The first ``n_leaves`` leaves of the ToC, their ancestors, and the first of their questions
    (at most ``per_split[split]`` of each split, in query-id order)."""
    from searchtome.dataset.layout import write_dataset, write_manifest
    from searchtome.dataset.loader import load

    sizes = "-".join(str(per_split[s]) for s in ("train", "dev", "test"))
    out = work / f"slice-{n_leaves}-{sizes}"
    if (out / "manifest.json").is_file():
        return out
    ds = load(full)
    book = ds.book_ids()[0]
    leaves = ds.leaves(book)[:n_leaves]
    keep = {leaf.leaf_id for leaf in leaves}
    nodes = {n.node_id: n for n in ds.toc(book)}
    wanted = set()
    for leaf_id in keep:
        node = nodes.get(leaf_id)
        while node is not None and node.node_id not in wanted:
            wanted.add(node.node_id)
            node = nodes.get(node.parent_id) if node.parent_id else None
    queries = [
        q
        for s in ("train", "dev", "test")
        for q in [q for q in ds.queries(s) if q.leaf_id in keep][: per_split[s]]
    ]
    write_dataset(
        out,
        books=[ds.books[book]],
        toc=[n for n in ds.toc(book) if n.node_id in wanted],
        leaves=leaves,
        queries=queries,
    )
    write_manifest(out, {"name": f"whole-child-first-{n_leaves}-leaves", "source": str(full)})
    return out


def run_env(work: Path, label: str, legacy: bool, threads: str = "") -> dict[str, str]:
    """A fresh cache root sharing only the converted models, and the mode's thread settings."""
    from searchtome.settings import home
    from searchtome.threads import usable_cpus

    models = home() / "models"
    # On an empty cache the first run converts the model into it, through the link.
    models.mkdir(parents=True, exist_ok=True)
    run_home = work / f"home-{label}"
    shutil.rmtree(run_home, ignore_errors=True)
    run_home.mkdir(parents=True)
    (run_home / "models").symlink_to(models, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
    env.update(
        SEARCHTOME_HOME=str(run_home), SEARCHTOME_OFFLINE="1", TOKENIZERS_PARALLELISM="false"
    )
    if legacy:
        env.update(SEARCHTOME_THREADS=str(usable_cpus()), SEARCHTOME_OMP_WAIT="default")
    if threads:
        env["SEARCHTOME_THREADS"] = threads
    return env


def workload(
    data: Path, work: Path, label: str, legacy: bool, sets: list[str], threads: str = ""
) -> tuple[float, bytes, Any]:
    """One DSI run (train + predict) in a child process: wall time, predictions, thread record."""
    out = work / f"run-{label}"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    cli(
        "run", "dsi", "--data", str(data), "--split", "test", "--depth", "10",
        "--out", str(out), "--seed", "42", *sets, env=run_env(work, label, legacy, threads),
    )  # fmt: skip
    wall = time.perf_counter() - start
    meta = json.loads((out / "meta.json").read_text())
    return wall, (out / "predictions.jsonl").read_bytes(), meta["run_info"].get("threads")


def differences(first: bytes, second: bytes) -> str:
    """Which queries two predictions files disagree on, in words (the files differ)."""

    def rows(raw: bytes) -> dict[str, tuple[list[str], list[float]]]:
        out = {}
        for line in raw.decode("utf-8").splitlines():
            row = json.loads(line)
            out[row["query_id"]] = (row["leaf_ids"], row["scores"])
        return out

    a, b = rows(first), rows(second)
    if a.keys() != b.keys():
        return f"the runs predicted different queries ({len(a)} vs {len(b)})"
    ranked = sum(1 for q in a if a[q][0] != b[q][0])
    scored = sum(1 for q in a if a[q][1] != b[q][1])
    return f"scores differ on {scored} of {len(a)} queries, rankings on {ranked}"


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` CPU-bound competitors (a busy loop each), given a moment to be counted as running."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    time.sleep(1.0)
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=10)


def _interrupted(signum: int, frame: object) -> None:
    # SIGTERM (timeout, kill) unwinds like Ctrl-C, so the busy loops and the run are stopped.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legacy", action="store_true", help="the old defaults (before figure)")
    parser.add_argument("--competitors", type=int, default=2)
    parser.add_argument("--leaves", type=int, default=12, help="Whole Child leaves in the slice")
    parser.add_argument("--queries", type=int, default=40, help="test questions predicted")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--work", type=Path, default=Path("/tmp/searchtome-contention"))
    parser.add_argument("--dtype", default="auto", help="DSI's dtype (auto, float32, bfloat16)")
    parser.add_argument(
        "--threads",
        default="",
        metavar="A,B",
        help="SEARCHTOME_THREADS for run 1 and run 2 (default: unset, the project's policy)",
    )
    args = parser.parse_args(argv)
    pinned = [*args.threads.split(","), ""][:2] if args.threads else ["", ""]
    args.work.mkdir(parents=True, exist_ok=True)
    per_split = {"train": 64, "dev": 16, "test": args.queries}
    data = sliced(imported(args.source, args.work), args.work, args.leaves, per_split)
    mode = "legacy" if args.legacy else "default"
    sets = [item for s in (*WORKLOAD, f"dtype={args.dtype}") for item in ("--set", s)]
    say(f"mode {mode}; dtype {args.dtype}; dataset {data}; load {os.getloadavg()[0]:.2f} before")
    say("run 1: alone ...")
    alone, preds_alone, threads_alone = workload(
        data, args.work, f"{mode}-alone", args.legacy, sets, pinned[0]
    )
    say(f"  alone: {alone:.1f} s, threads {threads_alone}")
    say(f"run 2: beside {args.competitors} busy processes ...")
    procs = busy_loops(args.competitors)
    try:
        loaded, preds_loaded, threads_loaded = workload(
            data, args.work, f"{mode}-loaded", args.legacy, sets, pinned[1]
        )
    finally:
        stop(procs)
    say(f"  loaded: {loaded:.1f} s, threads {threads_loaded}")
    same = preds_alone == preds_loaded
    say(f"predictions identical: {'yes' if same else 'NO'}")
    say(f"slowdown {loaded / alone:.1f}x")
    if not same:
        # The benchmark's first promise is the same answer under any load: a difference fails it.
        print(
            "contention: FAILED: the predictions differ between the two runs "
            f"({differences(preds_alone, preds_loaded)})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
