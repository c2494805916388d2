"""A PDF without an outline is read once: ToC inference's text pages also give the section
text, and the extraction is byte-identical to reading the file a second time."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchtome.ingest import infer_toc, layout
from searchtome.ingest.extract import extract_book, write_extraction

REAL_PDFS = Path(__file__).resolve().parents[3] / "shared" / "realpdfs"
NO_OUTLINE = sorted(REAL_PDFS.glob("*NO_OUTLINE*.pdf")) if REAL_PDFS.is_dir() else []


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.skipif(not NO_OUTLINE, reason="../shared/realpdfs is not available")
@pytest.mark.parametrize("pdf", NO_OUTLINE, ids=lambda p: p.name)
def test_inferred_pdf_is_read_once_with_identical_output(pdf, tmp_path, monkeypatch) -> None:
    reads: list[int] = []
    real_read_page = layout._read_page
    monkeypatch.setattr(
        layout, "_read_page", lambda page, flags: (reads.append(1), real_read_page(page, flags))[1]
    )
    once = extract_book(pdf, infer_toc=True)
    assert reads == []  # every page's blocks came from inference's text pages
    with monkeypatch.context() as m:
        m.setattr(infer_toc, "remember_pages", lambda doc, pages: None)  # the old two reads
        twice = extract_book(pdf, infer_toc=True)
    assert len(reads) > 0
    write_extraction(once, tmp_path / "once")
    write_extraction(twice, tmp_path / "twice")
    assert _files(tmp_path / "once") == _files(tmp_path / "twice")
    assert once == twice
