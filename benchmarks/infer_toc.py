"""How well ``--infer-toc`` recovers real outlines: leaf precision/recall per PDF.

    python benchmarks/infer_toc.py [PDF_DIR]      # prints a markdown table

Reference: the PDF's own outline (read with ``searchtome.ingest.toc.read_toc``). The inferred ToC is
computed with the outline ignored (``infer="always"``). A leaf matches when its title agrees
(numbering aside, see ``searchtome.ingest.infer_toc.titles_match``) and its page is within one page;
matching is one-to-one. "entry" columns do the same over all entries, leaf or not, which does
not penalise a tree that is deeper or shallower than the outline. PDFs without an outline are
listed with the size of the tree inferred for them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT.parent / "shared" / "realpdfs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    from searchtome.errors import SearchTomeError
    from searchtome.ingest.infer_toc import entry_agreement, leaf_agreement
    from searchtome.ingest.toc import read_toc
    from searchtome.settings import set_progress

    set_progress(False)
    pdfs = sorted(args.pdf_dir.glob("*.pdf"))
    if not pdfs:
        print(f"no PDFs in {args.pdf_dir}", file=sys.stderr)
        return 2
    print(
        "| PDF | pages | outline leaves | inferred leaves | matched | leaf P | leaf R | leaf F1 "
        "| entry P | entry R | s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = [0, 0, 0]
    scores = []
    for pdf in pdfs:
        start = time.perf_counter()
        inferred = read_toc(pdf, infer="always")
        seconds = time.perf_counter() - start
        n_inf = sum(n.is_leaf for n in inferred.nodes)
        try:
            reference = read_toc(pdf)
        except SearchTomeError:
            print(
                f"| {pdf.name} | {inferred.n_pages} | (no outline) | {n_inf} "
                f"({len(inferred.nodes)} entries) | | | | | | | {seconds:.1f} |"
            )
            continue
        a = leaf_agreement(reference.nodes, inferred.nodes)
        e = entry_agreement(reference.nodes, inferred.nodes)
        totals[0] += a.true_leaves
        totals[1] += a.inferred_leaves
        totals[2] += a.matched
        scores.append(a)
        print(
            f"| {pdf.name} | {inferred.n_pages} | {a.true_leaves} | {a.inferred_leaves} | "
            f"{a.matched} | {a.precision:.2f} | {a.recall:.2f} | {a.f1:.2f} | "
            f"{e.precision:.2f} | {e.recall:.2f} | {seconds:.1f} |"
        )
    if scores:
        micro_p = totals[2] / totals[1] if totals[1] else 0.0
        micro_r = totals[2] / totals[0] if totals[0] else 0.0
        macro_p = sum(a.precision for a in scores) / len(scores)
        macro_r = sum(a.recall for a in scores) / len(scores)
        print(
            f"| **all (micro)** | | {totals[0]} | {totals[1]} | {totals[2]} | {micro_p:.2f} | "
            f"{micro_r:.2f} | | | | |"
        )
        print(f"| **macro mean** | | | | | {macro_p:.2f} | {macro_r:.2f} | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
