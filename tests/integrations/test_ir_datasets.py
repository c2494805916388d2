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
    assert sum(1 for _ in test.queries_iter()) == 1758
    assert sum(1 for _ in test.qrels_iter()) == 1758
