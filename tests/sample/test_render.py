"""The book renderer: deterministic PDFs whose outline and text are exactly what it reports."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from searchtome.sample.render import (
    BookSpec,
    Section,
    break_outline_entry,
    encrypt,
    remove_outline,
    render_book,
    sample_spec,
)


def test_deterministic_bytes(tmp_path: Path) -> None:
    a = render_book(sample_spec(seed=1), tmp_path / "a.pdf")
    b = render_book(sample_spec(seed=1), tmp_path / "b.pdf")
    assert a.path.read_bytes() == b.path.read_bytes()
    assert (
        render_book(sample_spec(seed=2), tmp_path / "c.pdf").path.read_bytes()
        != a.path.read_bytes()
    )


def test_reported_layout_matches_the_pdf(tmp_path: Path) -> None:
    book = render_book(sample_spec(), tmp_path / "book.pdf")
    with pymupdf.open(book.path) as doc:
        assert doc.page_count == book.n_pages
        assert doc.get_toc() == book.toc()
        for section in book.sections:
            page = doc[section.page - 1]
            hits = page.search_for(section.outline_title)
            assert any(abs(hit.y0 - section.y) < 3 for hit in hits), section.key
            first_words = " ".join(section.paragraphs[0].split()[:4]) if section.paragraphs else ""
            if first_words:
                assert (
                    first_words
                    in doc[section.page - 1].get_text()
                    + doc[min(section.page, doc.page_count - 1)].get_text()
                )
        heads = {"Sample Book", "1"}
        assert heads <= set(book.running_heads)


def test_labels_and_outline_titles(tmp_path: Path) -> None:
    spec = BookSpec(
        "Labels",
        (Section("Basics", label="Chapter 1", outline_title="1 Basics", text=("Text.",)),),
    )
    book = render_book(spec, tmp_path / "l.pdf")
    with pymupdf.open(book.path) as doc:
        assert doc.get_toc() == [[1, "1 Basics", 1]]
        assert "Chapter 1 Basics" in doc[0].get_text()


def test_page_text_must_be_latin1(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Latin-1"):
        render_book(BookSpec("T", (Section("Dash", text=("an — dash",)),)), tmp_path / "x.pdf")
    # Outline titles may be anything.
    render_book(
        BookSpec("T", (Section("Plain", outline_title="数学 — ü", text=("ok",)),)),
        tmp_path / "y.pdf",
    )
    with pytest.raises(ValueError, match="at least one section"):
        render_book(BookSpec("T", ()), tmp_path / "z.pdf")


def test_edge_case_helpers(tmp_path: Path) -> None:
    book = render_book(sample_spec(chapters=2), tmp_path / "book.pdf")
    beyond = break_outline_entry(book.path, tmp_path / "beyond.pdf", 1, "beyond")
    with pymupdf.open(beyond) as doc:
        assert doc.get_toc() == []  # PyMuPDF's silent failure, reproduced
        assert doc.xref_get_key(doc.pdf_catalog(), "Outlines")[0] == "xref"
    nowhere = break_outline_entry(book.path, tmp_path / "nowhere.pdf", 1, "nowhere")
    with pymupdf.open(nowhere) as doc:
        assert doc.get_toc()[1][2] <= 0
    with pymupdf.open(remove_outline(book.path, tmp_path / "bare.pdf")) as doc:
        assert doc.get_toc() == []
    with pymupdf.open(encrypt(book.path, tmp_path / "u.pdf", user_password="pw")) as doc:
        assert doc.needs_pass
    with pymupdf.open(encrypt(book.path, tmp_path / "o.pdf")) as doc:
        assert not doc.needs_pass and doc.metadata["encryption"]
    with pytest.raises(ValueError, match="unknown breakage"):
        break_outline_entry(book.path, tmp_path / "x.pdf", 1, "sideways")  # type: ignore[arg-type]


def test_front_matter_gets_its_own_page(tmp_path: Path) -> None:
    spec = BookSpec(
        "Front",
        (Section("First", text=("Body.",)),),
        front_matter=("A title page blurb.",),
    )
    book = render_book(spec, tmp_path / "f.pdf")
    assert book.n_pages == 2 and book.sections[0].page == 2
