"""The ToC tree: outline quirks, generated edge cases, the CLI and all twelve real PDFs."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.errors import SearchTomeError
from searchtome.ingest.outline import OutlineEntry
from searchtome.ingest.toc import build_tree, read_toc
from searchtome.sample.render import (
    BookSpec,
    RenderedBook,
    Section,
    break_outline_entry,
    remove_outline,
    render_book,
    sample_spec,
)
from searchtome.titles import clean_title
from tests.conftest import REALPDFS

# --------------------------------------------------------------------------------------------
# Tree building


def _tree(entries: list[OutlineEntry], n_pages: int = 10):
    return build_tree(entries, book_id="bk", n_pages=n_pages, source="outline")


def test_ids_parents_paths_and_leaves() -> None:
    tree = _tree(
        [
            OutlineEntry(1, "One", 1),
            OutlineEntry(2, "Summary", 2),
            OutlineEntry(2, "Details", 3),
            OutlineEntry(3, "Deep", 3),
            OutlineEntry(1, "Two", 4),
            OutlineEntry(2, "Summary", 5),
        ]
    )
    got = [(n.node_id, n.parent_id, n.level, n.is_leaf, n.path) for n in tree.nodes]
    assert got == [
        ("bk/1", None, 1, False, ("One",)),
        ("bk/1.1", "bk/1", 2, True, ("One", "Summary")),
        ("bk/1.2", "bk/1", 2, False, ("One", "Details")),
        ("bk/1.2.1", "bk/1.2", 3, True, ("One", "Details", "Deep")),
        ("bk/2", None, 1, False, ("Two",)),
        ("bk/2.1", "bk/2", 2, True, ("Two", "Summary")),
    ]
    # Duplicate titles stay distinct through their paths and ids.
    assert len({n.node_id for n in tree.nodes}) == len(tree.nodes)
    assert [n.node_id for n in tree.leaves()] == ["bk/1.1", "bk/1.2.1", "bk/2.1"]
    assert tree.warnings == ()


def test_level_skips_attach_to_nearest_parent() -> None:
    tree = _tree(
        [OutlineEntry(2, "Starts deep", 1), OutlineEntry(1, "A", 2), OutlineEntry(4, "Skip", 3)]
    )
    assert [(n.node_id, n.level) for n in tree.nodes] == [("bk/1", 1), ("bk/2", 1), ("bk/2.1", 2)]
    assert len(tree.warnings) == 2 and "jumps from level 1 to 4" in tree.warnings[1]


def test_titles_are_cleaned_and_empty_ones_named() -> None:
    tree = _tree(
        [
            OutlineEntry(1, "  Stray \n whitespace\t ", 1),
            OutlineEntry(1, "", 2),
            OutlineEntry(1, "\u00a0\u200b", 3),
            OutlineEntry(1, "Introdução à Lógica — ü", 4),
        ]
    )
    assert [n.title for n in tree.nodes] == [
        "Stray whitespace",
        "(untitled)",
        "(untitled)",
        "Introdução à Lógica — ü",
    ]
    assert sum("empty title" in w for w in tree.warnings) == 2
    assert clean_title("a\u00adb\x00c") == "ab c"


@pytest.mark.parametrize("page", [0, -1, 11, None])
def test_unresolvable_pages_become_none_with_a_warning(page: int | None) -> None:
    tree = _tree([OutlineEntry(1, "Fine", 1), OutlineEntry(1, "Dangling", page)])
    assert tree.nodes[1].page is None and tree.nodes[1].y is None
    if page is not None:
        assert any("Dangling" in w for w in tree.warnings)


def test_json_shape() -> None:
    tree = _tree([OutlineEntry(1, "A", 1), OutlineEntry(2, "B", 2)])
    data = tree.to_json()
    assert list(data) == ["book_id", "source", "n_pages", "nodes", "warnings"]
    assert data["nodes"][1] == {
        "id": "bk/1.1",
        "title": "B",
        "level": 2,
        "page": 2,
        "parent": "bk/1",
        "is_leaf": True,
        "path": ["A", "B"],
    }


# --------------------------------------------------------------------------------------------
# Generated PDFs


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> RenderedBook:
    return render_book(sample_spec(), tmp_path_factory.mktemp("toc") / "sample-book.pdf")


def _check_against(tree, book: RenderedBook) -> None:
    assert [(n.level, n.title, n.page) for n in tree.nodes] == [
        (s.level, s.outline_title, s.page) for s in book.sections
    ]
    assert [n.node_id.split("/")[1] for n in tree.nodes] == [s.key for s in book.sections]
    for node, section in zip(tree.nodes, book.sections, strict=True):
        # The outline points 4 pt above each heading's top.
        assert node.y is not None and abs(node.y - (section.y - 4)) < 1.0


def test_outline_of_a_rendered_book(rendered: RenderedBook) -> None:
    tree = read_toc(rendered.path)
    assert tree.book_id == "sample-book" and tree.source == "outline"
    assert tree.n_pages == rendered.n_pages and tree.warnings == ()
    _check_against(tree, rendered)


def test_named_destinations_are_read_in_page_coordinates(tmp_path: Path) -> None:
    book = render_book(replace(sample_spec(), named_destinations=True), tmp_path / "named.pdf")
    _check_against(read_toc(book.path), book)


def test_outline_entry_beyond_the_document_is_recovered(
    tmp_path: Path, rendered: RenderedBook, caplog: pytest.LogCaptureFixture
) -> None:
    import pymupdf

    broken = break_outline_entry(rendered.path, tmp_path / "beyond.pdf", 3, "beyond")
    with pymupdf.open(broken) as doc:  # the PyMuPDF behaviour this guards against
        assert doc.get_toc() == []
    with caplog.at_level(logging.WARNING):
        tree = read_toc(broken)
    assert len(tree.nodes) == len(rendered.sections)
    assert tree.nodes[3].page is None
    assert [n.title for n in tree.nodes] == [s.outline_title for s in rendered.sections]
    others = [n for i, n in enumerate(tree.nodes) if i != 3]
    assert [n.page for n in others] == [s.page for i, s in enumerate(rendered.sections) if i != 3]
    assert "read with pypdf" in tree.warnings[0]
    assert "empty ToC although the file has an outline" in caplog.text


def test_entry_pointing_nowhere(tmp_path: Path, rendered: RenderedBook) -> None:
    tree = read_toc(break_outline_entry(rendered.path, tmp_path / "nowhere.pdf", 2, "nowhere"))
    assert tree.nodes[2].page is None
    assert "no-such-destination" in tree.warnings[0]


def test_outline_titles_with_whitespace_empty_and_non_ascii(
    tmp_path: Path, rendered: RenderedBook
) -> None:
    a = break_outline_entry(rendered.path, tmp_path / "a.pdf", 1, "title", title="  Two\n words ")
    b = break_outline_entry(a, tmp_path / "b.pdf", 2, "title", title="")
    c = break_outline_entry(b, tmp_path / "c.pdf", 4, "title", title="Introdução — 数学")
    tree = read_toc(c)
    assert [n.title for n in tree.nodes[1:5]] == [
        "Two words",
        "(untitled)",
        rendered.sections[3].outline_title,
        "Introdução — 数学",
    ]
    assert tree.nodes[2].page == rendered.sections[2].page


def test_duplicate_titles_and_many_entries_on_one_page(tmp_path: Path) -> None:
    spec = BookSpec(
        "Dups",
        tuple(
            Section(
                f"Chapter {c}",
                children=tuple(Section("Summary", (f"Text {c}.{k}.",)) for k in range(4)),
            )
            for c in (1, 2)
        ),
        chapters_on_new_page=False,
    )
    book = render_book(spec, tmp_path / "dups.pdf")
    tree = read_toc(book.path)
    leaves = tree.leaves()
    assert [leaf.title for leaf in leaves] == ["Summary"] * 8
    assert len({leaf.node_id for leaf in leaves}) == 8
    assert len({leaf.page for leaf in leaves}) == 1  # all on one page


def test_no_outline_is_an_error_unless_inferred(tmp_path: Path, rendered: RenderedBook) -> None:
    bare = remove_outline(rendered.path, tmp_path / "bare.pdf")
    with pytest.raises(SearchTomeError, match=r"has no outline.*--infer-toc"):
        read_toc(bare)
    tree = read_toc(bare, infer=True)
    assert tree.source == "inferred" and len(tree.leaves()) == len(rendered.leaves())


def test_book_id_option(rendered: RenderedBook) -> None:
    assert read_toc(rendered.path, book_id="my-book").nodes[0].node_id == "my-book/1"
    with pytest.raises(SearchTomeError, match="not a slug"):
        read_toc(rendered.path, book_id="My Book")


def test_cli_json_and_text(rendered: RenderedBook, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["toc", str(rendered.path), "--json", "--book-id", "sb"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["book_id"] == "sb" and data["source"] == "outline"
    assert data["n_pages"] == rendered.n_pages
    assert [n["id"] for n in data["nodes"]] == [f"sb/{s.key}" for s in rendered.sections]
    assert main(["toc", str(rendered.path)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("sample-book: ") and "leaves" in text[0]
    assert text[1].startswith("(+ marks")  # the legend for non-leaf entries
    assert len(text) == 2 + len(rendered.sections)
    assert text[3].startswith("1.1") and "  " + rendered.sections[1].outline_title in text[3]


# --------------------------------------------------------------------------------------------
# The twelve real PDFs, checked against an independent reading with pypdf


def _manifest() -> dict[str, dict]:
    entries = json.loads((REALPDFS / "manifest.json").read_text())
    return {e["sha256"]: e for e in entries}


REAL = sorted(REALPDFS.glob("*.pdf")) if REALPDFS.exists() else []
needs_real = pytest.mark.skipif(not REAL, reason="../shared/realpdfs is not available")


def _pypdf_outline(path: Path) -> list[tuple[int, str, int | None]]:
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = pypdf.PdfReader(io.BytesIO(path.read_bytes()))
    out: list[tuple[int, str, int | None]] = []

    def walk(items: list, level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
            else:
                index = reader.get_destination_page_number(item)
                out.append((level, clean_title(item.title), None if index is None else index + 1))

    walk(reader.outline, 1)
    return out


@needs_real
def test_all_twelve_real_pdfs_are_present() -> None:
    assert len(REAL) == 12


@needs_real
@pytest.mark.parametrize("pdf", REAL, ids=lambda p: p.stem)
def test_real_pdf_outline_matches_independent_reading(pdf: Path) -> None:
    manifest = _manifest()[hashlib.sha256(pdf.read_bytes()).hexdigest()]
    independent = _pypdf_outline(pdf)
    if manifest["toc_entries"] == 0:
        assert independent == []
        with pytest.raises(SearchTomeError, match="has no outline"):
            read_toc(pdf)
        return
    tree = read_toc(pdf)
    assert tree.n_pages == manifest["pages"]
    assert len(tree.nodes) == manifest["toc_entries"] == len(independent)
    assert sum(n.is_leaf for n in tree.nodes) == manifest["leaves"]
    assert [(n.level, n.title, n.page) for n in tree.nodes] == independent
    assert max(n.level for n in tree.nodes) == manifest["max_depth"]
    dangling = [n for n in tree.nodes if n.page is None]
    assert len(dangling) == manifest["bad_pages"]
    assert len(tree.warnings) >= len(dangling)
    assert len({n.node_id for n in tree.nodes}) == len(tree.nodes)
    non_ascii = sum(not n.title.isascii() for n in tree.nodes)
    assert non_ascii == manifest["non_ascii_titles"]
    # Positions come with the outline for every resolvable entry of these files.
    assert all(n.y is not None for n in tree.nodes if n.page is not None)
