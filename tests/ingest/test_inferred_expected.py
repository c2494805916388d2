"""The ToC inferred for each real PDF without an outline, against a committed expectation.

Inference reads every span of a book (``searchtome.ingest.styled``) and is tuned for speed;
this pins what it must keep finding: every entry's level, title, page and position, and a
digest of each leaf's text (the sections cut at those headings). The expectations were made
with PyMuPDF 2.0 (MuPDF 1.28.5); a PyMuPDF upgrade that moves text may change them, and a
deliberate change of the rules does. Regenerate with ``python tests/ingest/test_inferred_expected.py``
and review the diff.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from searchtome.ingest.extract import extract_book

REAL_PDFS = Path(__file__).resolve().parents[3] / "shared" / "realpdfs"
NO_OUTLINE = sorted(REAL_PDFS.glob("*NO_OUTLINE*.pdf")) if REAL_PDFS.is_dir() else []
EXPECTED = Path(__file__).with_name("expected")


def inferred(pdf: Path) -> dict:
    """What is compared: the inferred entries and a digest of every leaf's text."""
    ex = extract_book(pdf, infer_toc=True)
    return {
        "source": ex.toc.source,
        "entries": [
            [n.level, n.title, n.page, None if n.y is None else round(n.y, 2)] for n in ex.toc.nodes
        ],
        "leaves": {
            leaf.leaf_id: hashlib.sha256(leaf.text.encode()).hexdigest()[:16] for leaf in ex.leaves
        },
    }


def expected_path(pdf: Path) -> Path:
    return EXPECTED / f"{pdf.stem}.inferred.json"


@pytest.mark.skipif(not NO_OUTLINE, reason="../shared/realpdfs is not available")
@pytest.mark.parametrize("pdf", NO_OUTLINE, ids=lambda p: p.name)
def test_inferred_toc_matches_the_committed_one(pdf: Path) -> None:
    want = json.loads(expected_path(pdf).read_text(encoding="utf-8"))
    got = inferred(pdf)
    assert got["source"] == want["source"] == "inferred"
    assert len(got["entries"]) == len(want["entries"])
    for i, (g, w) in enumerate(zip(got["entries"], want["entries"], strict=True)):
        assert g == w, (i, g, w)
    assert got["leaves"] == want["leaves"]


def _dumps(found: dict) -> str:
    """One entry and one leaf per line, so a change reads as a short diff."""
    entries = ",\n".join(f"  {json.dumps(e, ensure_ascii=False)}" for e in found["entries"])
    leaves = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in found["leaves"].items())
    source = json.dumps(found["source"])
    return f'{{"source": {source},\n"entries": [\n{entries}\n],\n"leaves": {{\n{leaves}\n}}}}\n'


if __name__ == "__main__":  # regenerate the expectations
    from searchtome.settings import set_progress

    set_progress(False)
    EXPECTED.mkdir(exist_ok=True)
    for pdf in NO_OUTLINE:
        text = _dumps(inferred(pdf))
        assert json.loads(text) == json.loads(json.dumps(inferred(pdf)))
        expected_path(pdf).write_text(text, encoding="utf-8")
        print(f"wrote {expected_path(pdf)}", file=sys.stderr)
