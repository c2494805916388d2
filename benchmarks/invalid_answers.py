"""What a freely decoding DSI writes when its answer names no ToC node.

    python benchmarks/invalid_answers.py DATA ADAPTER [--queries 60] [--every 29] [--split test]

Loads SmolLM2 with a trained ``dsi`` adapter (the folder a run's ``meta.json`` names under
``run_info.notes.adapter``), decodes every ``--every``-th question of the first book freely with
10 beams as ``dsi`` does, and sorts each first answer: the gold leaf, another leaf, or invalid —
then, for an invalid ``leaf N Title`` line, whether its number and its title exist in the ToC on
their own (an existing number paired with another leaf's title is a mix-up, not an invention).
Prints a few examples per kind and the counts. Inference only; one thread.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from searchtome.baselines.generative.beam import beam_search
from searchtome.baselines.generative.books import book_context
from searchtome.baselines.generative.config import GenRetConfig
from searchtome.baselines.generative.engine import decode_text, load_lm
from searchtome.baselines.generative.train import load_adapter

from searchtome.dataset import load
from searchtome.threads import use_torch_threads

LEAF_LINE = re.compile(r"\s*leaf\s+([\d.]+)\s+(.*)")


def kind_of(text: str, numbers: set[str], titles: set[str]) -> str:
    """The kind of an invalid answer: which of its number and title exist in the ToC."""
    m = LEAF_LINE.match(text)
    if not m:
        return "invalid: not a leaf line"
    number = "exists" if m.group(1) in numbers else "new"
    title = "exists" if m.group(2).strip().lower() in titles else "new"
    return f"invalid: number {number}, title {title}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("adapter", type=Path)
    p.add_argument("--split", default="test")
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--every", type=int, default=29)
    p.add_argument("--model", default="smollm2")
    args = p.parse_args()

    use_torch_threads(1)
    ds = load(args.data)
    book_id = ds.book_ids()[0]
    lm = load_lm(args.model, dtype="auto", device="cpu")
    load_adapter(lm, args.adapter)
    cfg = GenRetConfig(model=args.model, max_input_tokens=512)
    book = book_context(lm, ds, book_id, cfg, with_toc=False, seed=42)
    queries = ds.queries(args.split, book_id)[:: args.every][: args.queries]
    prefix = lm.prefix_cache(book.prefix_ids)
    suffixes = [book.suffix_ids(lm, q.text, book.query_label, 512) for q in queries]
    results = beam_search(lm, prefix, suffixes, trie=None, num_beams=10, max_new_tokens=64)

    # The book's own leaf lines, as the model was trained to write them.
    lines = [LEAF_LINE.match(line) for line in book.index.identifiers.values()]
    numbers = {m.group(1) for m in lines if m}
    titles = {m.group(2).strip().lower() for m in lines if m}
    counts: Counter[str] = Counter()
    for q, hyps in zip(queries, results, strict=True):
        text = decode_text(lm, hyps[0][0]) if hyps else ""
        item, kind = book.index.match(text)
        if kind == "invalid":
            kind = kind_of(text, numbers, titles)
        elif kind == "leaf":
            kind = "gold leaf" if item == q.leaf_id else "another leaf"
        counts[kind] += 1
        if counts[kind] <= 3 and kind.startswith("invalid"):
            print(f"{kind}: {text[:100]!r} (gold {q.leaf_id})")
    for kind, n in sorted(counts.items()):
        print(f"{n:4d}  {kind}")
    print(f"{sum(counts.values()):4d}  first answers ({args.split}, every {args.every}th question)")


if __name__ == "__main__":
    main()
