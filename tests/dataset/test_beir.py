"""BEIR and TREC export: files as BEIR's GenericDataLoader and trec_eval read them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import searchtome
from searchtome.dataset.beir import export_beir, export_trec
from searchtome.errors import SearchTomeError
from searchtome.records import SPLITS


def beir_load(folder: Path, split: str):
    """The reading rules of beir.datasets.data_loader.GenericDataLoader.load (BEIR 2.x).

    corpus/queries: one JSON object per line keyed by ``_id``; qrels: csv with a tab delimiter,
    the first row skipped as a header, score parsed with int(); queries kept only when in qrels.
    """
    corpus = {}
    with open(folder / "corpus.jsonl", encoding="utf8") as fh:
        for line in fh:
            row = json.loads(line)
            corpus[row.get("_id")] = {"text": row.get("text"), "title": row.get("title")}
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf8") as fh:
        for line in fh:
            row = json.loads(line)
            queries[row.get("_id")] = row.get("text")
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        header = next(reader)
        for qid, did, score in reader:
            qrels.setdefault(qid, {})[did] = int(score)
    queries = {qid: queries[qid] for qid in qrels}
    return corpus, queries, qrels, header


def test_per_book_and_pooled(tiny_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "beir"
    summary = export_beir(tiny_dataset, out)
    ds = searchtome.load(str(tiny_dataset))
    assert sorted(summary["folders"]) == ["alpha-bio", "beta-law", "pooled"]
    for split in SPLITS:
        corpus, queries, qrels, header = beir_load(out / "pooled", split)
        assert header == ["query-id", "corpus-id", "score"]
        assert set(corpus) == {x.leaf_id for x in ds.leaves()}
        assert qrels == {q.query_id: {q.leaf_id: 1} for q in ds.queries(split)}
        assert queries == {q.query_id: q.text for q in ds.queries(split)}
        # BEIR drops hits whose id equals the query id: they must never collide.
        assert not set(queries) & set(corpus)
        for book in ds.book_ids():
            corpus_b, queries_b, qrels_b, _ = beir_load(out / book, split)
            assert set(corpus_b) == {x.leaf_id for x in ds.leaves(book)}
            assert set(queries_b) == {q.query_id for q in ds.queries(split, book)}
            assert all(next(iter(v)) in corpus_b for v in qrels_b.values())
    leaf = ds.leaves("beta-law")[0]
    first = json.loads((out / "beta-law" / "corpus.jsonl").read_text().splitlines()[0])
    assert first == {
        "_id": leaf.leaf_id,
        "title": leaf.title,
        "text": leaf.text,
        "metadata": {
            "book_id": "beta-law",
            "domain": "Law",
            "path": list(leaf.path),
            "page_start": leaf.page_start,
            "page_end": leaf.page_end,
        },
    }


def test_deterministic_and_replaces_only_exports(tiny_dataset: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    export_beir(tiny_dataset, a)
    export_beir(tiny_dataset, b)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    export_beir(tiny_dataset, a, books=["beta-law"], pooled=False)  # an earlier export: replaced
    assert sorted(p.name for p in a.iterdir()) == ["beta-law", "searchtome-export.json"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(SearchTomeError, match="not an earlier"):
        export_beir(tiny_dataset, other)
    assert (other / "keep.txt").read_text() == "mine"


def test_unknown_book_and_split(tiny_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(SearchTomeError, match="did you mean 'beta-law'"):
        export_beir(tiny_dataset, tmp_path / "x", books=["beta-lav"])
    with pytest.raises(SearchTomeError, match="unknown split 'valid'"):
        export_beir(tiny_dataset, tmp_path / "x", splits=["valid"])
    assert not (tmp_path / "x").exists()


def test_trec_qrels_score_with_pytrec_eval(tiny_dataset: Path, tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    out = tmp_path / "trec"
    export_trec(tiny_dataset, out)
    ds = searchtome.load(str(tiny_dataset))
    qrels: dict[str, dict[str, int]] = {}
    for line in (out / "test.qrels").read_text().splitlines():
        qid, it, doc, rel = line.split()
        assert it == "0"
        qrels.setdefault(qid, {})[doc] = int(rel)
    assert qrels == {q.query_id: {q.leaf_id: 1} for q in ds.queries("test")}
    # A run that puts the gold leaf second everywhere: recall@1 0, recall@3 1 for every query.
    leaves = [x.leaf_id for x in ds.leaves()]
    run = {}
    for qid, gold in qrels.items():
        (g,) = gold
        other = next(x for x in leaves if x != g)
        run[qid] = {other: 2.0, g: 1.0}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1", "recall.3"})
    res = ev.evaluate(run)
    assert all(v["recall_1"] == 0.0 and v["recall_3"] == 1.0 for v in res.values())
    topics = (out / "test.queries.tsv").read_text().splitlines()
    assert len(topics) == len(qrels) and all(t.count("\t") == 1 for t in topics)


@pytest.mark.skipif(
    not (Path(__file__).resolve().parents[3] / "shared/peer/whole-child/data").is_dir(),
    reason="../shared/peer not available",
)
def test_whole_child_export(tmp_path: Path) -> None:
    from searchtome.dataset.repro import import_repro
    from tests.conftest import PEER

    data = tmp_path / "wc"
    import_repro(PEER, data)
    summary = export_beir(data, tmp_path / "beir", pooled=False)
    assert summary["folders"]["whole-child"] == {
        "corpus": 129,
        "queries": {"train": 1064, "dev": 392, "test": 1758},
    }
    corpus, queries, qrels, _ = beir_load(tmp_path / "beir" / "whole-child", "test")
    assert len(corpus) == 129 and len(queries) == len(qrels) == 1758


def test_per_split_query_files_hold_that_split_only(tiny_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "beir"
    export_beir(tiny_dataset, out)
    ds = searchtome.load(str(tiny_dataset))
    for folder in ("pooled", *ds.book_ids()):
        every = (out / folder / "queries.jsonl").read_text().splitlines()
        joined = []
        for split in SPLITS:
            lines = (out / folder / f"queries.{split}.jsonl").read_text().splitlines()
            rows = [json.loads(line) for line in lines]
            book = None if folder == "pooled" else folder
            assert [r["_id"] for r in rows] == [q.query_id for q in ds.queries(split, book)]
            assert {r["metadata"]["split"] for r in rows} <= {split}
            joined += lines
        # The split files are the standard file cut by split, line for line.
        assert sorted(joined) == sorted(every)
