"""Every row of the peer table (issue 25) in one run: searchtome's CPU time ÷ each peer's.

    python benchmarks/peers.py [--quick] [--rows metrics,significance,bm25,encoding,trec,pdf,client]

One process measures, row after row, each side interleaved with its peers over ``--repeats``
rounds (median): CPU time (``time.process_time`` in process; user + system of the child for
the whole-process rows), never wall time, so a busy machine slows both sides alike. The table
names the machine (CPU model, usable cores) and the load before and after. A peer that is not
installed is reported as such and its row skipped, never estimated. Each row is printed as it
finishes; a row that raises is printed as failed with its one-line reason, the others are still
measured, and the exit status is 1 (``benchmarks/bench_rows.py``).

* **metrics**: one run of N queries × 100 ids, R@1, R@3, R@5, nDCG@3, RR: ``evaluate_arrays``
  (with ``Qrels``) vs ``pytrec_eval.RelevanceEvaluator`` (built and evaluated) and
  ``ranx.evaluate`` (its ``Qrels``/``Run`` built outside the clock, numba compiled before).
* **significance**: 11 systems, all 55 pairs, paired randomization test on R@1 with P sign
  flips: ``compare`` vs ``scipy.stats.permutation_test`` (``permutation_type="samples"``,
  vectorised) pair by pair.
* **bm25**: ``benchmarks/bm25_inprocess.py`` (index + every query, same tokens).
* **encoding**: MiniLM over the book's leaves on one thread: ``Encoder.encode_passages`` vs
  ``SentenceTransformer.encode`` (same model folder, 256 tokens, batch 32).
* **trec**: ``benchmarks/trec_reading.py``'s read, whole-process ``score`` and start-up rows.
* **pdf**: ``benchmarks/extract.py``: extraction in one process ÷ a plain ``get_text()`` pass
  (the peer is that pass), per real PDF without an outline; the note gives the pooled reading's
  CPU and wall ratios.
* **client**: ``ChatClient.complete_many`` vs a plain ``AsyncOpenAI`` + semaphore loop, same
  fake servers (``tests/fixtures/fake_openai.py``), ratio of CPU per request, and each side's
  rate as a share of the ideal.

``--quick`` shrinks the rows (fewer queries, flips, leaves, rounds and PDFs; the client at
0.5 s latency; ranx's 15-second TREC reading left out) for a run of about four minutes. The
TREC rows keep their 20,000 × 100 run: on a smaller one the readers' fixed costs (numpy and
pyarrow imports, ~0.12 s) are what is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from importlib.util import find_spec
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]  # the other benchmark modules; tests.fixtures

from bench_rows import HEADER, Row, markdown, run_rows  # noqa: E402 (found through the line above)


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def interleaved(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds of each side, the sides alternating round by round."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, fn in sides.items():
            times[name].append(cpu(fn))
    return {name: statistics.median(ts) for name, ts in times.items()}


def missing(*modules: str) -> str | None:
    absent = [m for m in modules if find_spec(m) is None]
    return f"not installed ({', '.join(absent)})" if absent else None


# -- metrics and significance ------------------------------------------------------------------


def metrics_row(quick: bool, repeats: int) -> Iterator[Row]:
    from scoring import synthetic

    from searchtome.metrics import Qrels, evaluate_arrays

    n = 2_000 if quick else 20_000
    qrels, (run,), _ = synthetic(n, 1, 500, 100, seed=0)
    measures = ["R@1", "R@3", "R@5", "nDCG@3", "RR@100"]
    as_dict = {q: dict(zip(ids, run.scores[q], strict=True)) for q, ids in run.rankings.items()}
    sides: dict[str, Callable[[], object]] = {
        "searchtome": lambda: evaluate_arrays(run, Qrels(qrels), measures)
    }
    peers: dict[str, float | str] = {}
    if reason := missing("pytrec_eval"):
        peers["pytrec_eval"] = reason
    else:
        import pytrec_eval

        wanted = {"recall_1", "recall_3", "recall_5", "ndcg_cut_3", "recip_rank"}
        sides["pytrec_eval"] = lambda: pytrec_eval.RelevanceEvaluator(qrels, wanted).evaluate(
            as_dict
        )
    if reason := missing("ranx"):
        peers["ranx"] = reason
    else:
        import ranx

        rq, rr = ranx.Qrels(qrels), ranx.Run(as_dict)
        names = ["recall@1", "recall@3", "recall@5", "ndcg@3", "mrr"]
        ranx.evaluate(rq, rr, names)  # numba compiles here, outside the clock
        sides["ranx"] = lambda: ranx.evaluate(rq, rr, names)
    sides["searchtome"]()  # untimed: first-call costs (lazy imports)
    result = interleaved(sides, repeats)
    yield Row(
        f"metric computation, {n:,} queries × 100", result.pop("searchtome"), {**result, **peers}
    )


def significance_row(quick: bool, repeats: int) -> Iterator[Row]:
    from scoring import synthetic

    from searchtome.leaderboard.significance import CompareOptions, compare
    from searchtome.metrics import Qrels, evaluate_arrays

    n, flips = (1_000, 1_000) if quick else (2_000, 10_000)
    qrels, runs, _ = synthetic(n, 11, 500, 10, seed=1)
    q = Qrels(qrels)
    values = {r.name: {"R@1": evaluate_arrays(r, q, ["R@1"])["R@1"]} for r in runs}
    options = CompareOptions(permutations=flips, bootstrap=0, seed=0)
    sides: dict[str, Callable[[], object]] = {
        "searchtome": lambda: compare(values, measures=["R@1"], options=options)
    }
    peers: dict[str, float | str] = {}
    if reason := missing("scipy"):
        peers["scipy permutation_test"] = reason
    else:
        import scipy.stats  # noqa: F401 (imported outside the clock)

        sides["scipy permutation_test"] = lambda: _scipy_pairs(values, flips)
    sides["searchtome"]()  # untimed: first-call costs (lazy imports)
    result = interleaved(sides, max(1, repeats // 2))
    what = f"significance, 55 pairs, {n:,} queries, {flips:,} flips"
    yield Row(what, result.pop("searchtome"), {**result, **peers})


def _scipy_pairs(values: dict[str, dict[str, np.ndarray]], flips: int) -> list[float]:
    from scipy.stats import permutation_test

    def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(x - y, axis=axis)

    names = sorted(values)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            res = permutation_test(
                (values[a]["R@1"], values[b]["R@1"]),
                mean_difference,
                permutation_type="samples",
                vectorized=True,
                n_resamples=flips,
                batch=1_000,
                random_state=0,
            )
            out.append(float(res.pvalue))
    assert len(out) == 55
    return out


# -- BM25 and dense encoding -------------------------------------------------------------------


def bm25_row(quick: bool, repeats: int) -> Iterator[Row]:
    import bm25_inprocess as bench

    label, docs, queries = bench.corpus(ROOT / "data" / "whole-child", "test", 0)
    result = bench.measure(docs, queries, repeats)
    peers: dict[str, float | str] = {
        "rank-bm25": result.get("rank-bm25", missing("rank_bm25") or ""),
        "bm25s": result.get("bm25s", missing("bm25s") or ""),
    }
    same = bench.identical_to_rank_bm25(docs, queries)
    note = f"{label}, {len(docs)} docs, {len(queries)} queries; scores bit-identical: {same}"
    yield Row("BM25 in-process (same tokens)", result["searchtome"], peers, note)


def encoding_row(quick: bool, repeats: int) -> Iterator[Row]:
    if reason := missing("torch", "sentence_transformers"):
        yield Row("dense encoding, 1 thread", float("nan"), {"sentence-transformers": reason})
        return
    import torch
    from searchtome.baselines.encoders import Encoder, EncoderConfig
    from sentence_transformers import SentenceTransformer

    from searchtome.llm.models import minilm_path

    texts = _leaf_texts(16 if quick else 64)
    folder = str(minilm_path())
    torch.set_num_threads(1)
    ours = Encoder(EncoderConfig(model=folder, backend="transformers", threads=1, cache=False,
                                 passage_max_tokens=256))  # fmt: skip
    st = SentenceTransformer(folder, device="cpu")
    st.max_seq_length = 256
    ours.encode_passages(texts[:2])  # untimed: weights loaded, first-call costs
    st.encode(texts[:2])
    result = interleaved(
        {
            "searchtome": lambda: ours.encode_passages(texts),
            "sentence-transformers": lambda: st.encode(texts, batch_size=32),
        },
        repeats,
    )
    note = f"{len(texts)} leaves of the book, 256 tokens, batch 32, torch threads 1"
    yield Row("dense encoding, 1 thread", result.pop("searchtome"), result, note)


def _leaf_texts(n: int) -> list[str]:
    data = ROOT / "data" / "whole-child"
    if (data / "manifest.json").exists():
        from searchtome.dataset.loader import load

        ds = load(data)
        texts = [x.text for b in ds.book_ids() for x in ds.leaves(b) if x.text]
        return texts[:n]
    words = [f"word{i}" for i in range(2000)]
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(words, 300)) for _ in range(n)]


# -- TREC runs, PDFs, the question client ------------------------------------------------------


def trec_rows(quick: bool, repeats: int) -> Iterator[Row]:
    import trec_reading

    args = argparse.Namespace(
        queries=20_000,  # the row's size in quick mode too: at 5,000 fixed costs dominate
        depth=100,
        repeats=1 if quick else repeats,
        startup_repeats=5 if quick else 11,
        rows="read,score,start-up",
        skip="ranx" if quick else "",
    )
    with tempfile.TemporaryDirectory(prefix="searchtome-peers-") as folder:
        rows = trec_reading.measure(args, Path(folder))
    titles = {
        "read": f"reading a TREC run, {args.queries:,} × 100",
        "score": "`searchtome score RUN.trec --qrels QRELS`, whole process",
        "start-up": "`score` start-up (one-query run)",
    }
    for key, tools in rows.items():
        med = {t: statistics.median(m["cpu"] for m in ms) for t, ms in tools.items()}
        peers: dict[str, float | str] = {t: v for t, v in med.items() if t != "searchtome"}
        if key == "read" and quick and find_spec("ranx"):
            peers["ranx"] = "left out in --quick (15 s a read)"
        yield Row(titles[key], med["searchtome"], peers)


def pdf_rows(quick: bool, repeats: int) -> Iterator[Row]:
    import extract

    if reason := missing("pymupdf"):
        yield Row("extraction of a PDF without an outline", float("nan"), {"get_text()": reason})
        return
    pdfs = [p for p in extract.default_pdfs() if "NO_OUTLINE" in p.name and p.exists()]
    if quick:
        pdfs = pdfs[:1]
    if not pdfs:
        yield Row("extraction of a PDF without an outline", float("nan"),
                  {"get_text()": f"no PDF in {extract.REAL}"})  # fmt: skip
    for path in pdfs:
        r = extract.measure(path, 1 if quick else max(3, repeats))
        cpu = {side: statistics.median(x[0] for x in rs) for side, rs in r["runs"].items()}
        wall = {side: statistics.median(x[1] for x in rs) for side, rs in r["runs"].items()}
        bare = cpu["bare"]
        note = (
            f"{r['pages']} pages; extractDICT floor {cpu['floor'] / bare:.2f}× the plain pass; "
            f"{r['workers']} processes: CPU {cpu['pool'] / bare:.2f}×, "
            f"wall {wall['pool'] / wall['bare']:.2f}× (serial {wall['serial'] / wall['bare']:.2f}×)"
        )
        yield Row(f"extraction, {path.name}", cpu["serial"], {"plain get_text() pass": bare}, note)


def client_row(quick: bool, repeats: int) -> Iterator[Row]:
    import questions

    if reason := missing("openai"):
        yield Row("question client", float("nan"), {"AsyncOpenAI + semaphore": reason})
        return
    latency, flight, n = (0.5, 256, 1_024) if quick else (2.0, 256, 2_048)
    servers = [questions.start_server(latency) for _ in range(4)]
    urls = [url for _, url in servers]
    try:
        runs: dict[str, list[tuple[float, float]]] = {"searchtome": [], "plain": []}
        for _ in range(1 if quick else max(1, repeats // 2)):
            runs["searchtome"].append(questions.run_client(urls, flight, n, "aiohttp"))
            runs["plain"].append(_plain_openai(urls, flight, n))
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait()
    ideal = flight / latency
    rate = {k: statistics.median(r for r, _ in v) / ideal for k, v in runs.items()}
    ms = {k: statistics.median(m for _, m in v) for k, v in runs.items()}
    note = (
        f"4 endpoints × {flight} in flight, {latency} s latency, {n:,} requests: "
        f"{rate['searchtome']:.0%} of ideal vs {rate['plain']:.0%}; "
        f"CPU {ms['searchtome']:.2f} vs {ms['plain']:.2f} ms per request"
    )
    yield Row("question client (CPU per request)", ms["searchtome"] / 1000,
              {"AsyncOpenAI + semaphore": ms["plain"] / 1000}, note)  # fmt: skip


def _plain_openai(urls: list[str], flight: int, n: int) -> tuple[float, float]:
    """The loop a user would write: one AsyncOpenAI per endpoint, round robin, a semaphore."""
    import asyncio

    from openai import AsyncOpenAI

    async def main() -> tuple[float, float]:
        clients = [AsyncOpenAI(base_url=u, api_key="x", max_retries=0) for u in urls]
        gate = asyncio.Semaphore(flight)

        async def one(i: int) -> str:
            async with gate:
                reply = await clients[i % len(clients)].chat.completions.create(
                    model="bench",
                    messages=[{"role": "user", "content": f"Passage: item{i} text"}],
                )
                return reply.choices[0].message.content or ""

        start, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu0
        for c in clients:
            await c.close()
        return n / elapsed, 1000 * used / n

    return asyncio.run(main())


# -- the table ---------------------------------------------------------------------------------

ROWS: dict[str, Callable[[bool, int], Iterator[Row]]] = {
    "metrics": metrics_row,
    "significance": significance_row,
    "bm25": bm25_row,
    "encoding": encoding_row,
    "trec": trec_rows,
    "pdf": pdf_rows,
    "client": client_row,
}


def machine() -> str:
    from trec_reading import _cpu_model

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{_cpu_model()}, {usable} usable cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer rounds")
    parser.add_argument("--rows", default=",".join(ROWS), help="which rows, comma-separated")
    parser.add_argument("--repeats", type=int, default=0, help="rounds (default 3, --quick 2)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 3)
    wanted = [r for r in args.rows.split(",") if r]
    unknown = sorted(set(wanted) - set(ROWS))
    if unknown:
        parser.error(f"unknown row {unknown[0]!r}; choose from {', '.join(ROWS)}")
    mode = "--quick" if args.quick else "full"
    print(f"{machine()}; load average {os.getloadavg()[0]:.2f} before; {mode}, {repeats} rounds; "
          "ratio = searchtome ÷ peer, CPU time (below 1 = faster); each row as it finishes\n")  # fmt: skip
    print("\n".join(HEADER), flush=True)

    def emit(row: Row) -> None:
        print("\n".join(markdown(row)), flush=True)

    rows = run_rows({name: partial(ROWS[name], args.quick, repeats) for name in wanted}, emit)
    failed = [row.what for row in rows if row.failed]
    print(f"\nload average {os.getloadavg()[0]:.2f} after", end="")
    print(f"; failed rows: {', '.join(failed)}" if failed else "")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
