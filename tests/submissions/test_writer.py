"""Writing submissions: round trips, the meta check before writing, TREC output."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchtome.dataset.loader import Dataset
from searchtome.errors import SearchTomeError
from searchtome.records import Run
from searchtome.submissions import read_submission, write_submission, write_trec
from searchtome.submissions.reader import read_predictions
from tests.fixtures.submission_helpers import (
    dataset_fixture,  # noqa: F401
    meta_for,
)


@pytest.mark.parametrize("compress", [False, True])
def test_write_and_read_roundtrip(tmp_path: Path, ds: Dataset, compress: bool) -> None:
    run = Run("sys", {"q1": ("a/1", "a/2"), "q2": ("a/3",)}, {"q1": (2.0, 1.5), "q2": (0.25,)})
    folder = write_submission(tmp_path / "sys", run, meta_for(), compress=compress)
    name = "predictions.jsonl.gz" if compress else "predictions.jsonl"
    assert sorted(p.name for p in folder.iterdir()) == sorted(["meta.json", name])
    sub = read_submission(folder)
    assert sub.system == "sys"
    assert dict(sub.run.rankings) == dict(run.rankings)
    assert dict(sub.run.scores) == dict(run.scores)
    assert sub.meta["dataset_revision"] == "tiny"
    # rewriting with the other compression leaves exactly one predictions file
    write_submission(tmp_path / "sys", run, meta_for(), compress=not compress)
    assert len([p for p in folder.iterdir() if p.name.startswith("predictions")]) == 1


def test_write_submission_checks_meta_first(tmp_path: Path) -> None:
    run = Run("sys", {"q1": ("a/1",)})
    with pytest.raises(SearchTomeError, match=r"meta\.json: hardware: missing"):
        write_submission(
            tmp_path / "x", run, {k: v for k, v in meta_for().items() if k != "hardware"}
        )
    assert not (tmp_path / "x").exists()
    with pytest.raises(SearchTomeError, match=r"at most 100"):
        write_submission(
            tmp_path / "y", Run("s", {"q": tuple(f"a/{i}" for i in range(101))}), meta_for()
        )


def test_write_trec_keeps_the_order_of_tied_runs(tmp_path: Path) -> None:
    run = Run("r", {"q": ("a/1", "a/2")}, {"q": (1.0, 1.0)})
    back = read_predictions(write_trec(tmp_path / "r.trec", run)).run
    assert back.rankings["q"] == ("a/1", "a/2")
