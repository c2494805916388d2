"""Question-generation throughput against a local OpenAI-compatible server with a fixed latency.

    python benchmarks/questions.py [--latency 0.25] [--concurrency 1,4,16,64] [--markdown]

Reference run: the ideal throughput ``concurrency / latency`` (a server that answers every request
after exactly ``latency`` seconds, with no cost on our side). Two of our paths are measured
against it:

* ``client``: ``ChatClient.complete_many`` alone (HTTP, JSON, retries machinery, semaphore);
* ``generator``: the full ``QuestionGenerator`` path a build uses: prompt rendering, cache lookup,
  the request, a committed SQLite write per reply, reply parsing.

Target: >= 80 % of ideal at concurrency 16. The server (``tests/fixtures/fake_openai.py``) runs in its own
process so its threads do not compete with the client for the GIL.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.fake_openai", "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    return proc, base_url


def run_client(base_url: str, concurrency: int, n: int) -> float:
    from searchtome.llm.client import ChatClient, ChatRequest, ClientConfig

    client = ChatClient(ClientConfig(base_url=base_url, model="bench", concurrency=concurrency))
    requests = [
        ChatRequest(str(i), ({"role": "user", "content": f"Passage: item{i} text"},))
        for i in range(n)
    ]
    start = time.perf_counter()
    results = client.run_many(requests)
    elapsed = time.perf_counter() - start
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return n / elapsed


def run_generator(base_url: str, concurrency: int, n: int, tag: str) -> float:
    from searchtome.generate.questions import GenerationConfig, QuestionGenerator
    from searchtome.llm.cache import ResponseCache
    from searchtome.llm.client import ChatClient, ClientConfig
    from searchtome.records import Unit

    cfg = ClientConfig(base_url=base_url, model="bench", concurrency=concurrency)
    words = ["alder", "birch", "cedar", "dune", "elm", "fern", "glen", "heath", "iris"]
    units = [
        Unit(
            f"b/{i}#u1",
            f"b/{i}",
            "b",
            (f"b/{i}#p1",),
            f"The {words[i % 9]} and {words[(i * 7) % 9]} of run {tag} unit {i} grow slowly.",
        )
        for i in range(n)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "c.sqlite")
        gen = QuestionGenerator(
            GenerationConfig(),
            cache,
            ChatClient(cfg),
            host=cfg.host,
            model="bench",
            sampling=cfg.sampling,
        )
        start = time.perf_counter()
        outcomes = gen.run(units)
        elapsed = time.perf_counter() - start
        cache.close()
    assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok][:3]
    return n / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per request")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument(
        "--waves", type=int, default=8, help="requests per run = waves x concurrency"
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    proc, base_url = start_server(args.latency)
    rows = []
    try:
        run_client(base_url, 4, 8)  # warm-up: imports, first connections
        for c in levels:
            n = max(args.waves * c, 16)
            ideal = c / args.latency
            client = run_client(base_url, c, n)
            generator = run_generator(base_url, c, n, tag=f"c{c}")
            rows.append((c, n, ideal, client, generator))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    header = [
        "concurrency",
        "requests",
        "ideal req/s",
        "client req/s",
        "client/ideal",
        "generator req/s",
        "generator/ideal",
    ]
    lines = []
    if args.markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
    else:
        lines.append("  ".join(f"{h:>15}" for h in header))
    for c, n, ideal, client, gen in rows:
        cells = [
            str(c),
            str(n),
            f"{ideal:.1f}",
            f"{client:.1f}",
            f"{client / ideal:.0%}",
            f"{gen:.1f}",
            f"{gen / ideal:.0%}",
        ]
        lines.append(
            "| " + " | ".join(cells) + " |"
            if args.markdown
            else "  ".join(f"{x:>15}" for x in cells)
        )
    print(f"latency {args.latency:.3f} s per request; reference = ideal (concurrency / latency)")
    print("\n".join(lines))
    at16 = [r for r in rows if r[0] == 16]
    if at16:
        ok = at16[0][3] / at16[0][2] >= 0.8
        print(f"target >= 80% of ideal at concurrency 16: {'met' if ok else 'NOT met'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
