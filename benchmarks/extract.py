"""Full extraction (ToC + leaves + paragraphs) against a bare PyMuPDF text pass, same file.

    python benchmarks/extract.py [PDF ...] [--repeat N] [--workers N]

Reference run: ``page.get_text()`` over every page of the same PDF, i.e. the least any
extraction has to pay. The sides alternate ``--repeat`` times per file and the median (and
best) of each is compared. Each side's CPU time is that of this process and of the worker
processes it waited for (``getrusage``: self + children), so a pool's work counts in full; on
a shared machine CPU time is the comparable figure, wall time is printed beside it (with the
load average before and after). For the pool, the CPU time of this process alone is printed
too: the workers read their pages while it reads its own share, so on a machine where each
process has a free core that is about the pool's wall time.

Sides, per PDF:

* **plain**: the ``get_text()`` pass above;
* **serial**: the extraction in one process (``SEARCHTOME_THREADS=1``);
* **pool** (PDFs without an outline): the same with ToC inference reading the pages in
  ``--workers`` processes (default: what ``searchtome`` would use, ``searchtome.ingest.reading``;
  a book under ``MIN_POOL_PAGES`` pages is read in one process, so pool = serial there);
* **floor** (PDFs without an outline): a text page, its ``extractDICT`` and its ``extractBLOCKS``
  per page with no Python work at all, the least that inference can pay (``extractDICT`` is the
  only MuPDF output with every span's font, flags, size and exact box).

Default PDFs: the real PDFs without an outline in ../shared/realpdfs (``*NO_OUTLINE*``; their
ToC is inferred from the page layout, ``--infer-toc``) and two outlined manuals (gdb, GNU make).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "realpdfs"
OUTLINED = ("gdb_manual.pdf", "gnu_make_manual.pdf")


def default_pdfs() -> list[Path]:
    return sorted(REAL.glob("*NO_OUTLINE*.pdf")) + [REAL / n for n in OUTLINED]


def bare_pass(path: Path) -> int:
    import pymupdf

    with pymupdf.open(path) as doc:
        return sum(len(page.get_text()) for page in doc)


def dict_floor(path: Path) -> int:
    """What inference cannot avoid: each page's text page, its dict and its blocks."""
    import pymupdf

    from searchtome.ingest.layout import text_flags

    flags = text_flags()
    n = 0
    with pymupdf.open(path) as doc:
        for page in doc:
            textpage = page.get_textpage(flags=flags)
            n += len(textpage.extractDICT()["blocks"]) + len(textpage.extractBLOCKS())
    return n


def full_extraction(path: Path) -> tuple[int, int, int, str]:
    from searchtome.ingest.extract import extract_book

    ex = extract_book(path, infer_toc="auto")  # an outline when there is one, else inferred
    return len(ex.toc.nodes), len(ex.leaves), len(ex.paragraphs), ex.toc.source


def cpu_seconds() -> tuple[float, float]:
    """User + system CPU of this process and of the children it has waited for, and of this
    process alone."""
    import resource

    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    mine = own.ru_utime + own.ru_stime
    return mine + children.ru_utime + children.ru_stime, mine


def timed(fn: Callable[[Path], object], path: Path) -> tuple[float, float, float]:
    """(CPU s with the workers', wall s, CPU s of this process) of one call."""
    wall, (cpu, mine) = time.perf_counter(), cpu_seconds()
    fn(path)
    cpu_after, mine_after = cpu_seconds()
    return cpu_after - cpu, time.perf_counter() - wall, mine_after - mine


@contextlib.contextmanager
def threads_setting(workers: str) -> Iterator[None]:
    """``SEARCHTOME_THREADS=workers`` for the block ("" leaves the setting as it is)."""
    before = os.environ.get("SEARCHTOME_THREADS")
    if workers:
        os.environ["SEARCHTOME_THREADS"] = workers
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SEARCHTOME_THREADS", None)
        else:
            os.environ["SEARCHTOME_THREADS"] = before


def with_workers(workers: str) -> Callable[[Path], tuple[int, int, int, str]]:
    """The extraction under :func:`threads_setting`."""

    def run(path: Path) -> tuple[int, int, int, str]:
        with threads_setting(workers):
            return full_extraction(path)

    return run


