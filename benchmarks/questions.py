"""Question-generation throughput against a local OpenAI-compatible server with a fixed latency.

    python benchmarks/questions.py [--latency 0.25] [--concurrency 1,4,16,64] [--endpoints 1]
        [--markdown]

Reference run: the ideal throughput ``concurrency / latency`` (a server that answers every request
after exactly ``latency`` seconds, with no cost on our side). Two of our paths are measured
against it:

* ``client``: ``ChatClient.complete_many`` alone (HTTP, JSON, retries machinery, semaphore);
* ``generator``: the full ``QuestionGenerator`` path a build uses: prompt rendering, cache lookup,
  the request, a committed SQLite write per reply, reply parsing.

Clocks start once the client's connection pools exist (one SDK client per 16 requests an
endpoint carries, ~70 ms each to create): a build pays that once, not per request.

With ``--endpoints N`` there are N servers (replicas) and the client routes over all of them
(``concurrency`` is the total). Targets: >= 80 % of ideal at concurrency 16, and >= 90 % at
concurrency 256 over 4 endpoints with a 2 s latency. Each server
(``tests/fixtures/fake_openai.py``) runs in its own process so its threads do not compete with
the client for the GIL.
"""

from __future__ import annotations

import argparse
import asyncio
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


def run_client(urls: list[str], concurrency: int, n: int) -> tuple[float, float]:
    """Requests per second, and this process's CPU milliseconds per request."""
    from searchtome.llm.client import ChatClient, ChatRequest, ClientConfig

    cfg = ClientConfig(base_urls=tuple(urls), model="bench", concurrency=concurrency)
    client = ChatClient(cfg)
    requests = [
        ChatRequest(str(i), ({"role": "user", "content": f"Passage: item{i} text"},))
        for i in range(n)
    ]

    async def timed() -> tuple[list, float, float]:
        async with client:  # connection pools opened before the clock starts (see main)
            start, cpu = time.perf_counter(), time.process_time()
            results = await client.complete_many(requests)
            return results, time.perf_counter() - start, time.process_time() - cpu

    results, elapsed, cpu = asyncio.run(timed())
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return n / elapsed, 1000 * cpu / n


def run_generator(urls: list[str], concurrency: int, n: int, tag: str) -> tuple[float, float]:
    from searchtome.generate.questions import GenerationConfig, QuestionGenerator
    from searchtome.llm.cache import ResponseCache
    from searchtome.llm.client import ChatClient, ClientConfig
    from searchtome.records import Unit

    cfg = ClientConfig(base_urls=tuple(urls), model="bench", concurrency=concurrency)
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
        client = ChatClient(cfg)
        gen = QuestionGenerator(
            GenerationConfig(),
            cache,
            client,
            host=cfg.hosts[0],
            model="bench",
            sampling=cfg.sampling,
        )

        async def timed() -> tuple[list, float, float]:
            async with client:
                start, cpu = time.perf_counter(), time.process_time()
                outcomes = await gen.generate(units)
                return outcomes, time.perf_counter() - start, time.process_time() - cpu

        outcomes, elapsed, cpu = asyncio.run(timed())
        cache.close()
    assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok][:3]
    return n / elapsed, 1000 * cpu / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per request")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--endpoints", type=int, default=1, help="servers to route over")
    parser.add_argument(
        "--waves", type=int, default=8, help="requests per run = waves x concurrency"
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    servers = [start_server(args.latency) for _ in range(args.endpoints)]
    urls = [url for _, url in servers]
    rows = []
    cpu_lines: list[str] = []
    try:
        run_client(urls, 4, 8)  # warm-up: imports, first connections
        for c in levels:
            n = max(args.waves * c, 16)
            ideal = c / args.latency
            client, client_cpu = run_client(urls, c, n)
            generator, gen_cpu = run_generator(urls, c, n, tag=f"c{c}")
            rows.append((c, n, ideal, client, generator))
            cpu_lines.append(
                f"concurrency {c}: {client_cpu:.2f} ms CPU per request (client), "
                f"{gen_cpu:.2f} ms (generator)"
            )
    finally:
        for proc, _ in servers:
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
    print(
        f"latency {args.latency:.3f} s per request, {args.endpoints} endpoint(s); "
        "reference = ideal (concurrency / latency)"
    )
    print("\n".join(lines))
    print("\n".join(cpu_lines))
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    ok = True
    for level, share in ((16, 0.8), (256, 0.9)):
        for row in (r for r in rows if r[0] == level):
            met = row[3] / row[2] >= share  # the client's share, as the targets were set
            ok = ok and met
            print(
                f"target >= {share:.0%} of ideal at concurrency {level}: {'met' if met else 'NOT met'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
