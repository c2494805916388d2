"""--infer-toc: headings from the page layout, checked on generated and real PDFs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.ingest.extract import extract_book
from searchtome.ingest.infer_toc import Agreement, leaf_agreement, titles_match
from searchtome.ingest.toc import read_toc
from searchtome.records import TocNode
from searchtome.sample.render import RenderedBook, remove_outline, render_book, sample_spec
from tests.conftest import REALPDFS


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> tuple[RenderedBook, Path]:
    root = tmp_path_factory.mktemp("infer")
    book = render_book(sample_spec(chapters=3, seed=5), root / "book.pdf")
    return book, remove_outline(book.path, root / "bare.pdf")


def test_rendered_book_structure_is_recovered(bare: tuple[RenderedBook, Path]) -> None:
    book, path = bare
    tree = read_toc(path, infer=True)
    assert tree.source == "inferred"
    assert [n.level for n in tree.nodes] == [s.level for s in book.sections]
    assert [n.page for n in tree.nodes] == [s.page for s in book.sections]
    for node, section in zip(tree.nodes, book.sections, strict=True):
        assert titles_match(node.title, section.outline_title), (node.title, section.outline_title)
    a = leaf_agreement(read_toc(book.path).nodes, tree.nodes)
    assert a.precision == a.recall == 1.0


def test_extraction_with_an_inferred_toc_is_exact(bare: tuple[RenderedBook, Path]) -> None:
    book, path = bare
    ex = extract_book(path, infer_toc=True)
    assert ex.toc.source == "inferred"
    for leaf, known in zip(ex.leaves, book.leaves(), strict=True):
        assert " ".join(leaf.text.split()) == " ".join(known.text.split())


def test_cli_modes(bare: tuple[RenderedBook, Path], capsys: pytest.CaptureFixture[str]) -> None:
    book, path = bare
    assert main(["toc", "--infer-toc", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "inferred"
    # An outline wins over inference unless inference is forced.
    assert main(["toc", str(book.path), "--infer-toc", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "outline"
    assert main(["toc", str(book.path), "--ignore-outline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "inferred"
    assert main(["toc", "--infer-toc", str(path)]) == 0
    head = capsys.readouterr().out.splitlines()
    assert "leaves) from the headings inferred from the page layout of a " in head[0]
    assert head[1].startswith("(+ marks an entry with sub-entries")


def test_titles_match_ignores_numbering() -> None:
    assert titles_match("4.2 Breakpoints", "Breakpoints")
    assert titles_match("Chapter 3. Special Characters", "Special Characters")
    assert not titles_match("Breakpoints", "Watchpoints")


def test_leaf_agreement_is_one_to_one() -> None:
    def node(i: int, title: str, page: int, leaf: bool = True) -> TocNode:
        return TocNode(f"b/{i}", "b", title, 1, page, None, leaf, (title,))

    ref = [node(1, "Summary", 3), node(2, "Summary", 9), node(3, "Part", 1, leaf=False)]
    inf = [node(1, "Summary", 4), node(2, "Summary", 4), node(3, "Noise", 5)]
    a = leaf_agreement(ref, inf)
    assert a == Agreement(true_leaves=2, inferred_leaves=3, matched=1)
    assert a.precision == pytest.approx(1 / 3) and a.recall == pytest.approx(1 / 2)


NO_OUTLINE = {
    "rfc1035_NO_OUTLINE.pdf": ("3.2.1. Format", "3.2. RR definitions", 3),
    "valgrind_manual_3.14_NO_OUTLINE.pdf": (
        "2.6.4. malloc-related Options",
        "2.6. Core Command-line Options",
        3,
    ),
}


@pytest.mark.skipif(not REALPDFS.exists(), reason="../shared/realpdfs is not available")
@pytest.mark.parametrize("name", sorted(NO_OUTLINE))
def test_pdfs_without_outline_get_a_usable_tree(name: str) -> None:
    leaf_title, parent_title, level = NO_OUTLINE[name]
    tree = read_toc(REALPDFS / name, infer=True)
    assert tree.source == "inferred" and len(tree.leaves()) >= 40
    leaf = next(n for n in tree.nodes if n.title == leaf_title)
    assert leaf.is_leaf and leaf.level == level
    assert tree.get(leaf.parent_id).title == parent_title  # type: ignore[arg-type]
    # The tree follows the document: pages never go backwards.
    pages = [n.page for n in tree.nodes]
    assert pages == sorted(pages)


@pytest.mark.skipif(not REALPDFS.exists(), reason="../shared/realpdfs is not available")
def test_quality_floor_on_a_real_manual() -> None:
    """GNU make: 133 outline leaves; inference recovers most of them (see docs/ingestion.md)."""
    pdf = REALPDFS / "gnu_make_manual.pdf"
    a = leaf_agreement(read_toc(pdf).nodes, read_toc(pdf, infer="always").nodes)
    assert a.precision >= 0.8 and a.recall >= 0.85
