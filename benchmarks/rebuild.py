"""Full-rebuild simulation: ``build --pdf-dir`` on 1, 3, 6 and all real PDFs against four local
servers that answer like Mixtral would, to see how time and memory grow with the books.

    python benchmarks/rebuild.py [--realpdfs ../shared/realpdfs] [--work /tmp/rebuild-bench]
        [--steps 1,3,6,all] [--endpoints 4] [--concurrency 256] [--latency 2,4] [--markdown]

Each step runs ``searchtome.generate.pipeline.build`` in a subprocess of its own (its peak RSS is
the child's ``ru_maxrss``), with a fresh ``SEARCHTOME_HOME`` and a pdf-dir of symlinks under
``--work``, so nothing is reused between steps and nothing is written into the repository. The
child first times the extraction on its own (``extract_all``; the build then reads it back from
its stage cache), then runs the whole build. The "all" step adds the PDFs without an outline and
sets ``--infer-toc`` (a PDF with an outline keeps it; only those two get inferred headings).

The servers (``tests/fixtures/fake_openai.py``, one process each) wait a latency drawn per
request, uniform in ``--latency`` and seeded by the request, and reply with Mixtral-shaped
questions (``mixtral_reply``). Ideal request rate = concurrency / mean drawn latency; the rate
reached is the servers' answers over the time from the first request's arrival to the last
answer. The last lines extrapolate the per-page and per-unit figures to the paper's 18 books.
Any failed step, failed unit or request-count mismatch ends the run with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PDFS = ROOT.parent / "shared" / "realpdfs"
# Mixed sizes, small first, so each step adds both short and long books; files not named here
# (other folders) follow in name order. The two without an outline come only with "all".
ORDER = (
    "gnu_make_manual",
    "nist_sp800-61r2_incident_handling",
    "forallx-bris_2020",
    "irs_i1040_instructions_2017",
    "gawk_manual_ed4.2",
    "ethereum_yellowpaper_eip150_2018-01-04",
)
# The paper's SearchTome (Table 1) and what The Whole Child's units ask under "auto":
# 3,262 questions over 547 units (docs/build.md).
PAPER_PAGES, PAPER_LEAVES, PAPER_QUESTIONS = 12_475, 2_880, 190_209
WHOLE_CHILD_QUESTIONS_PER_UNIT = 3_262 / 547


class BenchError(Exception):
    """A step that did not do what a rebuild must: reported as one line, exit status 1."""


@dataclass
class Step:
    name: str
    pdfs: list[Path]
    infer_toc: bool


def plan_steps(folder: Path, wanted: list[str]) -> list[Step]:
    pdfs = sorted(folder.glob("*.pdf"))
    if not pdfs:
        raise BenchError(f"{folder}: no PDF files (pass --realpdfs)")
    rank = {name: i for i, name in enumerate(ORDER)}
    outlined = sorted(
        (p for p in pdfs if "NO_OUTLINE" not in p.name),
        key=lambda p: (rank.get(p.stem, len(ORDER)), p.name),
    )
    steps = []
    for want in wanted:
        if want == "all":
            steps.append(Step("all", pdfs, infer_toc=True))
            continue
        n = int(want)
        if n > len(outlined):
            raise BenchError(f"step {n}: only {len(outlined)} PDFs with an outline in {folder}")
        steps.append(Step(str(n), outlined[:n], infer_toc=False))
    return steps


# -- the servers -------------------------------------------------------------------------------
def start_servers(count: int, latency: str, seed: int) -> list[tuple[subprocess.Popen[str], str]]:
    servers = []
    for i in range(count):
        cmd = [sys.executable, "-m", "tests.fixtures.fake_openai", "--mixtral"]
        cmd += ["--latency-range", latency, "--seed", str(seed + i)]
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            stop_servers([*servers, (proc, "")])
            raise BenchError(f"fake server {i + 1} did not start (exit {proc.poll()})")
        servers.append((proc, url))
    return servers


def stop_servers(servers: list[tuple[subprocess.Popen[str], str]]) -> None:
    for proc, _ in servers:
        proc.terminate()
        proc.wait(timeout=10)


def server_stats(urls: list[str]) -> list[dict[str, Any]]:
    out = []
    for url in urls:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as reply:
            out.append(json.loads(reply.read()))
    return out


# -- one step, in a child process ----------------------------------------------------------------
def child(spec_file: Path, result_file: Path) -> None:
    """Runs in the step's subprocess: time the extraction alone, then the whole build."""
    from searchtome.generate.options import BuildOptions
    from searchtome.generate.pipeline import build
    from searchtome.generate.sources import books_from_pdf_dir, extract_all
    from searchtome.io import write_json

    spec = json.loads(spec_file.read_text())
    opts = BuildOptions(
        out=Path(spec["out"]),
        pdf_dir=Path(spec["pdf_dir"]),
        endpoint=tuple(spec["urls"]),
        concurrency=spec["concurrency"],
        infer_toc=spec["infer_toc"],
    )
    start = time.monotonic()
    sources, _ = books_from_pdf_dir(opts)
    extractions, _ = extract_all(sources, opts.infer_toc)
    pages = sum(e.toc.n_pages for e in extractions.values())
    extract_s = time.monotonic() - start
    del extractions  # the build reads them back from its stage cache
    summary = build(opts)
    result = {
        "pages": pages,
        "extract_s": extract_s,
        "build_s": summary.seconds,
        "books": summary.books,
        "leaves": summary.leaves,
        "units": summary.units,
        "requests": summary.requests,
        "generated": summary.generated,
        "questions": sum(summary.questions.values()),
        "failures": [list(f) for f in summary.failures[:5]],
        "n_failures": len(summary.failures),
    }
    write_json(result_file, result)


