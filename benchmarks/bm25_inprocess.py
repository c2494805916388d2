"""BM25 in-process, same tokens: searchtome's scorer vs rank-bm25 and bm25s, one run.

    python benchmarks/bm25_inprocess.py [--data data/whole-child] [--split test] [--repeats 5]
        [--docs 0]

Every tool gets the same token lists: the ``bm25`` baseline's analyzer over the book's leaves
(title path + section text) and over the split's queries, tokenised once, untimed. A round is,
per tool, building the index from those tokens and scoring every query against every leaf
(the full score vector, as the baseline ranks it):

* **searchtome**: :func:`~searchtome.baselines.termweights.count_terms`,
  :func:`~searchtome.baselines.termweights.okapi` and ``TermWeights.scores``, what
  ``BM25Index`` does after tokenising (k1 1.2, b 0.3, the ``bm25`` defaults);
* **rank-bm25**: ``BM25Okapi(tokens)`` and ``get_scores`` (what ``bm25`` used before);
* **bm25s**: ``BM25(k1, b).index(tokens)`` and ``get_scores`` (numpy backend, float32 scores,
  its default Lucene idf: a different formula, about the same work).

Rounds interleave the tools; the figure is CPU time (``time.process_time``), median of rounds.
Without the dataset (or with ``--docs N``) a synthetic corpus of N documents with a Zipf-like
vocabulary stands in. Peers that are not installed are left out (bm25s is in the ``bench``
extra). It also checks that searchtome's scores equal rank-bm25's bit for bit.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
Tokens = list[list[str]]


def book_tokens(data: Path, split: str) -> tuple[Tokens, Tokens]:
    """The first book's leaves and its ``split`` queries, as the ``bm25`` baseline tokenises."""
    from searchtome.baselines.bm25 import BM25Config, leaf_document

    from searchtome.dataset.loader import load

    ds = load(data)
    config = BM25Config()
    book = next(b for b in ds.book_ids() if ds.queries(split, b))
    leaves = ds.leaves(book)
    docs = [leaf_document(x.path, x.title, x.text, config.title) for x in leaves]
    analyzer = config.analyzer
    queries = [analyzer.tokenize(q.text) for q in ds.queries(split, book)]
    return analyzer.tokenize_many(docs), [q for q in queries if q]


def synthetic_tokens(n_docs: int, n_queries: int, seed: int = 0) -> tuple[Tokens, Tokens]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(max(50, n_docs * 25))]
    weights = [1 / (i + 1) for i in range(len(words))]
    docs = [rng.choices(words, weights, k=rng.randint(20, 400)) for _ in range(n_docs)]
    queries = [rng.choices(words, weights, k=rng.randint(2, 12)) for _ in range(n_queries)]
    return docs, queries


def ours(docs: Tokens, queries: Tokens) -> list[np.ndarray]:
    from searchtome.baselines.termweights import count_terms, okapi

    weights = okapi(count_terms(docs), 1.2, 0.3, 0.25)
    assert weights is not None
    return [weights.scores(q) for q in queries]


def rank_bm25(docs: Tokens, queries: Tokens) -> list[np.ndarray]:
    from rank_bm25 import BM25Okapi

    index = BM25Okapi(docs, k1=1.2, b=0.3, epsilon=0.25)
    return [index.get_scores(q) for q in queries]


def bm25s(docs: Tokens, queries: Tokens) -> list[np.ndarray]:
    import bm25s

    index = bm25s.BM25(k1=1.2, b=0.3)
    index.index(docs, show_progress=False)
    return [index.get_scores(q) for q in queries]


TOOLS: dict[str, tuple[str, Callable[[Tokens, Tokens], list[np.ndarray]]]] = {
    "searchtome": ("searchtome", ours),
    "rank-bm25": ("rank_bm25", rank_bm25),
    "bm25s": ("bm25s", bm25s),
}


def available() -> list[str]:
    from importlib.util import find_spec

    return [name for name, (module, _) in TOOLS.items() if find_spec(module) is not None]


def measure(docs: Tokens, queries: Tokens, repeats: int) -> dict[str, float]:
    """Median CPU seconds per tool for one index build and every query scored."""
    tools = available()
    for name in tools:  # untimed: imports, first-call costs
        TOOLS[name][1](docs, queries[:5])
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(repeats):
        for name in tools:
            t0 = time.process_time()
            TOOLS[name][1](docs, queries)
            times[name].append(time.process_time() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def identical_to_rank_bm25(docs: Tokens, queries: Tokens) -> bool:
    if "rank-bm25" not in available():
        return True
    return all(
        a.tobytes() == np.asarray(b, dtype=np.float64).tobytes()
        for a, b in zip(ours(docs, queries), rank_bm25(docs, queries), strict=True)
    )


def corpus(data: Path, split: str, n_docs: int) -> tuple[str, Tokens, Tokens]:
    if n_docs or not (data / "manifest.json").exists():
        n = n_docs or 129
        docs, queries = synthetic_tokens(n, 2000)
        return f"synthetic, {n} docs", docs, queries
    docs, queries = book_tokens(data, split)
    return f"{data.name} {split}", docs, queries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "whole-child")
    parser.add_argument("--split", default="test")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--docs", type=int, default=0, help="synthetic corpus of N documents")
    args = parser.parse_args(argv)
    label, docs, queries = corpus(args.data, args.split, args.docs)
    print(f"{label}: {len(docs)} documents, {len(queries)} queries")
    result = measure(docs, queries, args.repeats)
    for name, cpu in result.items():
        ratio = (
            ""
            if name == "searchtome"
            else f"   searchtome ÷ {name}: {result['searchtome'] / cpu:.3f}"
        )
        print(f"{name:<12} {cpu * 1000:9.1f} ms CPU{ratio}")
    same = identical_to_rank_bm25(docs, queries)
    print(f"scores identical to rank-bm25: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
