"""Full extraction (ToC + leaves + paragraphs) against a bare PyMuPDF text pass, same file.

    python benchmarks/extract.py [PDF] [--repeat N]

Reference run: ``page.get_text()`` over every page of the same PDF, i.e. the least any
extraction has to pay. Target: ratio <= 1.5. The two runs alternate ``--repeat`` times and the
best of each is compared. CPU time (``time.process_time``) is the headline figure because it
does not count time spent waiting for a core on a shared machine; wall time is printed too.
Default PDF: ../shared/realpdfs/gdb_manual.pdf (822 pages).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PDF = ROOT.parent / "shared" / "realpdfs" / "gdb_manual.pdf"


def bare_pass(path: Path) -> int:
    import pymupdf

    with pymupdf.open(path) as doc:
        return sum(len(page.get_text()) for page in doc)


def full_extraction(path: Path) -> tuple[int, int, int]:
    from searchtome.ingest.extract import extract_book

    ex = extract_book(path, infer_toc="auto")  # an outline when there is one, else inferred
    return len(ex.toc.nodes), len(ex.leaves), len(ex.paragraphs)


def timed(fn: Callable[[Path], object], path: Path) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(path)
    return time.process_time() - cpu, time.perf_counter() - wall, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", nargs="?", type=Path, default=DEFAULT_PDF)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    if not args.pdf.exists():
        print(f"benchmark PDF not found: {args.pdf}", file=sys.stderr)
        return 2
    import pymupdf

    from searchtome.settings import set_progress

    set_progress(False)
    # Warm-up: imports, font caches and the OS file cache count for neither side.
    bare_pass(args.pdf)
    full_extraction(args.pdf)
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "full": []}
    counts: object = None
    chars: object = None
    for _ in range(args.repeat):  # interleaved, so load changes hit both sides alike
        cpu, wall, chars = timed(bare_pass, args.pdf)
        runs["bare"].append((cpu, wall))
        cpu, wall, counts = timed(full_extraction, args.pdf)
        runs["full"].append((cpu, wall))
    with pymupdf.open(args.pdf) as doc:
        n_pages = doc.page_count

    def best(name: str, i: int) -> float:
        return min(r[i] for r in runs[name])

    def median(name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[name])

    print(
        f"file: {args.pdf.name} ({n_pages} pages), PyMuPDF {pymupdf.VersionBind}, {args.repeat} runs each"
    )
    print(f"{'run':<46} {'CPU best':>9} {'CPU med':>8} {'wall best':>10} {'wall med':>9}")
    labels = {
        "bare": "reference: page.get_text() on every page",
        "full": "searchtome extract_book (ToC+leaves+paras)",
    }
    for name, label in labels.items():
        print(
            f"{label:<46} {best(name, 0):>8.2f}s {median(name, 0):>7.2f}s "
            f"{best(name, 1):>9.2f}s {median(name, 1):>8.2f}s"
        )
    cpu_ratio = best("full", 0) / best("bare", 0)
    wall_ratio = best("full", 1) / best("bare", 1)
    print(f"ratio, CPU time (best/best):  {cpu_ratio:.2f}x  (target <= 1.5x)")
    print(f"ratio, wall time (best/best): {wall_ratio:.2f}x")
    nodes, leaves, paragraphs = counts  # type: ignore[misc]
    print(
        f"extracted: {nodes} ToC nodes, {leaves} leaves, {paragraphs} paragraphs; bare text {chars:,} chars"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