def run_step(step: Step, args: argparse.Namespace) -> dict[str, Any]:
    folder = args.work / f"step-{step.name}"
    if folder.exists():
        raise BenchError(f"{folder} exists: give an empty --work folder (no reuse between steps)")
    (folder / "pdfs").mkdir(parents=True)
    for pdf in step.pdfs:
        (folder / "pdfs" / pdf.name).symlink_to(pdf.resolve())
    servers = start_servers(args.endpoints, args.latency, args.seed)
    urls = [url for _, url in servers]
    spec = {
        "out": str(folder / "data"),
        "pdf_dir": str(folder / "pdfs"),
        "urls": urls,
        "concurrency": args.concurrency,
        "infer_toc": step.infer_toc,
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "SEARCHTOME_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(folder / "spec.json"),
        str(folder / "r.json"),
    ]
    try:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=folder)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        stats = server_stats(urls)
    finally:
        stop_servers(servers)
    if proc.returncode != 0:
        raise BenchError(f"step {step.name}: the build exited {proc.returncode} (output above)")
    result = json.loads((folder / "r.json").read_text())
    result.update(wall_s=wall, rss_mib=usage.ru_maxrss / 1024, name=step.name)
    return check_step(result, stats, args.concurrency)


def check_step(result: dict[str, Any], stats: list[dict[str, Any]], conc: int) -> dict[str, Any]:
    answered = sum(s["answered"] for s in stats)
    name = result["name"]
    if result["n_failures"]:
        raise BenchError(f"step {name}: {result['n_failures']} units failed: {result['failures']}")
    if answered != result["requests"] or not answered:
        raise BenchError(
            f"step {name}: the servers answered {answered} requests, the build counted "
            f"{result['requests']}"
        )
    window = max(s["last_answer"] for s in stats) - min(s["first_arrival"] for s in stats)
    mean_latency = sum(s["latency_total"] for s in stats) / answered
    result.update(
        gen_s=window,
        rate=answered / window,
        ideal=conc / mean_latency,
        mean_latency=mean_latency,
        per_server=[s["answered"] for s in stats],
    )
    return result


# -- reporting ----------------------------------------------------------------------------------
COLUMNS = (
    "books", "pages", "leaves", "units", "requests", "wall s", "peak RSS MiB", "generate s",
    "req/s", "ideal req/s", "of ideal", "extract s", "extract ms/page",
)  # fmt: skip


def cells(r: dict[str, Any]) -> list[str]:
    return [
        f"{r['books']}" + (" (all)" if r["name"] == "all" else ""),
        f"{r['pages']:,}",
        f"{r['leaves']:,}",
        f"{r['units']:,}",
        f"{r['requests']:,}",
        f"{r['wall_s']:.1f}",
        f"{r['rss_mib']:.0f}",
        f"{r['gen_s']:.1f}",
        f"{r['rate']:.1f}",
        f"{r['ideal']:.1f}",
        f"{r['rate'] / r['ideal']:.0%}",
        f"{r['extract_s']:.1f}",
        f"{1000 * r['extract_s'] / r['pages']:.1f}",
    ]


