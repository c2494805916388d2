"""Blind-test releases: no gold of the blind split in any public file; private qrels score right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from searchtome.cli import main
from searchtome.dataset.blind import make_blind, with_private
from searchtome.dataset.layout import BLIND_QUERY_COLUMNS, verify_manifest
from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from tests.conftest import PEER

ROOT = Path(__file__).resolve().parents[2]


def public_strings(folder: Path) -> dict[str, str]:
    """Every public file as text: parquet cells joined (parquet bytes are compressed), else raw."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".parquet":
            table = pq.read_table(path).to_pylist()
            out[rel] = "\n".join(json.dumps(row, ensure_ascii=False) for row in table)
        else:
            out[rel] = path.read_text(encoding="utf-8")
    return out


def check_no_gold(full: Path, public: Path, split: str) -> None:
    ds = load(full)
    held = ds.queries(split)
    texts = public_strings(public)
    # The blind split's public rows carry the four columns and nothing else.
    assert pq.read_schema(public / f"queries/{split}.parquet").names == list(BLIND_QUERY_COLUMNS)
    assert not (public / f"qrels/{split}.parquet").exists()
    assert not (public / "units.parquet").exists()  # uncovered paragraphs would point at sources
    rows = pq.read_table(public / f"queries/{split}.parquet").to_pylist()
    assert len(rows) == len(held) and {r["text"] for r in rows} == {q.text for q in held}
    public_ids = [r["query_id"] for r in rows]
    keys = [(r["book_id"], r["query_id"]) for r in rows]
    assert keys == sorted(keys)  # book, then opaque id: not document order
    # No source query id, no unit id in any form, no unit's paragraph list.
    source_units = {q.unit_id for q in held if q.unit_id}
    needles = {q.query_id for q in held} | source_units
    needles |= {u.rpartition("#")[2] + '"' for u in source_units}  # never as a bare suffix
    for rel, text in texts.items():
        for needle in needles:
            assert needle not in text, f"{rel} holds {needle!r}"
    # A public blind query id occurs in its queries file only, and no public row pairs a blind
    # query's text with its gold leaf.
    gold_of_text = {q.text: q.leaf_id for q in held}
    for rel, text in texts.items():
        if rel == f"queries/{split}.parquet":
            continue
        for qid in public_ids[:50]:
            assert qid not in text, f"{rel} names blind query {qid}"
    for line in texts[f"queries/{split}.parquet"].splitlines():
        row = json.loads(line)
        assert gold_of_text[row["text"]] not in line
    # Ids are opaque: no public query or unit id starts with a leaf id or a source id pattern.
    leaf_ids = {x.leaf_id for x in ds.leaves()}
    for s in ("train", "dev", split):
        for row in pq.read_table(public / f"queries/{s}.parquet").to_pylist():
            assert re.fullmatch(r"q-[0-9a-f]{16}", row["query_id"])
            unit = row.get("unit_id")
            assert unit is None or unit.partition("#")[0] not in leaf_ids
    assert verify_manifest(public) == []


@pytest.mark.skipif(not (PEER / "data" / "splits").is_dir(), reason="no ../shared/peer/whole-child")
def test_import_repro_blind_leaves_no_gold_and_private_qrels_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full, public, private = tmp_path / "full", tmp_path / "blind", tmp_path / "blind-private"
    assert main(["import", "repro", str(PEER), "--out", str(full)]) == 0
    assert main(["import", "repro", str(PEER), "--out", str(public), "--blind", "test"]) == 0
    check_no_gold(full, public, "test")
    assert load(public).queries("test")[0].leaf_id == ""  # the loader knows the gold is absent
    assert (private / "id_map.json").is_file() and not (public / "id_map.json").exists()

    # The private qrels reproduce the normal scores of a committed run (source query ids).
    run = ROOT / "submissions" / "bm25"
    capsys.readouterr()
    for source in (["--data", str(full)], ["--qrels", str(private)]):
        assert main(["score", str(run), *source, "--format", "json"]) == 0
        scores = json.loads(capsys.readouterr().out)[0]
        measures = ("R@1", "R@3", "nDCG@3", "RR@10")
        if source[0] == "--data":
            expected = {m: scores["micro"][m] for m in measures}
        else:
            # Same per-query values; only the summation order (query order) differs.
            assert {m: scores["micro"][m] for m in measures} == pytest.approx(expected, abs=1e-12)
            assert scores["answered"] == scores["n_queries"] == 1758

    # Public + private together is the full dataset again, in public ids.
    rejoined = with_private(load(public), private)
    assert sorted(q.leaf_id for q in rejoined.queries("test")) == sorted(
        q.leaf_id for q in load(full).queries("test")
    )


