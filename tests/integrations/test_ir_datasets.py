"""SearchTome registered in ir_datasets, read back through ir_datasets' own API."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "ir_datasets", reason="needs the ir_datasets extra: pip install 'searchtome[ir_datasets]'"
)

import ir_datasets

import searchtome
from searchtome.errors import SearchTomeError
from searchtome.ir_datasets import register

SHARED_REPRO = Path(__file__).resolve().parents[3] / "shared" / "peer" / "whole-child"


def test_ids_docs_queries_and_qrels_per_split_and_book(tiny_dataset: Path) -> None:
    ids = register(tiny_dataset)
    base = "searchtome/tiny-synthetic"
    books = ["alpha-bio", "beta-law"]
    splits = ["dev", "test", "train"]
    expected = (
        [base]
        + [f"{base}/{s}" for s in splits]
        + [f"{base}/{b}" for b in books]
        + [f"{base}/{b}/{s}" for b in books for s in splits]
    )
    assert ids == sorted(expected)
    ds = searchtome.load(str(tiny_dataset))
    assert ir_datasets.load(base).docs_count() == len(ds.leaves())
    for split in splits:
        pooled = ir_datasets.load(f"{base}/{split}")
        # Only that split's queries: the BEIR queries file would have given every split.
        assert [q.query_id for q in pooled.queries_iter()] == [
            q.query_id for q in ds.queries(split)
        ]
        for book in books:
            one = ir_datasets.load(f"{base}/{book}/{split}")
            assert [d.doc_id for d in one.docs_iter()] == [x.leaf_id for x in ds.leaves(book)]
            assert {(r.query_id, r.doc_id, r.relevance) for r in one.qrels_iter()} == {
                (q.query_id, q.leaf_id, 1) for q in ds.queries(split, book)
            }
    leaf = ds.leaves("beta-law")[0]
    doc = ir_datasets.load(f"{base}/beta-law/test").docs_store().get(leaf.leaf_id)
    assert (doc.title, doc.text, doc.book_id) == (leaf.title, leaf.text, "beta-law")


def test_slicing_and_counts_as_ir_datasets_offers_them(tiny_dataset: Path) -> None:
    register(tiny_dataset)
    base = "searchtome/tiny-synthetic"
    ds = searchtome.load(str(tiny_dataset))
    leaves = [x.leaf_id for x in ds.leaves("alpha-bio")]
    test = ir_datasets.load(f"{base}/alpha-bio/test")
    ids = [d.doc_id for d in test.docs_iter()]
    assert ids == leaves
    assert [d.doc_id for d in test.docs_iter()[:3]] == leaves[:3]
    assert [d.doc_id for d in test.docs_iter()[1:5:2]] == leaves[1:5:2]
    assert [d.doc_id for d in test.docs_iter()[-2:]] == leaves[-2:]
    assert test.docs_iter()[1].doc_id == leaves[1] and test.docs_iter()[-1].doc_id == leaves[-1]
    with pytest.raises(IndexError):
        test.docs_iter()[len(leaves)]
    # fractions shard the corpus: two halves are the whole, in order
    halves = [[d.doc_id for d in test.docs_iter()[a:b]] for a, b in ((0.0, 0.5), (0.5, 1.0))]
    assert halves[0] + halves[1] == leaves and halves[0]
    it = test.docs_iter()
    next(it)
    assert [d.doc_id for d in it[:2]] == leaves[1:3]  # relative to what is left, as theirs
    queries = ds.queries("test", "alpha-bio")
    assert test.docs_count() == len(leaves)
    assert test.queries_count() == test.qrels_count() == len(queries)
    # ir_datasets' newer API reads the counts and slices through the same methods
    assert len(test.docs) == len(leaves) and [d.doc_id for d in test.docs[:2]] == leaves[:2]
    assert len(test.queries) == len(test.qrels) == len(queries)
    assert test.docs.lookup(leaves[0]).doc_id == leaves[0]
    pooled = ir_datasets.load(f"{base}/test")
    assert pooled.queries_count() == len(ds.queries("test"))


def test_one_corpus_per_book_shared_by_its_splits(tiny_dataset: Path) -> None:
    register(tiny_dataset)
    base = "searchtome/tiny-synthetic"
    for book in ("alpha-bio", "beta-law"):
        corpus = ir_datasets.load(f"{base}/{book}")
        assert corpus.has_docs() and not corpus.has_queries()
        handlers = {corpus.docs_handler()}
        for split in ("train", "dev", "test"):
            handlers.add(ir_datasets.load(f"{base}/{book}/{split}").docs_handler())
        assert len(handlers) == 1  # the very same docs object
        assert corpus.docs_namespace() == f"{base}/{book}"
    # the pooled corpus is another one, so a per-corpus index never mixes them up
    namespaces = {ir_datasets.load(i).docs_namespace() for i in (base, f"{base}/alpha-bio")}
    assert len(namespaces) == 2


def test_registering_again_is_a_no_op_and_name_clashes_are_errors(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    first = register(tiny_dataset)
    assert register(tiny_dataset) == first
    from tests.conftest import make_tiny_dataset

    other = make_tiny_dataset(tmp_path / "other")
    with pytest.raises(SearchTomeError, match="already registered"):
        register(other)
    assert register(other, name="tiny-other", splits=["test"])[0] == "searchtome/tiny-other"


@pytest.mark.skipif(
    not SHARED_REPRO.is_dir(), reason=f"the reproduction's release is not at {SHARED_REPRO}"
)
def test_whole_child_counts(tmp_path: Path) -> None:
    from searchtome.dataset.repro import import_repro

    data = tmp_path / "wc"
    import_repro(SHARED_REPRO, data)
    register(data)
    test = ir_datasets.load("searchtome/whole-child-repro/whole-child/test")
    assert test.docs_count() == 129
    assert sum(1 for _ in test.queries_iter()) == 1758 == test.queries_count()
    assert sum(1 for _ in test.qrels_iter()) == 1758 == test.qrels_count()
    assert [d.doc_id for d in test.docs_iter()[:3]] == [
        d.doc_id for d in ir_datasets.load("searchtome/whole-child-repro/whole-child").docs_iter()
    ][:3]
