"""The sample corpus: the sources parse strictly, have the promised shape, and render to PDFs
whose outline (read back with our own ToC reader) has exactly the expected leaves."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from searchtome.errors import SearchTomeError
from searchtome.records import DOMAINS
from searchtome.sample.books import (
    load_sample_books,
    parse_book,
    render_sample,
    sample_catalog,
    sample_dir,
)


def test_sample_catalog_has_three_books_in_three_domains() -> None:
    catalog = sample_catalog()
    assert len(catalog.books) >= 3
    assert len({b.domain for b in catalog.books}) == len(catalog.books)
    assert {b.domain for b in catalog.books} <= set(DOMAINS)
    for book in catalog.books:
        assert book.license == "CC BY 4.0 (SearchTome project)"
        assert book.restrictions == ()
        assert (sample_dir() / f"{book.book_id}.md").is_file()


@pytest.mark.parametrize("sample", load_sample_books(), ids=lambda s: s.book_id)
def test_each_book_has_the_promised_shape(sample) -> None:
    leaves = sample.leaves()
    assert 15 <= len(leaves) <= 30
    assert sample.depth() in (2, 3)
    depths = Counter(len(leaf.path) for leaf in leaves)
    assert depths[2] and depths[3], "leaves at two and at three levels"
    assert len({leaf.leaf_id for leaf in leaves}) == len(leaves)
    assert all(re.fullmatch(rf"{sample.book_id}/\d+(\.\d+)*", leaf.leaf_id) for leaf in leaves)
    # Repeated leaf titles, as in real textbooks; their paths tell them apart.
    repeated = [t for t, n in Counter(leaf.title for leaf in leaves).items() if n > 1]
    assert repeated
    assert len({leaf.path for leaf in leaves}) == len(leaves)
    for leaf in leaves:
        paragraphs = leaf.text.split("\n\n")
        assert 2 <= len(paragraphs) <= 5, leaf.leaf_id
        assert all(len(p.split()) >= 25 for p in paragraphs), leaf.leaf_id


def test_no_paragraph_is_repeated_anywhere() -> None:
    paragraphs = [
        p for s in load_sample_books() for leaf in s.leaves() for p in leaf.text.split("\n\n")
    ]
    assert len(set(paragraphs)) == len(paragraphs)


def test_leaves_are_distinguishable_by_their_own_words() -> None:
    # A question about a leaf can single it out only if the leaf says things no other leaf of
    # its book says: every leaf needs words of its own (chapter summaries, which restate their
    # chapter, fewer).
    for sample in load_sample_books():
        leaves = sample.leaves()
        docs = [set(re.findall(r"[a-z]+", leaf.text.lower())) for leaf in leaves]
        df = Counter(w for d in docs for w in d)
        titles = Counter(leaf.title for leaf in leaves)
        for leaf, doc in zip(leaves, docs, strict=True):
            own = {w for w in doc if df[w] == 1 and len(w) > 3}
            assert len(own) >= (2 if titles[leaf.title] > 1 else 8), (leaf.leaf_id, sorted(own))


def test_content_hash_follows_source_and_entry() -> None:
    samples = load_sample_books()
    hashes = {s.content_hash() for s in samples}
    assert len(hashes) == len(samples)
    assert [s.content_hash() for s in load_sample_books()] == [s.content_hash() for s in samples]


# --- the parser --------------------------------------------------------------------------------


def test_parser_nests_and_joins_wrapped_lines() -> None:
    text = (
        "# One\n\nIntro of one,\nwrapped.\n\n## Leaf A\n\nFirst para.\n\nSecond\npara.\n"
        "## Leaf B\nOnly para.\n# Two\n\nA top-level leaf.\n"
    )
    sections = parse_book(text)
    assert [s.title for s in sections] == ["One", "Two"]
    one = sections[0]
    assert one.paragraphs == ("Intro of one, wrapped.",) and not one.is_leaf
    assert [c.title for c in one.children] == ["Leaf A", "Leaf B"]
    assert one.children[0].paragraphs == ("First para.", "Second para.")
    assert sections[1].is_leaf and sections[1].text == "A top-level leaf."


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("# A\n### B\ntext\n", 2, "skips a level"),
        ("# A\n## B\n### C\n#### D\ntext\n", 4, "at most 3"),
        ("preface\n# A\ntext\n", 1, "text before the first heading"),
        ("# A\ntext\n## B\n", 3, "leaf 'B' has no text"),
        ("# A\n\n#   \n", 3, "empty heading"),
    ],
)
def test_parser_errors_name_file_and_line(text: str, line: int, message: str) -> None:
    with pytest.raises(SearchTomeError) as info:
        parse_book(text, "book.md")
    assert str(info.value).startswith(f"book.md:{line}: ")
    assert message in str(info.value)


def test_parser_needs_a_heading() -> None:
    with pytest.raises(SearchTomeError, match="no headings"):
        parse_book("\n\n")


# --- rendering ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return render_sample(tmp_path_factory.mktemp("sample"))


def test_rendered_outline_has_exactly_the_expected_leaves(rendered: dict[str, Path]) -> None:
    from searchtome.ingest.toc import read_toc

    samples = {s.book_id: s for s in load_sample_books()}
    assert set(rendered) == set(samples)
    for book_id, pdf in rendered.items():
        tree = read_toc(pdf, book_id=book_id)
        assert tree.source == "outline"
        got = [(n.node_id, n.path) for n in tree.leaves()]
        want = [(leaf.leaf_id, leaf.path) for leaf in samples[book_id].leaves()]
        assert got == want
        pages = [n.page for n in tree.nodes]
        assert all(p is not None for p in pages) and pages == sorted(pages)
        # Several entries share a page: headings sit mid-page, not one section per page.
        assert len(set(pages)) < len(pages)


def test_extraction_recovers_every_leaf_text(rendered: dict[str, Path]) -> None:
    from searchtome.ingest.extract import extract_book

    def words(text: str) -> list[str]:
        return text.split()

    for sample in load_sample_books():
        extraction = extract_book(rendered[sample.book_id], book_id=sample.book_id)
        got = {leaf.leaf_id: leaf.text for leaf in extraction.leaves}
        for leaf in sample.leaves():
            assert words(got[leaf.leaf_id]) == words(leaf.text), leaf.leaf_id


def test_render_is_deterministic_and_skips_unchanged_books(
    rendered: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from searchtome.sample import render

    again = render_sample(tmp_path, ["law-primer"])
    assert list(again) == ["law-primer"]
    pdf = again["law-primer"]
    assert pdf.read_bytes() == rendered["law-primer"].read_bytes()
    calls = []
    original = render.render_book
    monkeypatch.setattr(render, "render_book", lambda *a, **k: calls.append(a) or original(*a, **k))
    assert render_sample(tmp_path, ["law-primer"]) == again
    assert calls == []  # nothing changed: nothing rendered
    pdf.write_bytes(pdf.read_bytes() + b"\n% tampered\n")
    render_sample(tmp_path, ["law-primer"])
    assert len(calls) == 1
    assert pdf.read_bytes() == rendered["law-primer"].read_bytes()
    stamp = tmp_path / "law-primer.pdf.json"
    stamp.write_text(stamp.read_text().replace('"key": "', '"key": "0'))
    render_sample(tmp_path, ["law-primer"])
    assert len(calls) == 2  # a different content key renders again


def test_render_unknown_id(tmp_path: Path) -> None:
    with pytest.raises(SearchTomeError, match=r"unknown sample book 'money'.*money-primer"):
        render_sample(tmp_path, ["money"])
    assert list(tmp_path.iterdir()) == []
