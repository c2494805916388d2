"""Seconds per training epoch of STAIR and DSI, the frozen lower layers computed once or not.

    python benchmarks/generative_training.py DATA [--steps 3] [--rounds 2] [--threads 1]
        [--systems stair dsi] [--dev 10] [--profile] [--json OUT]

On the first ``--steps`` × 16 training questions of DATA's first book (in split order, a fixed
slice), each system's CPU defaults (``stair``: paper layout, the whole ToC as prefix, LoRA on
the top 10 of SmolLM2's 30 layers reading the ToC; ``dsi``: the query-only prompt) train one
epoch with ``cache_lower_layers=false`` (the plain path: every step recomputes all 30 layers)
and with ``true`` (the default: layers 0-19 computed once per book, each step runs the top 10
only), alternating ``old, new, old, new, …`` for ``--rounds`` rounds so both see the same load;
the ratio is per round. Both start from the same adapter and dropout seed, so their losses
should agree up to rounding (printed). Also timed: the one-off lower-layer pass (per book and sitting), one dev
evaluation of ``--dev`` questions (greedy, as model selection runs it after every epoch; the
same for both paths), and, with ``--profile``, one new-path step under torch.profiler, grouped
into attention, matrix products, dropout and the rest. Times are wall seconds and CPU seconds of
the process (with one thread the CPU time is the work done, whatever else runs on the machine;
the wall time is what a user waits). A full epoch is extrapolated (CPU seconds) to the
book's whole train split and 100 dev questions. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from searchtome.baselines.generative.adapters import build_examples, dev_sample
from searchtome.baselines.generative.books import book_context
from searchtome.baselines.generative.engine import load_lm
from searchtome.baselines.generative.lower import lower_states
from searchtome.baselines.generative.predict import Predictor
from searchtome.baselines.generative.stair import DSIConfig, StairConfig
from searchtome.baselines.generative.train import (
    TrainSettings,
    attach_lora,
    batch_loss_backward,
    lora_state,
    set_lora_state,
    train,
)

from searchtome.dataset import load

SYSTEMS = {"stair": (StairConfig, True), "dsi": (DSIConfig, False)}


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _settings(cfg: Any, cached: bool) -> TrainSettings:
    """The system's training settings for one epoch on the old or the new path."""
    return dataclasses.replace(cfg.training, max_epochs=1, cache_lower_layers=cached)


def _epoch(
    lm: Any, start: dict, examples: list, prefixes: dict, cfg: Any, cached: bool, once_cpu: float
) -> dict:
    """One epoch with ``train``; wall seconds as its history records them (after the one-off
    lower-layer pass) and CPU seconds of this process, less that pass (``once_cpu``)."""
    import torch

    set_lora_state(lm, start)
    torch.manual_seed(0)  # the same LoRA dropout masks on both paths
    cpu = time.process_time()
    with tempfile.TemporaryDirectory() as work:
        report = train(
            lm,
            examples,
            prefixes,
            _settings(cfg, cached),
            seed=1,
            evaluate=None,
            work_dir=Path(work),
        )
    cpu = time.process_time() - cpu - (once_cpu if cached else 0.0)
    row = report.history[0]
    return {
        "seconds": row["seconds"],
        "cpu_seconds": round(cpu, 1),
        "loss": row["train_loss"],
        "steps": report.steps,
    }


def _profile(lm: Any, lower: Any, examples: list, prefix_ids: list, frozen: Any, cfg: Any) -> dict:
    """One new-path step under torch.profiler: self CPU seconds by kind of operation."""
    from torch.profiler import ProfilerActivity, profile

    lm.model.train()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        batch_loss_backward(
            lm, examples[: cfg.batch_size], prefix_ids, frozen, pack=cfg.pack, lower=lower
        )
    lm.model.eval()
    groups = {"attention": 0.0, "matrix products": 0.0, "dropout masks": 0.0, "other": 0.0}
    for ev in prof.key_averages():
        name, sec = ev.key, ev.self_cpu_time_total / 1e6
        if "attention" in name:
            groups["attention"] += sec
        elif name in ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul"):
            groups["matrix products"] += sec
        elif "bernoulli" in name:
            groups["dropout masks"] += sec
        else:
            groups["other"] += sec
    return {k: round(v, 2) for k, v in groups.items()}


