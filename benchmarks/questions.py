"""Question-generation throughput against a local OpenAI-compatible server with a fixed latency.

    python benchmarks/questions.py [--latency 0.25] [--concurrency 1,4,16,64] [--endpoints 1]
        [--transports sdk,aiohttp] [--repeat 1] [--profile] [--markdown]

Reference run: the ideal throughput ``concurrency / latency`` (a server that answers every request
after exactly ``latency`` seconds, with no cost on our side). Two of our paths are measured
against it:

* ``client``: ``ChatClient.complete_many`` alone (HTTP, JSON, retries machinery, semaphore);
* ``generator``: the full ``QuestionGenerator`` path a build uses: prompt rendering, cache lookup,
  the request, a committed SQLite write per reply, reply parsing.

Both are run over each HTTP path in ``--transports`` (``ClientConfig.transport``): ``sdk`` is
the openai SDK's (httpx), ``aiohttp`` the lean default; interleaved, in one run, so an A/B sees
the same load. ``--repeat N`` runs everything N times and prints the median of each cell, with
the load (``uptime``) before and after. The CPU milliseconds per request (this process's CPU
time over the requests) depend much less on the machine's load than the rates do.
``--profile`` prints where the client's CPU goes (cProfile, top functions by own time) for one
run at the highest concurrency over each transport.

Clocks start once the client's connection pools exist (for the SDK path, one SDK client per 16
requests an endpoint carries, ~70 ms each to create): a build pays that once, not per request.

With ``--endpoints N`` there are N servers (replicas) and the client routes over all of them
(``concurrency`` is the total). Targets: >= 80 % of ideal at concurrency 16, and >= 90 % at
concurrency 256 over 4 endpoints with a 2 s latency. Each server
(``tests/fixtures/fake_openai.py``) runs in its own process so its threads do not compete with
the client for the GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

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


if TYPE_CHECKING:
    from searchtome.llm.client import ClientConfig


def client_config(urls: list[str], concurrency: int, transport: str) -> ClientConfig:
    """The client settings both measured paths use: the same endpoints, bound and transport."""
    from searchtome.llm.client import ClientConfig, Transport

    return ClientConfig(
        base_urls=tuple(urls),
        model="bench",
        concurrency=concurrency,
        transport=Transport(transport),
    )


def run_client(
    urls: list[str],
    concurrency: int,
    n: int,
    transport: str,
    profile: cProfile.Profile | None = None,
) -> tuple[float, float]:
    """Requests per second, and this process's CPU milliseconds per request."""
    from searchtome.llm.client import ChatClient, ChatRequest

    client = ChatClient(client_config(urls, concurrency, transport))
    requests = [
        ChatRequest(str(i), ({"role": "user", "content": f"Passage: item{i} text"},))
        for i in range(n)
    ]

    async def timed() -> tuple[list, float, float]:
        async with client:  # connection pools opened before the clock starts (see main)
            start, cpu = time.perf_counter(), time.process_time()
            if profile is not None:
                profile.enable()
            results = await client.complete_many(requests)
            if profile is not None:
                profile.disable()
            return results, time.perf_counter() - start, time.process_time() - cpu

    results, elapsed, cpu = asyncio.run(timed())
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return n / elapsed, 1000 * cpu / n


def run_generator(
    urls: list[str], concurrency: int, n: int, tag: str, transport: str
) -> tuple[float, float]:
    from searchtome.generate.questions import GenerationConfig, QuestionGenerator
    from searchtome.llm.cache import ResponseCache
    from searchtome.llm.client import ChatClient
    from searchtome.records import Unit

    cfg = client_config(urls, concurrency, transport)
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


def uptime() -> str:
    """``uptime``'s load figures (the machine is shared: every figure depends on them)."""
    out = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    return out or f"load average {os.getloadavg()}"


def top_functions(profile: cProfile.Profile, limit: int = 25) -> str:
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("tottime").print_stats(limit)
    lines = text.getvalue().splitlines()
    root = str(Path(sys.executable).resolve().parents[1])
    return "\n".join(line.replace(root, "").replace(str(ROOT), ".") for line in lines)