def test_blind_release_of_a_built_dataset(tiny_dataset: Path, tmp_path: Path) -> None:
    public, private = tmp_path / "pub", tmp_path / "priv"
    make_blind(tiny_dataset, public, private, "test")
    check_no_gold(tiny_dataset, public, "test")
    # Rewriting a release into its private folder reuses its secret key: byte-identical.
    make_blind(tiny_dataset, tmp_path / "pub2", private, "test")
    for path in public.rglob("*.parquet"):
        assert path.read_bytes() == (tmp_path / "pub2" / path.relative_to(public)).read_bytes()
    # A new release of the same data gets a new random key: ids are not a function of the data.
    make_blind(tiny_dataset, tmp_path / "pub3", tmp_path / "priv3", "test")
    ids = {r["query_id"] for r in pq.read_table(public / "queries/test.parquet").to_pylist()}
    other = {
        r["query_id"] for r in pq.read_table(tmp_path / "pub3/queries/test.parquet").to_pylist()
    }
    assert ids and not ids & other
    with pytest.raises(SearchTomeError, match="already a blind release"):
        make_blind(public, tmp_path / "x", tmp_path / "y", "test")
    with pytest.raises(SearchTomeError, match="inside the public one"):
        make_blind(tiny_dataset, tmp_path / "a", tmp_path / "a" / "private", "test")


def test_the_held_back_split_has_no_qrels_to_give(tiny_dataset: Path, tmp_path: Path) -> None:
    """``load(PUBLIC).qrels(blind split)`` refuses in one line instead of returning rows whose
    leaf id is empty (every run would score 0 against them); so do the scorer and the exports
    built on them. The other splits, and public + private rejoined, keep their gold."""
    from searchtome.dataset.beir import export_trec
    from searchtome.dataset.mteb_layout import export_mteb
    from searchtome.leaderboard.scoring import score_runs
    from searchtome.metrics.qrels import Qrels
    from searchtome.runs import Run

    public, private = tmp_path / "pub", tmp_path / "priv"
    make_blind(tiny_dataset, public, private, "test")
    ds = load(public)
    assert ds.held_back("test") and not ds.held_back("train")
    message = "test split of this blind release has no gold here .* --qrels PRIVATE"
    with pytest.raises(SearchTomeError, match=message) as info:
        ds.qrels("test")
    assert "\n" not in str(info.value)
    with pytest.raises(SearchTomeError, match=message):
        Qrels.from_dataset(ds, "test")
    queries = ds.queries("test")
    run = Run("r", {q.query_id: [ds.leaves()[0].leaf_id] for q in queries})
    with pytest.raises(SearchTomeError, match=message):
        score_runs([run], data=ds, split="test")
    for export in (export_mteb, export_trec):
        with pytest.raises(SearchTomeError, match=r"held back .* \(--splits train,dev\)"):
            export(ds, tmp_path / export.__name__)
    assert len(ds.qrels("train")) == len(ds.queries("train")) > 0
    assert export_trec(ds, tmp_path / "trec", splits=["train", "dev"])["queries"]["train"] > 0
    rejoined = with_private(ds, private)
    assert not rejoined.held_back("test")
    gold = {r.query_id: r.leaf_id for r in rejoined.qrels("test")}
    assert len(gold) == len(queries) and all(gold.values())
