"""The dataset layout: round trip, determinism, id rules, manifest verification."""

from __future__ import annotations

from pathlib import Path

import pytest

import searchtome
from searchtome.dataset.layout import verify_manifest
from searchtome.errors import SearchTomeError
from searchtome.records import SPLITS
from tests.conftest import make_tiny_dataset


def test_round_trip(tiny_dataset: Path) -> None:
    ds = searchtome.load(str(tiny_dataset))
    assert ds.book_ids() == ["alpha-bio", "beta-law"]
    assert ds.domain("beta-law") == "Law"
    assert ds.books["beta-law"].book.restrictions == ("no-llm-training",)
    leaves = ds.leaves("alpha-bio")
    assert [x.leaf_id for x in leaves][:3] == [
        "alpha-bio/1.1.1",
        "alpha-bio/1.1.2",
        "alpha-bio/1.1.3",
    ]
    # A section without children is a leaf; repeated titles stay distinct by path.
    assert ds.leaf("alpha-bio/2.2").title == "Animals"
    summaries = [x for x in leaves if x.title == "Summary"]
    assert len(summaries) == 2 and len({x.path for x in summaries}) == 2
    for split in SPLITS:
        qs = ds.queries(split)
        assert qs and all(ds.gold(q.query_id) == q.leaf_id for q in qs)
        assert all("/" not in q.query_id for q in qs)
    per_leaf = ds.training_questions()
    assert set(per_leaf) == {x.leaf_id for x in ds.leaves()}
    assert all(len(v) == 2 for v in per_leaf.values())
    assert ds.nodes["alpha-bio/1"].text == "Introduction to Cells."


def test_deterministic_bytes(tmp_path: Path) -> None:
    a = make_tiny_dataset(tmp_path / "a")
    b = make_tiny_dataset(tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert verify_manifest(a) == []
    (a / "corpus.parquet").write_bytes(b"tampered")
    assert verify_manifest(a) == ["corpus.parquet: SHA-256 differs from the manifest"]


def test_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(SearchTomeError, match="not a SearchTome dataset folder"):
        searchtome.load(str(tmp_path))