def table(rows: list[dict[str, Any]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---:|" * len(COLUMNS)]
        return lines + ["| " + " | ".join(cells(r)) + " |" for r in rows]
    widths = [max(len(c), 9) for c in COLUMNS]
    lines = ["  ".join(c.rjust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    for r in rows:
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells(r), widths, strict=True)))
    return lines


def growth(rows: list[dict[str, Any]]) -> list[str]:
    """Cost per page and per unit at each step, and a straight-line fit of peak memory."""
    lines = ["growth (linear = flat per-page/per-unit figures):"]
    for r in rows:
        other = r["wall_s"] - r["extract_s"] - r["gen_s"]
        lines.append(
            f"  {r['name']:>3} books: extraction {1000 * r['extract_s'] / r['pages']:.1f} ms/page, "
            f"wall {1000 * r['wall_s'] / r['units']:.1f} ms/unit, outside extraction and requests "
            f"{1000 * other / r['units']:.2f} ms/unit, peak RSS {r['rss_mib']:.0f} MiB "
            f"({1024 * r['rss_mib'] / r['units']:.1f} KiB/unit)"
        )
    if len(rows) >= 2:
        slope, base = fit([r["units"] for r in rows], [r["rss_mib"] for r in rows])
        lines.append(
            f"  peak RSS ~ {base:.0f} MiB + {1024 * slope:.1f} KiB x units (least squares)"
        )
    return lines


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs) or 1.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var
    return slope, my - slope * mx


def extrapolate(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """The last step's rates applied to the paper's 18 books; the arithmetic is printed."""
    last = rows[-1]
    ms_page = 1000 * last["extract_s"] / last["pages"]
    per_unit = WHOLE_CHILD_QUESTIONS_PER_UNIT
    units = PAPER_QUESTIONS / per_unit
    requests = units * last["requests"] / last["units"]
    slope, base = fit([r["units"] for r in rows], [r["rss_mib"] for r in rows])
    lat, conc = args.replica_latency, args.replica_concurrency
    lines = [
        f"extrapolation to the paper's SearchTome ({PAPER_PAGES:,} pages, {PAPER_LEAVES:,} "
        f"leaves, {PAPER_QUESTIONS:,} questions), from the '{last['name']}' step:",
        f"  extraction: {PAPER_PAGES:,} pages x {ms_page:.1f} ms = "
        f"{PAPER_PAGES * ms_page / 60000:.1f} min (one core)",
        f"  units: {PAPER_QUESTIONS:,} questions / {per_unit:.2f} per unit (auto, The Whole Child)"
        f" = {units:,.0f}",
        f"  requests: {units:,.0f} units x {last['requests'] / last['units']:.3f} requests/unit "
        f"= {requests:,.0f}",
        f"  peak RSS: {base:.0f} MiB + {1024 * slope:.1f} KiB x {units:,.0f} = "
        f"{base + slope * units:,.0f} MiB",
        f"  requests at {lat:g} s per reply, {conc} in flight per replica, "
        f"{last['rate'] / last['ideal']:.0%} of ideal as measured here:",
    ]
    for n in (1, 4, 8):
        ideal = n * conc / lat
        hours = requests / (ideal * last["rate"] / last["ideal"]) / 3600
        lines.append(
            f"    {n} replica(s): {requests:,.0f} / ({n} x {conc} / {lat:g} s = {ideal:.1f} req/s"
            f" x {last['rate'] / last['ideal']:.2f}) = {hours:.2f} h"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realpdfs", type=Path, default=DEFAULT_PDFS)
    parser.add_argument("--work", type=Path, default=Path("/tmp/searchtome-rebuild-bench"))
    parser.add_argument("--steps", default="1,3,6,all")
    parser.add_argument("--endpoints", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=256, help="in flight, all servers")
    parser.add_argument("--latency", default="2,4", help="LOW,HIGH seconds per reply")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--replica-latency", type=float, default=6.0, help="extrapolation")
    parser.add_argument("--replica-concurrency", type=int, default=64, help="extrapolation")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    try:
        return report(args)
    except BenchError as exc:
        print(f"rebuild: error: {exc}", file=sys.stderr)
        return 1


def report(args: argparse.Namespace) -> int:
    work_root = args.work.resolve()
    if work_root.is_relative_to(ROOT):
        raise BenchError(f"--work {args.work} is inside the repository; use a folder outside it")
    args.work = work_root / time.strftime("%Y%m%d-%H%M%S")
    steps = plan_steps(args.realpdfs, args.steps.split(","))
    rows = []
    for step in steps:
        print(f"== step {step.name}: {len(step.pdfs)} PDFs, load {os.getloadavg()[0]:.1f}")
        rows.append(run_step(step, args))
        r = rows[-1]
        print(f"== step {step.name} done in {r['wall_s']:.1f} s; per server {r['per_server']}")
    low, high = args.latency.split(",")
    print(
        f"\n{args.endpoints} servers, latency uniform {low}-{high} s per reply (seeded), "
        f"concurrency {args.concurrency} in all; {os.cpu_count()} CPUs, "
        f"load average now {os.getloadavg()[0]:.1f}"
    )
    print("\n".join(table(rows, args.markdown)))
    print("\n".join(growth(rows)))
    print("\n".join(extrapolate(rows, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
