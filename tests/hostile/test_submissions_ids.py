"""Runs whose every id is malformed the same way: a format mistake, refused with a did-you-mean.

Invalid ids are the paper's hallucination measure, so a few of them are counted, not errors;
but a run where (nearly) every id is one fix away from a node of the query's book was written
in the wrong format, and would otherwise validate OK and score 0 without comment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from tests.fixtures.hostile_cli import cli, folder_with, refused


def _run(tiny_dataset: Path, mangle: Callable[[str], str], share: float = 1.0) -> bytes:
    ds = load(tiny_dataset)
    queries = ds.queries("test")
    rows = []
    for i, q in enumerate(queries):
        leaf = q.leaf_id if i >= share * len(queries) else mangle(q.leaf_id)
        rows.append({"query_id": q.query_id, "leaf_ids": [leaf]})
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _trec(tiny_dataset: Path, mangle: Callable[[str], str]) -> bytes:
    ds = load(tiny_dataset)
    lines = [f"{q.query_id} Q0 {mangle(q.leaf_id)} 1 1.0 sys\n" for q in ds.queries("test")]
    return "".join(lines).encode()


@pytest.mark.parametrize(
    ("mangle", "needle"),
    [
        (
            lambda leaf: leaf.split("/", 1)[1],
            "30 of 30 ids are no id of the query's book but would be once prefixed with the book id",
        ),
        (lambda leaf: leaf.upper(), "would be once stripped of spaces and lower-cased"),
        (lambda leaf: f" {leaf} ", "would be once stripped of spaces and lower-cased"),
        (lambda leaf: "book/" + leaf.split("/", 1)[1], "would be once given the query's book id"),
    ],
    ids=["no-book-prefix", "upper-case", "padded", "placeholder-book"],
)
def test_every_id_malformed_is_refused(
    mangle: Callable[[str], str],
    needle: str,
    tmp_path: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = folder_with(tmp_path, "sys", _run(tiny_dataset, mangle))
    line = refused(cli(capsys, "validate", folder, "--data", tiny_dataset), needle)
    assert "did you mean '" in line and ":1: leaf_ids: " in line


def test_nearly_every_id_malformed_is_refused(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(
        tmp_path, "sys", _run(tiny_dataset, lambda leaf: leaf.split("/", 1)[1], 0.95)
    )
    refused(cli(capsys, "validate", folder, "--data", tiny_dataset), "29 of 30 ids are no id")


def test_a_trec_run_without_book_prefixes_is_refused(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(
        tmp_path, "sys", _trec(tiny_dataset, lambda leaf: leaf.split("/", 1)[1]), "predictions.trec"
    )
    refused(
        cli(capsys, "validate", folder, "--data", tiny_dataset), "docno: 30 of 30 ids are no id"
    )


def test_some_malformed_ids_are_hallucinations_not_a_format_mistake(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(
        tmp_path, "sys", _run(tiny_dataset, lambda leaf: leaf.split("/", 1)[1], 0.5)
    )
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    assert result.rc == 0, result.text
    assert "invalid ids (exist nowhere in the book): 15 of 30" in result.out


def test_ids_of_another_real_book_stay_invalid_ids(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {"alpha-bio": "beta-law", "beta-law": "alpha-bio"}

    def swap(leaf: str) -> str:
        book, rest = leaf.split("/", 1)
        return f"{other[book]}/{rest}"

    folder = folder_with(tmp_path, "sys", _run(tiny_dataset, swap))
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    assert result.rc == 0, result.text
    assert "malformed" not in result.text and "did you mean" not in result.text