def bench_system(data: str, system: str, args: argparse.Namespace) -> dict:
    import torch

    config_cls, with_toc = SYSTEMS[system]
    cfg = config_cls(restricted="allow")
    ds = load(data)
    book_id = ds.book_ids()[0]
    lm = load_lm(cfg.model, dtype=cfg.dtype, device="cpu")
    book = book_context(lm, ds, book_id, cfg, with_toc=with_toc, seed=42)
    everything = build_examples(lm, ds, {book_id: book}, [book_id], cfg)
    examples = everything[: args.steps * cfg.batch_size]
    prefixes = {book_id: book.prefix_ids}
    attach_lora(lm, cfg.lora, seed=42)
    start = lora_state(lm)
    out: dict[str, Any] = {
        "system": system,
        "dtype": str(lm.dtype).removeprefix("torch."),
        "prefix_tokens": len(book.prefix_ids),
        "examples": len(examples),
        "train_examples": len(everything),
        "rounds": [],
    }
    began, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        lower = lower_states(lm, examples, prefixes)
    once_cpu = time.process_time() - cpu
    out["lower_once_seconds"] = round(time.perf_counter() - began, 2)
    out["lower_once_cpu_seconds"] = round(once_cpu, 2)
    for r in range(args.rounds):
        old = _epoch(lm, start, examples, prefixes, cfg, False, once_cpu)
        new = _epoch(lm, start, examples, prefixes, cfg, True, once_cpu)
        ratio = old["seconds"] / new["seconds"]
        cpu_ratio = old["cpu_seconds"] / new["cpu_seconds"]
        out["rounds"].append(
            {
                "old": old,
                "new": new,
                "ratio": round(ratio, 2),
                "cpu_ratio": round(cpu_ratio, 2),
                "load": load_avg(),
            }
        )
        print(
            f"{system} round {r + 1}: old {old['seconds']:.1f} s, new {new['seconds']:.1f} s "
            f"({ratio:.2f}x) wall; CPU {old['cpu_seconds']:.1f} s vs {new['cpu_seconds']:.1f} s "
            f"({cpu_ratio:.2f}x); {old['steps']} steps; loss {old['loss']:.6f} / "
            f"{new['loss']:.6f}; load {load_avg()}",
            flush=True,
        )
    if args.dev:
        set_lora_state(lm, start)
        predictor = Predictor(lm, {book_id: book}, cfg, not cfg.adapt_toc)
        dev = dev_sample(ds, [book_id], args.dev, 42)
        cpu = time.process_time()
        predictor.run(dev, cfg.dev.decoding(cfg.decoding), desc="dev")
        out["dev_seconds_per_question"] = round((time.process_time() - cpu) / len(dev), 3)
    if args.profile:
        frozen = None if cfg.adapt_toc else lm.prefix_cache(book.prefix_ids)
        out["profile_new_step"] = _profile(lm, lower, examples, book.prefix_ids, frozen, cfg)
        print(f"{system} one new-path step by kind (self CPU s): {out['profile_new_step']}")
    _extrapolate(out, cfg)
    return out


def _extrapolate(out: dict, cfg: Any) -> None:
    """A full epoch: every training question of the book, plus 100 dev questions."""
    steps = math.ceil(out["train_examples"] / cfg.batch_size)
    dev = 100 * out.get("dev_seconds_per_question", 0.0)
    for path in ("old", "new"):  # the least loaded round's CPU time per step
        per_step = [r[path]["cpu_seconds"] / r[path]["steps"] for r in out["rounds"]]
        out[f"{path}_full_epoch_seconds"] = round(min(per_step) * steps + dev, 1)
    out["full_epoch_steps"] = steps
    out["ratios"] = [r["ratio"] for r in out["rounds"]]
    out["cpu_ratios"] = [r["cpu_ratio"] for r in out["rounds"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--steps", type=int, default=3, help="training steps (of 16) per epoch")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--dev", type=int, default=10, help="dev questions to time (0: none)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"load average before: {load_avg()} ({os.cpu_count()} CPUs), threads {args.threads}")
    results = [bench_system(args.data, s, args) for s in args.systems]
    print(f"load average after: {load_avg()}")
    for res in results:
        print(
            f"{res['system']}: {res['prefix_tokens']}-token prefix, {res['dtype']}; per-round "
            f"ratio old/new: wall {res['ratios']}, CPU {res['cpu_ratios']}; full epoch in CPU s ({res['full_epoch_steps']} steps + 100 "
            f"dev questions) ~{res['old_full_epoch_seconds']:.0f} s -> "
            f"{res['new_full_epoch_seconds']:.0f} s; lower layers once: "
            f"{res['lower_once_seconds']} s for {res['examples']} examples"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
