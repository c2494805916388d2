"""How many questions a build asks per page, against the paper's rate: the figures behind the
build's defaults for remote endpoints (docs/build.md, "How the defaults were derived").

    python benchmarks/question_counts.py [--realpdfs ../shared/realpdfs] [--peer ../shared/peer/whole-child]

For each real PDF with an outline: pages, generation units (default unit sizes), unit characters
per page, and the questions asked per page and characters per asked question with 6 questions per
unit and with ``auto``. *The Whole Child* comes from the independent release's paragraphs (its
PDF is not stored here), without the paragraphs that release removed (media credits, URLs); it is
the one book of the paper whose text and question count are both at hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchtome.generate.questions import questions_for  # noqa: E402
from searchtome.generate.units import make_units  # noqa: E402
from searchtome.records import Leaf, Paragraph, Unit  # noqa: E402

HEADER = (
    "| text | pages | units | units/page | chars/page | asked/page (6) | asked/page (auto) "
    "| chars/question (6) | chars/question (auto) |"
)


def row(name: str, pages: int, units: Sequence[Unit]) -> str:
    chars = sum(len(u.text) for u in units)
    six = 6 * len(units)
    auto = sum(questions_for(u.text, "auto") for u in units)
    return (
        f"| {name} | {pages:,} | {len(units):,} | {len(units) / pages:.1f} | {chars / pages:,.0f} "
        f"| {six / pages:.1f} | {auto / pages:.1f} | {chars / six:.0f} | {chars / auto:.0f} |"
    )


def real_pdf_rows(folder: Path) -> list[str]:
    from searchtome.ingest.extract import extract_book

    rows = []
    for pdf in sorted(folder.glob("*.pdf")):
        if "NO_OUTLINE" in pdf.name:  # no outline: no leaves the paper's way
            continue
        extraction = extract_book(pdf)
        units, _ = make_units(extraction.leaves, extraction.paragraphs)
        rows.append(row(pdf.stem, extraction.toc.n_pages, units))
    return rows


def whole_child_row(peer: Path) -> str:
    """The release's cleaned paragraphs, made into units by our rule (183 pages: its PDF's)."""
    derived = peer / "data" / "derived"
    removed = {
        r["source_paragraph_id"]
        for r in json.loads((derived / "whole-child-generation-removals.json").read_text())
    }
    rows = json.loads((derived / "whole-child-paragraphs.json").read_text())
    paragraphs = [
        Paragraph(r["id"], r["leaf_id"], r["text"], r.get("page_start"))
        for r in rows
        if r["id"] not in removed
    ]
    leaf_ids = list(dict.fromkeys(p.leaf_id for p in paragraphs))
    leaves = [Leaf(leaf_id, "whole-child", (), leaf_id, "", None, None) for leaf_id in leaf_ids]
    units, _ = make_units(leaves, paragraphs)
    return row("The Whole Child (release paragraphs)", 183, units)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realpdfs", type=Path, default=ROOT.parent / "shared" / "realpdfs")
    parser.add_argument(
        "--peer", type=Path, default=ROOT.parent / "shared" / "peer" / "whole-child"
    )
    args = parser.parse_args(argv)
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    if args.peer.is_dir():
        print(whole_child_row(args.peer))
    for line in real_pdf_rows(args.realpdfs):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
