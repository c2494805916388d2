"""The validator's in-memory entry: an upload's bytes validate as the same files in a folder."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from searchtome.dataset.loader import Dataset
from searchtome.submissions import Limits, trec_fast, write_submission, write_trec
from searchtome.submissions.validate import validate_submission, validate_upload
from tests.fixtures.submission_helpers import (
    dataset_fixture,  # noqa: F401
    meta_for,
    perfect_run,
)


def same(folder: Path, name: str, ds: Dataset) -> None:
    on_disk = validate_submission(folder, ds)
    meta, preds = (folder / "meta.json").read_bytes(), (folder / name).read_bytes()
    in_memory = validate_upload(meta, name, preds, ds)
    shown = f"{folder}/"
    assert [line.replace(shown, "") for line in on_disk.lines()] == in_memory.lines()
    assert on_disk.counts == in_memory.counts and on_disk.format == in_memory.format
    assert (on_disk.n_answered, on_disk.missing) == (in_memory.n_answered, in_memory.missing)
    assert on_disk.submission is not None and in_memory.submission is not None
    assert on_disk.submission.run.rankings == in_memory.submission.run.rankings


@pytest.mark.parametrize("compress", [False, True])
def test_json_lines_in_memory_validate_as_on_disk(tmp_path: Path, ds: Dataset, compress) -> None:
    run = perfect_run(ds)
    folder = write_submission(tmp_path / "sys", run, meta_for(), compress=compress)
    name = "predictions.jsonl.gz" if compress else "predictions.jsonl"
    same(folder, name, ds)
    # and with errors: a duplicate line, an unknown query, a missing one
    lines = (
        gzip.decompress((folder / name).read_bytes()) if compress else (folder / name).read_bytes()
    )
    rows = lines.decode().splitlines()
    bad = [rows[0], rows[0], json.dumps({"query_id": "nope", "leaf_ids": []}), *rows[2:]]
    (folder / name).unlink()
    (folder / "predictions.jsonl").write_text("\n".join(bad) + "\n")
    same(folder, "predictions.jsonl", ds)
    errors = validate_upload(
        (folder / "meta.json").read_bytes(), "predictions.jsonl", "\n".join(bad).encode(), ds
    ).lines()
    assert any(e.startswith("predictions.jsonl:2: query_id: duplicate query") for e in errors)


@pytest.mark.parametrize("fast", [False, True])
def test_trec_in_memory_validates_as_on_disk(
    tmp_path: Path, ds: Dataset, monkeypatch, fast
) -> None:
    if fast:  # the vectorised reader reads the upload's bytes too
        monkeypatch.setattr(trec_fast, "MIN_BYTES", 0)
    folder = tmp_path / "sys"
    folder.mkdir()
    write_trec(folder / "predictions.trec", perfect_run(ds))
    (folder / "meta.json").write_text(json.dumps(meta_for()))
    same(folder, "predictions.trec", ds)


def test_meta_problems_name_the_bare_file(ds: Dataset) -> None:
    report = validate_upload(b"{nope", "predictions.jsonl", b"", ds, limits=Limits())
    assert any(line.startswith("meta.json:") for line in report.lines())
