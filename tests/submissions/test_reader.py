"""Reading submissions: format detection, TREC runs and ties, the first problem raised."""

from __future__ import annotations

from pathlib import Path

import pytest

import searchtome.submissions
from searchtome.dataset.loader import Dataset
from searchtome.errors import SearchTomeError
from searchtome.records import Run
from searchtome.submissions import read_submission, write_trec
from searchtome.submissions.reader import read_predictions
from tests.fixtures.submission_helpers import (
    dataset_fixture,  # noqa: F401
    submission_folder,
)


def test_trec_runs_are_read_wherever_a_submission_is(tmp_path: Path) -> None:
    run = Run("bm25", {"q1": ("a/1", "a/2", "a/3")}, {"q1": (3.0, 2.0, 1.0)})
    path = write_trec(tmp_path / "run.trec", run)
    assert path.read_text().splitlines()[0] == "q1 Q0 a/1 1 3.0 bm25"
    sub = read_submission(path)
    assert sub.system == "bm25" and sub.run.rankings["q1"] == ("a/1", "a/2", "a/3")
    # detected from the content, not the name
    disguised = tmp_path / "sys" / "predictions.jsonl"
    disguised.parent.mkdir()
    disguised.write_text(path.read_text())
    assert read_predictions(disguised).format == "trec"
    # and forced: a TREC-looking file read as JSON lines is an error
    with pytest.raises(SearchTomeError, match=r"predictions\.jsonl:1: json: not valid JSON"):
        read_submission(disguised, run_format="jsonl")


def test_trec_tied_scores_follow_the_tie_rule_and_warn(tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 a/1 1 1.0 t\nq1 Q0 a/2 2 1.0 t\nq1 Q0 a/0 3 0.5 t\n")
    preds = read_predictions(path)
    assert preds.run.rankings["q1"] == ("a/2", "a/1", "a/0")  # id descending among ties
    messages = [str(p) for p in preds.problems]
    assert any("score: tied scores in 1 ranking(s)" in m and "tie rule" in m for m in messages)
    assert any(
        "rank: the rank column disagrees with the score order in 1 ranking(s)" in m
        for m in messages
    )


def test_read_submission_raises_the_first_problem(tmp_path: Path, ds: Dataset) -> None:
    folder = submission_folder(
        tmp_path, ds, ['{"query_id": "q1", "leaf_ids": ["a/1", "a/1"]}', "{oops"]
    )
    with pytest.raises(SearchTomeError) as info:
        read_submission(folder)
    assert str(info.value).startswith(f"{folder}/predictions.jsonl:1: leaf_ids[1]: duplicate")
    assert "and 1 more problems" in str(info.value)


def test_every_package_export_resolves() -> None:
    for name in searchtome.submissions.__all__:
        assert getattr(searchtome.submissions, name) is not None, name


@pytest.mark.parametrize("fields", [4, 5, 7])
def test_trec_run_with_the_wrong_field_count_is_one_problem(tmp_path: Path, fields: int) -> None:
    cols = ["q1", "Q0", "a/1", "1", "2.5", "tag", "extra"][:fields]
    path = tmp_path / "run.trec"
    path.write_text("".join(" ".join([f"q{i}", *cols[1:]]) + "\n" for i in range(50)))
    preds = read_predictions(path)
    assert preds.format == "trec"
    assert [str(p) for p in preds.errors] == [
        f"{path}:1: line: looks like a TREC run with the wrong number of fields: its lines have "
        f"{fields} fields, not the 6 of 'qid Q0 docno rank score tag' (50 line(s))"
    ]
    with pytest.raises(SearchTomeError, match="looks like a TREC run") as info:
        read_submission(path)
    assert "more problems" not in str(info.value)
    # Sniffed from the content too, whatever the name
    other = tmp_path / "predictions.jsonl"
    other.write_text(path.read_text())
    assert [p.code for p in read_predictions(other).errors] == ["trec-fields"]