def measure(
    urls: list[str], levels: list[int], transports: list[str], args: argparse.Namespace
) -> dict[tuple[int, str], list[tuple[float, float, float, float]]]:
    """(client req/s, client CPU ms, generator req/s, generator CPU ms) per level and transport,
    one tuple per repetition; the transports interleaved so that each sees the same load."""
    runs: dict[tuple[int, str], list[tuple[float, float, float, float]]] = {}
    for rep in range(args.repeat):
        for c in levels:
            n = max(args.waves * c, 16)
            for t in transports:
                client, client_cpu = run_client(urls, c, n, t)
                generator, gen_cpu = run_generator(urls, c, n, tag=f"c{c}{t}{rep}", transport=t)
                runs.setdefault((c, t), []).append((client, client_cpu, generator, gen_cpu))
    return runs


def table(
    runs: dict[tuple[int, str], list[tuple[float, float, float, float]]],
    latency: float,
    waves: int,
    markdown: bool,
) -> list[str]:
    header = [
        "concurrency",
        "transport",
        "requests",
        "ideal req/s",
        "client req/s",
        "client/ideal",
        "generator req/s",
        "generator/ideal",
        "client CPU ms/req",
        "generator CPU ms/req",
    ]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
    else:
        lines.append("  ".join(f"{h:>15}" for h in header))
    for (c, t), reps in runs.items():
        ideal = c / latency
        client, client_cpu, gen, gen_cpu = (statistics.median(x) for x in zip(*reps, strict=True))
        cells = [
            str(c),
            t,
            str(max(waves * c, 16)),
            f"{ideal:.1f}",
            f"{client:.1f}",
            f"{client / ideal:.0%}",
            f"{gen:.1f}",
            f"{gen / ideal:.0%}",
            f"{client_cpu:.2f}",
            f"{gen_cpu:.2f}",
        ]
        lines.append(
            "| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{x:>15}" for x in cells)
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per request")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--endpoints", type=int, default=1, help="servers to route over")
    parser.add_argument(
        "--waves", type=int, default=8, help="requests per run = waves x concurrency"
    )
    parser.add_argument(
        "--transports", default="sdk,aiohttp", help="HTTP paths to compare (sdk, aiohttp)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of everything; medians shown")
    parser.add_argument("--profile", action="store_true", help="where the client's CPU goes")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    servers = [start_server(args.latency) for _ in range(args.endpoints)]
    urls = [url for _, url in servers]
    before = uptime()
    profiles: dict[str, cProfile.Profile] = {}
    try:
        for t in transports:
            run_client(urls, 4, 8, t)  # warm-up: imports, first connections
        runs = measure(urls, levels, transports, args)
        after = uptime()
        if args.profile:
            top = max(levels)
            for t in transports:
                profiles[t] = cProfile.Profile()
                run_client(urls, top, max(args.waves * top, 16), t, profiles[t])
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=10)
    print(
        f"latency {args.latency:.3f} s per request, {args.endpoints} endpoint(s); "
        "reference = ideal (concurrency / latency)"
        + (f"; median of {args.repeat} runs" if args.repeat > 1 else "")
    )
    print("\n".join(table(runs, args.latency, args.waves, args.markdown)))
    print(f"uptime before: {before}")
    print(f"uptime after:  {after}  ({os.cpu_count()} CPUs)")
    for t, profile in profiles.items():
        print(f"\nwhere the client's CPU goes, transport {t} (cProfile inflates every figure):")
        print(top_functions(profile))
    ok = True
    default = "aiohttp" if "aiohttp" in transports else transports[-1]
    for level, share in ((16, 0.8), (256, 0.9)):
        for (c, t), reps in runs.items():
            if c != level or t != default:
                continue
            met = statistics.median(r[0] for r in reps) / (c / args.latency) >= share
            ok = ok and met  # the client's share, as the targets were set
            print(
                f"target >= {share:.0%} of ideal at concurrency {level} ({t}): "
                f"{'met' if met else 'NOT met'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
