"""Importing the independent reproduction's release of *The Whole Child* (../shared/peer).

Reads the release in place; copies made for tamper tests live in tmp_path only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import searchtome
from searchtome.cli import main
from searchtome.dataset.layout import verify_manifest
from searchtome.dataset.repro import _ordinals, import_repro
from searchtome.dataset.repro_release import fallback_book, manifest_fields
from searchtome.errors import SearchTomeError
from searchtome.io import read_json
from searchtome.records import SPLITS
from tests.conftest import PEER

pytestmark = pytest.mark.skipif(
    not (PEER / "data" / "splits").is_dir(), reason="../shared/peer/whole-child is not available"
)

NON_RETRIEVAL = [
    "Contents",
    "Introduction",
    "Historical nations",
    "Present-day nations and tribes",
    "Suggested readings",
    "Media Attributions",
    "Conclusion",
    "Glossary",
    "Grant Information",
    "References",
    "Lecture slides and transcripts - The Whole Child",
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repro") / "whole-child"
    import_repro(PEER, out)
    return out


def _release(name: str):
    return json.loads((PEER / "data" / "derived" / f"whole-child-{name}.json").read_text())


def _questions(split: str) -> list[dict]:
    path = PEER / "data" / "splits" / "whole-child" / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_counts(imported: Path) -> None:
    ds = searchtome.load(str(imported))
    assert ds.book_ids() == ["whole-child"]
    info = ds.books["whole-child"]
    assert info.book.domain == "Education" and info.book.license == "CC BY-NC-SA 4.0"
    assert info.book.sha256 == "14c95ceb029cafaf98f9f2c67e3b73baa8177b53ca3198519c3a2ec19c547d75"
    assert info.book.landing_url == "https://rotel.pressbooks.pub/whole-child/"
    assert info.n_pages == 183
    assert len(ds.toc("whole-child")) == 181
    assert len(ds.leaves()) == 129
    assert [len(ds.queries(s)) for s in SPLITS] == [1064, 392, 1758]
    assert len(ds.paragraphs()) == 1019 and len(ds.units()) == 555
    hand = [q.query_id for s in SPLITS for q in ds.queries(s) if not q.model_generated]
    assert sorted(hand) == [f"whole-child-149-g003-q0{i}" for i in range(1, 7)]
    assert verify_manifest(imported) == []


def test_ids_follow_our_scheme_and_the_map_is_kept(imported: Path) -> None:
    ds = searchtome.load(str(imported))
    id_map = read_json(imported / "id_map.json")
    nodes = id_map["nodes"]
    assert nodes["whole-child-009"]["id"] == "whole-child/4.1.1"
    assert nodes["whole-child-001"]["id"] == "whole-child/1"
    assert nodes["whole-child-176"]["id"] == "whole-child/12.2.8"
    assert len({v["id"] for v in nodes.values()}) == 181
    ours = {n.node_id: n for n in ds.toc("whole-child")}
    release = {n["id"]: n for n in _release("toc-nodes")}
    for theirs, entry in nodes.items():
        node = ours[entry["id"]]
        assert node.title == release[theirs]["title"]
        assert list(node.path) == release[theirs]["path"]
        assert node.page == release[theirs]["page"] and node.level == release[theirs]["level"]
        parent = release[theirs]["parent_id"]
        assert node.parent_id == (nodes[parent]["id"] if parent else None)
        # Ordinal = 1-based position among the parent's children.
        siblings = [n["id"] for n in release.values() if n["parent_id"] == parent]
        assert node.ordinal[-1] == siblings.index(theirs) + 1
    assert read_json(imported / "manifest.json")["id_map"] == "id_map.json"


def test_non_retrieval_leaves_are_toc_nodes_but_not_leaves(imported: Path) -> None:
    ds = searchtome.load(str(imported))
    corpus = {x.leaf_id for x in ds.leaves()}
    toc = ds.toc("whole-child")
    parents = {n.parent_id for n in toc}
    # One invariant for every dataset: is_leaf exactly when the node is a retrieval target.
    assert {n.node_id for n in toc if n.is_leaf} == corpus
    excluded = [n for n in toc if n.node_id not in parents and not n.is_leaf]
    assert [n.title for n in excluded] == NON_RETRIEVAL
    manifest = read_json(imported / "manifest.json")
    assert [e["title"] for e in manifest["non_retrieval_leaves"]] == NON_RETRIEVAL
    id_map = read_json(imported / "id_map.json")["nodes"]
    flagged = [
        v["title"] for v in id_map.values() if v["structural_leaf"] and not v["retrieval_leaf"]
    ]
    assert flagged == NON_RETRIEVAL


def test_content_matches_the_release(imported: Path) -> None:
    ds = searchtome.load(str(imported))
    id_map = read_json(imported / "id_map.json")
    nodes = {k: v["id"] for k, v in id_map["nodes"].items()}
    for section in _release("sections"):
        leaf = ds.leaf(nodes[section["id"]])
        assert leaf.text == section["text"] and list(leaf.path) == section["path"]
        assert leaf.page_start == section["page"] and leaf.page_end >= leaf.page_start
    paragraphs = {p.paragraph_id: p for p in ds.paragraphs()}
    for p in _release("paragraphs"):
        ours = paragraphs[id_map["paragraphs"][p["id"]]]
        assert ours.text == p["text"] and ours.leaf_id == nodes[p["leaf_id"]]
    units = {u.unit_id: u for u in ds.units()}
    for u in _release("generation-units"):
        ours = units[id_map["units"][u["id"]]]
        assert ours.unit_id.startswith(ours.leaf_id + "#u")
        assert ours.text == u["text"]
        assert list(ours.paragraph_ids) == [
            id_map["paragraphs"][x] for x in u["source_paragraph_ids"]
        ]
        assert all(x in paragraphs for x in ours.paragraph_ids)


def test_queries_keep_ids_and_splits(imported: Path) -> None:
    ds = searchtome.load(str(imported))
    id_map = read_json(imported / "id_map.json")
    for split in SPLITS:
        release = {q["id"]: q for q in _questions(split)}
        ours = {q.query_id: q for q in ds.queries(split)}
        assert set(ours) == set(release)
        for qid, q in ours.items():
            r = release[qid]
            assert q.text == r["query"]
            assert q.leaf_id == id_map["nodes"][r["gold_leaf_id"]]["id"]
            assert q.unit_id == id_map["units"][r["source_unit_id"]]
            assert q.model_generated == r["model_generated"]
            assert q.unit_id.split("#")[0] == q.leaf_id
            assert "/" not in qid


def test_provenance(imported: Path) -> None:
    m = read_json(imported / "manifest.json")
    src = m["source"]
    assert src["repository"] == "https://github.com/NaveenGali11/stair-rag-reproduction"
    assert src["license"] == "CC BY-NC-SA 4.0"
    assert src["files"]["data/splits/whole-child/train.jsonl"] == (
        "c432cb79aeaf5c70a686944475bfe01f94c6ded3bc183b38130d76c0749b03bb"
    )
    assert src["verification"]["data/splits/whole-child/test.jsonl"] == "verified"
    assert src["verification"]["data/derived/whole-child-toc-nodes.json"] == "verified"
    gen = m["generation"]
    assert gen["model"] == "casperhansen/mixtral-instruct-awq"
    assert gen["prompt_version"] == "whole-child-questions-v1" and gen["seed"] == 42
    assert m["split"]["counts"] == {"train": 1064, "dev": 392, "test": 1758}
    card = (imported / "README.md").read_text()
    assert "casperhansen/mixtral-instruct-awq" in card and "stair-rag-reproduction" in card


def test_rerun_is_byte_identical(imported: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    import_repro(PEER, again)
    files = sorted(p.relative_to(imported) for p in imported.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (imported / rel).read_bytes() == (again / rel).read_bytes(), rel


def _release_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(PEER, copy)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return copy


def test_tampered_split_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = _release_copy(tmp_path)
    dev = copy / "data" / "splits" / "whole-child" / "dev.jsonl"
    dev.write_text(dev.read_text().replace("What", "Which", 1))
    out = tmp_path / "out"
    rc = main(["import", "repro", str(copy), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "dev.jsonl" in err and "SHA-256" in err and "split_sha256" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")], "temp folder left"


def test_tampered_toc_is_refused(tmp_path: Path) -> None:
    copy = _release_copy(tmp_path)
    nodes = copy / "data" / "derived" / "whole-child-toc-nodes.json"
    nodes.write_text(nodes.read_text().replace('"Glossary"', '"Glossary!"'))
    with pytest.raises(SearchTomeError, match="source_nodes_sha256"):
        import_repro(copy, tmp_path / "out")


def test_refuses_to_replace_a_foreign_folder(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(SearchTomeError, match="not a SearchTome dataset"):
        import_repro(PEER, out)
    assert (out / "notes.txt").read_text() == "keep me"


def test_not_a_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["import", "repro", str(tmp_path), "--out", str(tmp_path / "o")])
    assert rc == 1 and "not a reproduction release" in capsys.readouterr().err


def test_cli_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["import", "repro", str(PEER), "--out", str(tmp_path / "wc")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "181 ToC nodes, 129 retrieval leaves" in out
    assert "train 1064, dev 392, test 1758" in out
    assert "11 outline leaves are not retrieval targets" in out


def test_fallback_metadata_agrees_with_the_catalog() -> None:
    """Without the packaged catalog the release's MANIFEST.md gives the same book facts."""
    fields = manifest_fields((PEER / "data" / "MANIFEST.md").read_text())
    book = fallback_book("whole-child", fields, None)
    assert book.title == "The Whole Child: Development in the Early Years"
    assert book.authors == ("Deirdre Budzyna", "Doris Buckley")
    assert book.license == "CC BY-NC-SA 4.0"
    assert book.license_url == "https://creativecommons.org/licenses/by-nc-sa/4.0/"
    assert book.sha256 == "14c95ceb029cafaf98f9f2c67e3b73baa8177b53ca3198519c3a2ec19c547d75"
    assert fields["Page count"] == "183"
    try:
        from searchtome.ingest.catalog import load_catalog
    except ImportError:
        return
    entry = load_catalog().get("whole-child")
    assert (entry.domain, entry.title, entry.license, entry.sha256, entry.landing_url) == (
        book.domain,
        book.title,
        book.license,
        book.sha256,
        book.landing_url,
    )
    with pytest.raises(SearchTomeError, match="--domain"):
        fallback_book("some-other-book", fields, None)


def test_broken_tree_is_refused(tmp_path: Path) -> None:
    node = {"level": 1, "title": "A", "page": 1, "path": ["A"]}
    good = [
        {**node, "id": "b-1", "parent_id": None},
        {"id": "b-2", "level": 2, "title": "B", "page": 1, "path": ["A", "B"], "parent_id": "b-1"},
        {**node, "id": "b-3", "parent_id": None, "title": "C", "path": ["C"]},
    ]
    assert _ordinals("b", good, tmp_path) == {"b-1": "b/1", "b-2": "b/1.1", "b-3": "b/2"}
    with pytest.raises(SearchTomeError, match="not an earlier node"):
        _ordinals("b", [good[1], good[0]], tmp_path)
    bad_level = [good[0], {**good[1], "level": 3}]
    with pytest.raises(SearchTomeError, match="level 3"):
        _ordinals("b", bad_level, tmp_path)
