"""The leaf-depth search, on the real PDFs in ../shared/realpdfs (read in place, never copied)
and on small trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.ingest.catalog import load_catalog
from searchtome.ingest.depth import choose_depth, cut_tree, leaf_counts, leaf_depth_for
from searchtome.ingest.lock import Lock
from searchtome.ingest.outline import OutlineEntry
from searchtome.ingest.toc import build_tree, read_toc

REAL_PDFS = Path(__file__).resolve().parents[3] / "shared" / "realpdfs"
MANIFEST = REAL_PDFS / "manifest.json"
pytestmark = pytest.mark.skipif(not MANIFEST.exists(), reason="../shared/realpdfs not available")

# manifest "path" (the name in its source repository) -> our file name in ../shared/realpdfs
FILES = {
    "forallxbris.pdf": "forallx-bris_2020.pdf",
    "paratodxsnatal.pdf": "para-todxs-natal_pt_2022.pdf",
    "gawk.pdf": "gawk_manual_ed4.2.pdf",
    "gdb.pdf": "gdb_manual.pdf",
    "make.pdf": "gnu_make_manual.pdf",
    "Advanced Bash-Scripting Guide - TLDP.pdf": "advanced_bash_scripting_guide.pdf",
    "i1040gi.pdf": "irs_i1040_instructions_2017.pdf",
    "NIST.SP.800-207.pdf": "nist_sp800-207_zero_trust.pdf",
    "NIST.SP.800-61r2.pdf": "nist_sp800-61r2_incident_handling.pdf",
    "Paper.pdf": "ethereum_yellowpaper_eip150_2018-01-04.pdf",
}


def _with_outline() -> list[dict]:
    if not MANIFEST.exists():
        return []
    return [e for e in json.loads(MANIFEST.read_text()) if e.get("toc_entries")]


@pytest.fixture(scope="module")
def trees() -> dict:
    return {name: read_toc(REAL_PDFS / ours) for name, ours in FILES.items()}


@pytest.mark.parametrize("entry", _with_outline(), ids=lambda e: e["path"])
def test_outline_statistics_match_the_manifest(entry: dict, trees: dict) -> None:
    tree = trees[entry["path"]]
    assert tree.n_pages == entry["pages"]
    assert len(tree.nodes) == entry["toc_entries"]
    counts = leaf_counts(tree.nodes)
    assert len(counts) == entry["max_depth"]
    assert counts[-1] == entry["leaves"] == len(tree.leaves())
    assert counts[0] == entry["level_hist"]["1"]


@pytest.mark.parametrize("entry", _with_outline(), ids=lambda e: e["path"])
def test_every_depth_is_found_again_from_its_own_leaf_count(entry: dict, trees: dict) -> None:
    tree = trees[entry["path"]]
    counts = leaf_counts(tree.nodes)
    for count in counts:
        choice = choose_depth(tree.nodes, count)
        assert choice.exact and choice.leaves == count
        # Equal counts at two depths go to the deeper one; the deepest is "no cut".
        deepest = max(d for d, c in enumerate(counts, 1) if c == count)
        assert choice.depth == (None if deepest == len(counts) else deepest)
        cut = cut_tree(tree, choice.depth)
        assert len(cut.leaves()) == count
        assert {n.node_id for n in cut.nodes} <= {n.node_id for n in tree.nodes}


def test_a_deep_manual_cut_to_a_papers_style_count(trees: dict) -> None:
    # gdb: 487 outline leaves; a ToC counting 372 is the outline cut at depth 3 of 4.
    tree = trees["gdb.pdf"]
    assert leaf_counts(tree.nodes) == (49, 223, 372, 487)
    choice = choose_depth(tree.nodes, 370)
    assert (choice.depth, choice.leaves, choice.difference) == (3, 372, 2)
    assert choice.describe() == (
        "depth 3 of 4: 372 leaves, 2 more than the expected 370 (0.5 %) "
        "(leaves per depth: 1: 49, 2: 223, 3: 372, 4: 487)"
    )
    exact = choose_depth(tree.nodes, 487)
    assert exact.depth is None and exact.describe().startswith(
        "the full outline (depth 4): 487 leaves, exactly the expected 487"
    )


def test_ties_prefer_the_deeper_cut(trees: dict) -> None:
    # NIST SP 800-61r2: one level-3 entry under a level-2 one, so depths 2 and 3 both give 113.
    tree = trees["NIST.SP.800-61r2.pdf"]
    assert leaf_counts(tree.nodes) == (7, 113, 113)
    assert choose_depth(tree.nodes, 113).depth is None
    assert choose_depth(tree.nodes, 60).depth is None  # 53 from 7 and from 113: deepest wins


def _tree(levels: list[int]):
    entries = [OutlineEntry(level, f"t{i}", 1) for i, level in enumerate(levels)]
    return build_tree(entries, book_id="b", n_pages=1, source="outline")


def test_cut_tree_on_a_small_outline() -> None:
    tree = _tree([1, 2, 3, 3, 2, 1])
    assert leaf_counts(tree.nodes) == (2, 3, 4)
    cut = cut_tree(tree, 2)
    assert [(n.node_id, n.is_leaf) for n in cut.nodes] == [
        ("b/1", False),
        ("b/1.1", True),
        ("b/1.2", True),
        ("b/2", True),
    ]
    assert cut_tree(tree, None) is tree
    with pytest.raises(ValueError):
        choose_depth(tree.nodes, 0)
    assert choose_depth([], 5).leaves == 0


def test_leaf_depth_for_prefers_the_catalog_then_the_lock(tmp_path: Path) -> None:
    cat = tmp_path / "c.toml"
    cat.write_text(
        'name = "c"\nversion = "1"\n[[books]]\nbook_id = "a"\ndomain = "Law"\ntitle = "A"\n'
        'sha256 = "' + "a" * 64 + '"\nleaf_depth = 3\n'
        '[[books]]\nbook_id = "b"\ndomain = "Law"\ntitle = "B"\nsha256 = "' + "b" * 64 + '"\n'
    )
    a, b = load_catalog(cat).books
    lock = Lock.load(tmp_path / "lock.json")
    lock.record_check("a", "a" * 64, {"leaf_depth": 1})
    lock.record_check("b", "b" * 64, {"leaf_depth": 2})
    assert leaf_depth_for(a, lock) == 3  # the catalog wins
    assert leaf_depth_for(b, tmp_path / "lock.json") == 2
    assert leaf_depth_for(b) is None
    lock.record_check("b", "c" * 64, {"leaf_depth": 2})  # a check of another file
    assert leaf_depth_for(b, lock) is None


def test_toc_command_with_expect_leaves(capsys) -> None:
    from searchtome.cli import main

    pdf = REAL_PDFS / FILES["make.pdf"]
    assert main(["toc", str(pdf), "--expect-leaves", "107"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("(107 leaves) from the outline of a 220-page PDF")
    assert out[-1] == (
        "leaf depth: depth 2 of 3: 107 leaves, exactly the expected 107 "
        "(leaves per depth: 1: 21, 2: 107, 3: 133)"
    )
    assert main(["toc", str(pdf), "--expect-leaves", "107", "--json"]) == 0
    captured = capsys.readouterr()
    assert sum(n["is_leaf"] for n in json.loads(captured.out)["nodes"]) == 107
    assert "leaf depth: depth 2 of 3" in captured.err
    assert main(["toc", str(pdf), "--expect-leaves", "0"]) == 1
    assert "--expect-leaves must be a positive" in capsys.readouterr().err
