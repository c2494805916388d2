"""How far float32 and bfloat16 rankings of the generative baselines lie apart on this CPU.

    python benchmarks/dtype_agreement.py DATA [--queries 40] [--system dsi|stair] [--split dev]

Loads the base model (SmolLM2 by default, no adapter) once in each dtype, builds the first
book's prompts as the ``dsi`` (query only) or ``stair`` (with the ToC) baseline does, ranks
every leaf of the first ``--queries`` questions exactly (``decode="exact"``: the log-probability
of each leaf identifier over the cached prefix) with one thread, and prints the agreement: same
top-1 leaf, same top-10 list, top-10 overlap as sets, the per-leaf log-probability difference,
correct top-1 answers, and the time per question. Inference only: training on rounded
gradients would drift further.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from searchtome.baselines.generative.books import book_context
from searchtome.baselines.generative.config import Decoder, GenRetConfig
from searchtome.baselines.generative.engine import load_lm
from searchtome.baselines.generative.predict import Decoded, decode_queries

from searchtome.dataset import load
from searchtome.threads import use_torch_threads

DTYPES = ("float32", "bfloat16")


def rank(data: str, split: str, n: int, system: str, model: str, dtype: str) -> tuple:
    """``(decoded per query, gold leaf per query, seconds per query, resolved dtype)``."""
    import torch

    ds = load(data)
    book_id = ds.book_ids()[0]
    queries = ds.queries(split, book_id)[:n]
    torch.manual_seed(0)
    lm = load_lm(model, dtype=dtype, device="cpu")
    cfg = GenRetConfig(model=model, dtype=dtype)
    book = book_context(lm, ds, book_id, cfg, with_toc=system == "stair", seed=42)
    start = time.perf_counter()
    with torch.inference_mode():
        prefix = lm.prefix_cache(book.prefix_ids)
        suffixes = [
            book.suffix_ids(lm, q.text, book.query_label, cfg.max_input_tokens) for q in queries
        ]
        exact = dataclasses.replace(cfg.decoding, mode=Decoder.EXACT)
        out = decode_queries(lm, book, prefix, suffixes, exact)
    seconds = (time.perf_counter() - start) / max(len(queries), 1)
    return out, [q.leaf_id for q in queries], seconds, str(lm.dtype).removeprefix("torch.")


def agreement(a: list[Decoded], b: list[Decoded], gold: list[str]) -> dict[str, float]:
    """Agreement of two exact rankings of the same questions (``a`` float32, ``b`` bfloat16)."""
    n = len(a)
    diffs = [
        abs(dict(zip(x.ids, x.scores, strict=True))[k] - s)
        for x, y in zip(a, b, strict=True)
        for k, s in zip(y.ids, y.scores, strict=True)
    ]
    return {
        "questions": n,
        "same_top1": sum(x.ids[0] == y.ids[0] for x, y in zip(a, b, strict=True)),
        "same_top10_list": sum(x.ids[:10] == y.ids[:10] for x, y in zip(a, b, strict=True)),
        "top10_overlap": sum(
            len(set(x.ids[:10]) & set(y.ids[:10])) for x, y in zip(a, b, strict=True)
        )
        / (10 * n),
        "mean_abs_logprob_diff": sum(diffs) / len(diffs),
        "max_abs_logprob_diff": max(diffs),
        "correct_top1_float32": sum(x.ids[0] == g for x, g in zip(a, gold, strict=True)),
        "correct_top1_bfloat16": sum(y.ids[0] == g for y, g in zip(b, gold, strict=True)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="a dataset folder (searchtome import repro ...)")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--system", choices=("dsi", "stair"), default="dsi")
    p.add_argument("--split", default="dev")
    p.add_argument("--model", default="smollm2")
    args = p.parse_args()
    use_torch_threads(1)  # one thread: the comparison is about dtypes, not thread counts
    runs = {
        d: rank(args.data, args.split, args.queries, args.system, args.model, d) for d in DTYPES
    }
    for d, (_, _, seconds, used) in runs.items():
        print(f"{d}: ran in {used}, {seconds:.2f} s per question")
    facts = agreement(runs["float32"][0], runs["bfloat16"][0], runs["float32"][1])
    for key, value in facts.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
