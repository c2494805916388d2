"""Full extraction (ToC + leaves + paragraphs) against a bare PyMuPDF text pass, same file.

    python benchmarks/extract.py [PDF ...] [--repeat N]

Reference run: ``page.get_text()`` over every page of the same PDF, i.e. the least any
extraction has to pay. The two runs alternate ``--repeat`` times per file and the median (and
best) of each is compared. CPU time (``time.process_time``) is the headline figure because it
does not count time spent waiting for a core on a shared machine; wall time is printed too.

Default PDFs: the real PDFs without an outline in ../shared/realpdfs (``*NO_OUTLINE*``; their
ToC is inferred from the page layout, ``--infer-toc``) and two outlined manuals (gdb, GNU make),
so one run prints both kinds of ratio and the one between them. Targets: outlined <= 1.5x;
without an outline the issue asks <= 1.4x, which ``extractDICT`` alone (the only MuPDF output
with every span's font, flags, size and exact box, which inference needs) does not allow:
the ``floor`` column is a text page, its ``extractDICT`` and its ``extractBLOCKS`` per page,
with no Python work at all.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
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


def timed(fn: Callable[[Path], object], path: Path) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(path)
    return time.process_time() - cpu, time.perf_counter() - wall, out


def measure(path: Path, repeat: int) -> dict[str, object]:
    """Interleaved runs of the reference, the floor (no outline only) and the extraction."""
    import pymupdf

    with pymupdf.open(path) as doc:
        n_pages, outlined = doc.page_count, bool(doc.get_toc())
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "full": [], "floor": []}
    # Warm-up: imports, font caches and the OS file cache count for no side.
    bare_pass(path)
    counts = full_extraction(path)
    for _ in range(repeat):  # interleaved, so load changes hit every side alike
        runs["bare"].append(timed(bare_pass, path)[:2])
        runs["full"].append(timed(full_extraction, path)[:2])
        if not outlined:
            runs["floor"].append(timed(dict_floor, path)[:2])
    return {"pages": n_pages, "outlined": outlined, "runs": runs, "counts": counts}


def _stat(rs: list[tuple[float, float]], i: int, how: Callable) -> float:
    return how(r[i] for r in rs) if rs else float("nan")


def report(results: dict[Path, dict]) -> None:
    print(
        f"{'file':<38} {'pages':>5} {'ToC':<8} {'bare CPU':>8} {'full CPU':>8} "
        f"{'ratio':>6} {'best':>6} {'wall':>6} {'floor':>6}"
    )
    ratios: dict[bool, list[float]] = {True: [], False: []}
    for path, r in results.items():
        runs = r["runs"]
        bare, full = (
            _stat(runs["bare"], 0, statistics.median),
            _stat(runs["full"], 0, statistics.median),
        )
        best = _stat(runs["full"], 0, min) / _stat(runs["bare"], 0, min)
        wall = _stat(runs["full"], 1, statistics.median) / _stat(runs["bare"], 1, statistics.median)
        floor = _stat(runs["floor"], 0, statistics.median) / bare
        ratios[r["outlined"]].append(full / bare)
        nodes, leaves, paras, source = r["counts"]
        print(
            f"{path.name:<38} {r['pages']:>5} {source:<8} {bare:>7.2f}s {full:>7.2f}s "
            f"{full / bare:>5.2f}x {best:>5.2f}x {wall:>5.2f}x "
            + (f"{floor:>5.2f}x" if runs["floor"] else f"{'':>6}")
            + f"   ({nodes} nodes, {leaves} leaves, {paras} paragraphs)"
        )
    print("ratios: CPU time, median over runs, extraction / plain get_text() of the same file")
    for outlined, label in ((False, "without an outline (inferred)"), (True, "outlined")):
        if ratios[outlined]:
            rs = ratios[outlined]
            print(f"  {label:<30} {min(rs):.2f}-{max(rs):.2f}x")
    if ratios[True] and ratios[False]:
        worst_inferred, worst_outlined = max(ratios[False]), max(ratios[True])
        print(
            f"  without / with an outline: {worst_inferred / worst_outlined:.2f}x (worst of each)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", nargs="*", type=Path, help="default: see the module docstring")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    pdfs = args.pdf or default_pdfs()
    missing = [p for p in pdfs if not p.exists()]
    if missing:
        print(f"benchmark PDF not found: {missing[0]}", file=sys.stderr)
        return 2
    import os

    import pymupdf

    from searchtome.settings import set_progress

    set_progress(False)
    print(
        f"PyMuPDF {pymupdf.VersionBind}, {args.repeat} interleaved runs per file; "
        f"load average {os.getloadavg()[0]:.2f} before",
        flush=True,
    )
    results = {path: measure(path, args.repeat) for path in pdfs}
    report(results)
    print(f"load average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