def measure(path: Path, repeat: int, workers: str = "") -> dict[str, object]:
    """Interleaved runs of the plain pass, the serial extraction and (no outline only) the
    pooled one and the floor; each run is (CPU s, wall s)."""
    import pymupdf

    with pymupdf.open(path) as doc:
        n_pages, outlined = doc.page_count, bool(doc.get_toc())
    sides: dict[str, Callable[[Path], object]] = {"bare": bare_pass, "serial": with_workers("1")}
    if not outlined:
        sides.update(pool=with_workers(workers), floor=dict_floor)
    # Warm-up: imports, font caches and the OS file cache count for no side.
    counts = {name: fn(path) for name, fn in sides.items()}
    if not outlined and counts["pool"] != counts["serial"]:
        raise SystemExit(f"{path.name}: the pool's extraction differs from the serial one")
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    for _ in range(repeat):  # interleaved, so load changes hit every side alike
        for name, fn in sides.items():
            runs[name].append(timed(fn, path))
    workers_used = _pool_size(path, workers) if not outlined else 1
    return {
        "pages": n_pages,
        "outlined": outlined,
        "runs": runs,
        "counts": counts["serial"],
        "workers": workers_used,
    }


def _pool_size(path: Path, workers: str) -> int:
    import pymupdf

    from searchtome.ingest.reading import pool_size

    with pymupdf.open(path) as doc, threads_setting(workers):
        return pool_size(doc)


def _stat(rs: list[tuple[float, float, float]], i: int, how: Callable) -> float:
    return how(r[i] for r in rs) if rs else float("nan")


def report(results: dict[Path, dict]) -> None:
    med = statistics.median
    print(
        f"{'file':<36} {'pages':>5} {'ToC':<8} {'side':<7} {'CPU s':>6} {'wall s':>6} "
        f"{'CPU ×plain':>10} {'wall ×plain':>11}"
    )
    for path, r in results.items():
        runs = r["runs"]
        bare_cpu, bare_wall = _stat(runs["bare"], 0, med), _stat(runs["bare"], 1, med)
        nodes, leaves, paras, source = r["counts"]
        for i, (side, rs) in enumerate(runs.items()):
            cpu, wall = _stat(rs, 0, med), _stat(rs, 1, med)
            label = {"bare": "plain", "pool": f"pool×{r['workers']}"}.get(side, side)
            head = f"{path.name:<36} {r['pages']:>5} {source:<8}" if i == 0 else " " * 51
            ratios = "" if side == "bare" else f"{cpu / bare_cpu:>9.2f}x {wall / bare_wall:>10.2f}x"
            if side == "pool" and r["workers"] > 1:
                own = _stat(rs, 2, med)
                ratios += f"   this process {own:.3f} s: {own / bare_cpu:.2f}x"
            print(f"{head} {label:<7} {cpu:>6.3f} {wall:>6.3f} {ratios}")
        print(f"{'':<51} ({nodes} nodes, {leaves} leaves, {paras} paragraphs)")
    print(
        "median of the interleaved runs; CPU = this process + its waited-for workers; "
        "ratio = side / plain get_text() of the same file;\n'this process': the pool's own "
        "share, about its wall time when every process has a core of its own"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", nargs="*", type=Path, help="default: see the module docstring")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--workers", default="", help="SEARCHTOME_THREADS for the pool side (default: as set)"
    )
    args = parser.parse_args(argv)
    pdfs = args.pdf or default_pdfs()
    missing = [p for p in pdfs if not p.exists()]
    if missing:
        print(f"benchmark PDF not found: {missing[0]}", file=sys.stderr)
        return 2
    import pymupdf

    from searchtome.settings import set_progress

    set_progress(False)
    print(
        f"PyMuPDF {pymupdf.VersionBind}, {args.repeat} interleaved runs per file; "
        f"load average {os.getloadavg()[0]:.2f} before",
        flush=True,
    )
    results = {path: measure(path, args.repeat, args.workers) for path in pdfs}
    report(results)
    print(f"load average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
