"""``searchtome validate``: exit codes, printed problems, JSON output, --partial, bare TREC files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.dataset.loader import Dataset
from searchtome.submissions import write_submission, write_trec
from tests.fixtures.submission_helpers import (
    all_lines,
    dataset_fixture,  # noqa: F401
    meta_for,
    perfect_run,
    submission_folder,
)


def test_validate_cli(
    tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys: pytest.CaptureFixture
) -> None:
    good = write_submission(tmp_path / "good", perfect_run(ds), meta_for("good"))
    assert main(["validate", str(good), "--data", str(tiny_dataset)]) == 0
    out = capsys.readouterr().out
    assert f"{good}: OK; system 'good', jsonl format" in out
    bad = submission_folder(tmp_path, ds, [*all_lines(ds, skip=1), '{"query_id": 1}'], name="bad")
    assert main(["validate", str(bad), "--data", str(tiny_dataset)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}/predictions.jsonl:{len(ds.queries('test'))}: leaf_ids: missing" in out
    assert "INVALID" in out
    assert main(["validate", str(bad), "--data", str(tiny_dataset), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data[0]["ok"] is False and data[0]["problems"][0]["code"]
    partial = submission_folder(tmp_path, ds, all_lines(ds, skip=3), name="partial")
    assert main(["validate", str(partial), "--data", str(tiny_dataset)]) == 1
    out = capsys.readouterr().out
    assert f"{partial}: INVALID (1 error); " in out  # one error: "error", not "errors"
    assert main(["validate", str(partial), "--data", str(tiny_dataset), "--partial"]) == 0
    # a bare TREC file validates without meta.json
    trec = write_trec(tmp_path / "bm25.trec", perfect_run(ds))
    assert main(["validate", str(trec), "--data", str(tiny_dataset), "--run-format", "trec"]) == 0
