"""Exact leaf ranking over a cached ToC prefix against the uncached computation, on a real ToC.

    python benchmarks/stair_ranking.py [PDF] [--queries 3] [--sample 2] [--dtype float32]

Every leaf identifier of the book is scored for each query (log-probability of its title path
+ EOS after the STAIR prompt) three ways, and the per-query times are printed side by side:

* ``cached`` — the measured system: the instruction + ToC prefix's keys/values computed once
  per book (its cost is shown separately, amortised over all queries of the book), then per
  query one tree-shaped pass over the query and the trie of all identifiers.
* ``recompute`` — the same tree pass, but the prefix recomputed for every query (no cross-query
  cache): rankings must be identical, the ratio shows what the cache alone buys.
* ``uncached`` — the reference run: every candidate scored on the full prompt with plain causal
  attention (what a scorer without any caching does; the semantics the cached scores must equal).
  On a CPU it takes hours per query, so ``--sample N`` scores N random candidates per query,
  checks them against the cached scores and extrapolates the time linearly (each candidate
  costs the same full-prompt pass); ``--sample 0`` scores every leaf and compares full rankings.

Trie-constrained beam search (``--beams``) is timed too. Target: cached ≥ 5× faster than
uncached, identical rankings. Default PDF: ../shared/realpdfs/gdb_manual.pdf (487 leaves).
``--toc-json`` reads a ToC exported with ``--export-toc`` instead of a PDF (for machines without
PyMuPDF), ``--random-init`` uses the model's shape with random weights (timings and equality
checks only; for machines without the weights).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PDF = ROOT.parent / "shared" / "realpdfs" / "gdb_manual.pdf"
QUERIES = [
    "How do I stop the program only when a variable reaches a given value?",
    "How can I see the call stack after a crash?",
    "How do I attach the debugger to a process that is already running?",
    "Which command prints the contents of memory in hexadecimal?",
    "How do I debug a remote target over a serial line?",
    "How can I change the value of a variable while the program is paused?",
]


def _import_baselines() -> None:
    """Make ``searchtome.baselines`` importable from a source tree that was not installed."""
    sys.path.insert(0, str(ROOT))
    try:
        import searchtome.baselines  # noqa: F401
    except ModuleNotFoundError:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "searchtome.baselines",
            ROOT / "baselines" / "__init__.py",
            submodule_search_locations=[str(ROOT / "baselines")],
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["searchtome.baselines"] = module
        spec.loader.exec_module(module)


def load_nodes(args: argparse.Namespace) -> list:
    from searchtome.records import TocNode

    if args.toc_json:
        rows = json.loads(Path(args.toc_json).read_text(encoding="utf-8"))
        return [TocNode.from_dict(r) for r in rows]
    from searchtome.ingest.toc import read_toc

    return list(read_toc(args.pdf).nodes)


def load_model(args: argparse.Namespace):
    from searchtome.baselines.generative.engine import LM, load_lm, pick_device, pick_dtype

    if not args.random_init:
        return load_lm(args.model, dtype=args.dtype, device=args.device)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    device = pick_device(args.device)
    config = AutoConfig.from_pretrained(args.model)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=pick_dtype(args.dtype, device))
    model.to(device).eval()
    tok = AutoTokenizer.from_pretrained(args.model)
    return LM(
        model=model, tokenizer=tok, name=f"{args.model} (random init)", eos_id=tok.eos_token_id
    )


def same_order(a: dict[str, float], b: dict[str, float], tol: float) -> tuple[bool, bool]:
    """``(identical, identical up to ties)``: b's ranking equals a's exactly, or differs only
    between leaves whose scores are within ``tol`` of each other."""
    from searchtome.baselines.generative.engine import rank_from_scores

    ra = [k for k, _ in rank_from_scores(a)]
    rb = [k for k, _ in rank_from_scores(b)]
    if ra == rb:
        return True, True
    ok = all(a[x] >= a[y] - tol for i, x in enumerate(rb) for y in rb[i + 1 :])
    return False, ok


def _sync(lm) -> None:
    import torch

    if lm.device.type == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", nargs="?", type=Path, default=DEFAULT_PDF)
    parser.add_argument("--toc-json", type=Path)
    parser.add_argument("--export-toc", type=Path, help="write the PDF's ToC as JSON and stop")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--random-init", action="store_true")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--queries", type=int, default=3)
    parser.add_argument(
        "--sample", type=int, default=2, help="uncached candidates per query (0 = all)"
    )
    parser.add_argument("--batch", type=int, default=4, help="uncached candidates per forward")
    parser.add_argument("--beams", type=int, default=5)
    parser.add_argument(
        "--train-check",
        action="store_true",
        help="also check LoRA training steps: one-per-row and one-tree layouts give one loss",
    )
    parser.add_argument("--tol", type=float, default=1e-3, help="score tolerance for ties")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    _import_baselines()
    import torch
    from searchtome.baselines.generative.beam import beam_search
    from searchtome.baselines.generative.common import (
        STAIR_INSTRUCTION,
        PromptTemplate,
        TokenTrie,
        leaf_identifiers,
        serialize_toc,
    )
    from searchtome.baselines.generative.engine import rank_from_scores, score_trie, score_uncached

    from searchtome.settings import set_progress

    set_progress(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.export_toc:
        nodes = load_nodes(args)
        args.export_toc.write_text(json.dumps([n.to_dict() for n in nodes]), encoding="utf-8")
        print(f"wrote {len(nodes)} nodes to {args.export_toc}")
        return 0
    if not args.toc_json and not args.pdf.exists():
        print(f"benchmark PDF not found: {args.pdf}", file=sys.stderr)
        return 2
    nodes = load_nodes(args)
    lm = load_model(args)
    idents = leaf_identifiers(nodes)
    prefix_text, pattern = PromptTemplate(STAIR_INSTRUCTION).split(
        lm.tokenizer, "Debugging with GDB", serialize_toc(nodes)
    )
    prefix_ids = lm.encode(prefix_text)
    trie = TokenTrie({k: [*lm.encode(v), lm.eos_id] for k, v in idents.items()}, lm.eos_id)
    queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
    suffixes = [lm.encode(PromptTemplate.suffix(pattern, q)) for q in queries]
    n_trie = len(trie.flatten()[0])
    print(
        f"model {lm.name} ({lm.dtype}, {lm.device}, {torch.get_num_threads()} threads); "
        f"{len(idents)} leaves, prefix {len(prefix_ids)} tokens, identifiers "
        f"{sum(len(s) for s in trie.sequences.values())} tokens, trie {n_trie} nodes"
    )

    # Warm-up (allocator, kernels) counts for no side.
    score_trie(lm, lm.prefix_cache(prefix_ids[:64]), suffixes[0], trie, chunk=256)

    _sync(lm)
    t = time.perf_counter()
    prefix = lm.prefix_cache(prefix_ids)
    _sync(lm)
    prefix_s = time.perf_counter() - t

    cached_s, recompute_s, uncached_s = [], [], []
    max_diff_recompute, max_diff_uncached = 0.0, 0.0
    same_rankings = same_up_to_ties = True
    compared = 0
    rng = random.Random(0)
    for q, suffix in zip(queries, suffixes, strict=True):
        t = time.perf_counter()
        cached = score_trie(lm, prefix, suffix, trie)
        _sync(lm)
        cached_s.append(time.perf_counter() - t)

        t = time.perf_counter()
        again = score_trie(lm, lm.prefix_cache(prefix_ids), suffix, trie)
        _sync(lm)
        recompute_s.append(time.perf_counter() - t)
        max_diff_recompute = max(max_diff_recompute, max(abs(cached[k] - again[k]) for k in cached))
        exact, up_to_ties = same_order(cached, again, args.tol)
        same_rankings &= exact
        same_up_to_ties &= up_to_ties

        keys = (
            list(trie.sequences)
            if args.sample == 0
            else rng.sample(list(trie.sequences), args.sample)
        )
        t = time.perf_counter()
        ref = score_uncached(
            lm, prefix_ids + suffix, {k: trie.sequences[k] for k in keys}, batch_size=args.batch
        )
        _sync(lm)
        per_candidate = (time.perf_counter() - t) / len(keys)
        uncached_s.append(per_candidate * len(trie.sequences))
        max_diff_uncached = max(max_diff_uncached, max(abs(cached[k] - ref[k]) for k in keys))
        compared += len(keys)
        if args.sample == 0:
            exact, up_to_ties = same_order(cached, ref, args.tol)
            same_rankings &= exact
            same_up_to_ties &= up_to_ties
        best = rank_from_scores(cached)[0][0]
        print(f"  {q!r}: top leaf {idents[best]!r}")

    t = time.perf_counter()
    beams = beam_search(lm, prefix, suffixes, trie=trie, num_beams=args.beams)
    _sync(lm)
    beam_s = (time.perf_counter() - t) / len(queries)
    assert all(trie.lookup(tokens) is not None for hyps in beams for tokens, _ in hyps)

    med = statistics.median
    extrapolated = "" if args.sample == 0 else f" (extrapolated from {args.sample} per query)"
    figures = {
        "model": lm.name,
        "dtype": str(lm.dtype),
        "device": str(lm.device),
        "threads": torch.get_num_threads(),
        "leaves": len(idents),
        "prefix_tokens": len(prefix_ids),
        "trie_nodes": n_trie,
        "queries": len(queries),
        "prefix_once_s": round(prefix_s, 3),
        "cached_per_query_s": round(med(cached_s), 3),
        "recompute_per_query_s": round(med(recompute_s), 3),
        "uncached_per_query_s": round(med(uncached_s), 3),
        "uncached_sampled": args.sample,
        "beam_per_query_s": round(beam_s, 3),
        "beams": args.beams,
        "ratio_uncached_over_cached": round(med(uncached_s) / med(cached_s), 1),
        "ratio_recompute_over_cached": round(med(recompute_s) / med(cached_s), 2),
        "max_abs_diff_vs_recompute": max_diff_recompute,
        "max_abs_diff_vs_uncached": max_diff_uncached,
        "candidates_compared_with_uncached": compared,
        "identical_rankings": same_rankings,
        "identical_rankings_up_to_ties": same_up_to_ties,
        "tie_tolerance": args.tol,
    }
    print(f"prefix keys/values, once per book: {prefix_s:.2f} s")
    print(f"{'per query':<28}{'seconds':>10}{'vs cached':>12}")
    print(f"{'cached (measured)':<28}{med(cached_s):>10.2f}{1.0:>11.1f}x")
    print(
        f"{'recompute prefix per query':<28}{med(recompute_s):>10.2f}{med(recompute_s) / med(cached_s):>11.2f}x"
    )
    print(
        f"{'uncached (reference)':<28}{med(uncached_s):>10.2f}{med(uncached_s) / med(cached_s):>11.1f}x{extrapolated}"
    )
    print(
        f"{f'beam search, {args.beams} beams':<28}{beam_s:>10.2f}{beam_s / med(cached_s):>11.2f}x"
    )
    print(
        f"max |score difference|: vs recompute {max_diff_recompute:.2e}, vs uncached "
        f"{max_diff_uncached:.2e} ({compared} candidates); identical rankings: {same_rankings}; "
        f"identical up to ties within {args.tol:g}: {same_up_to_ties}"
    )
    if args.train_check:
        figures["train_check"] = train_check(lm, prefix_ids, trie, idents)
        print(f"training check: {figures['train_check']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def train_check(lm, prefix_ids, trie, idents) -> dict:
    """A few LoRA steps on (leaf title → leaf) pairs: both batch layouts agree, loss falls."""
    import tempfile

    import torch
    from searchtome.baselines.generative.train import (
        Example,
        LoraSettings,
        TrainSettings,
        attach_lora,
        batch_loss_backward,
        train,
    )

    keys = sorted(idents)[:16]
    examples = [
        Example(
            "b",
            tuple(lm.encode(f"Question: Where is {idents[k].rsplit(' > ', 1)[-1]}?")),
            trie.sequences[k],
        )
        for k in keys
    ]
    attach_lora(lm, LoraSettings(layers=0), seed=0)
    out: dict = {}
    frozen = lm.prefix_cache(prefix_ids)
    for name, prefix in (("frozen_prefix", frozen), ("adapted_prefix", None)):
        losses = []
        for group in (1, len(examples)):
            lm.model.zero_grad()
            loss, _ = batch_loss_backward(lm, examples, prefix_ids, prefix, pack=8, group=group)
            losses.append(loss)
        out[f"{name}_loss_rows_vs_tree"] = [round(x, 5) for x in losses]
    lm.model.zero_grad()
    report = train(
        lm,
        examples,
        {"b": prefix_ids},
        TrainSettings(lr=2e-3, batch_size=8, max_epochs=3, adapt_toc=True, warmup_ratio=0.0),
        seed=0,
        evaluate=None,
        work_dir=Path(tempfile.mkdtemp()),
    )
    out["epoch_losses"] = [round(r["train_loss"], 4) for r in report.history]
    out["peak_gpu_gib"] = (
        round(torch.cuda.max_memory_allocated() / 2**30, 2) if lm.device.type == "cuda" else None
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
