"""Hostile submission folders: links out, missing and doubled files, odd bytes; one line each."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from tests.fixtures.hostile_cli import cli, folder_with, meta_json, refused


@pytest.fixture(scope="module")
def good_lines(tiny_dataset: Path) -> bytes:
    ds = load(tiny_dataset)
    rows = [{"query_id": q.query_id, "leaf_ids": [q.leaf_id]} for q in ds.queries("test")]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.mark.parametrize("command", ["validate", "score"])
def test_predictions_linked_outside_the_folder_are_refused(
    command: str,
    tmp_path: Path,
    tiny_dataset: Path,
    good_lines: bytes,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(good_lines)
    folder = tmp_path / "sys"
    folder.mkdir()
    (folder / "meta.json").write_text(meta_json("sys"))
    (folder / "predictions.jsonl").symlink_to(outside)
    result = cli(capsys, command, folder, "--data", tiny_dataset)
    line = refused(result, "outside the submission folder")
    assert line.startswith(f"searchtome: error: {folder}/predictions.jsonl: a symbolic link to ")


def test_meta_json_linked_to_a_system_file_is_refused(
    tmp_path: Path, tiny_dataset: Path, good_lines: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, "sys", good_lines)
    (folder / "meta.json").unlink()
    (folder / "meta.json").symlink_to("/etc/passwd")
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    refused(result, "meta.json: a symbolic link to /etc/passwd, outside the submission folder")


def test_a_relative_link_climbing_out_is_refused(
    tmp_path: Path, tiny_dataset: Path, good_lines: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "real.jsonl").write_bytes(good_lines)
    folder = tmp_path / "sys"
    folder.mkdir()
    (folder / "meta.json").write_text(meta_json("sys"))
    os.symlink("../real.jsonl", folder / "predictions.jsonl")
    refused(
        cli(capsys, "validate", folder, "--data", tiny_dataset), "outside the submission folder"
    )


def test_a_link_inside_the_folder_is_fine(
    tmp_path: Path, tiny_dataset: Path, good_lines: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, "sys", good_lines, "run.jsonl")
    (folder / "predictions.jsonl").symlink_to("run.jsonl")
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    assert result.rc == 0, result.text


def test_two_predictions_files(
    tmp_path: Path, tiny_dataset: Path, good_lines: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, "sys", good_lines)
    (folder / "predictions.jsonl.gz").write_bytes(gzip.compress(good_lines))
    refused(cli(capsys, "validate", folder, "--data", tiny_dataset), "2 predictions files")


def test_no_predictions_file(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "sys"
    folder.mkdir()
    (folder / "meta.json").write_text(meta_json("sys"))
    refused(cli(capsys, "validate", folder, "--data", tiny_dataset), "no predictions file")


def test_missing_path(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, "score", tmp_path / "nope", "--data", tiny_dataset)
    refused(result, "no such submission folder or run file")


def test_missing_meta_json(
    tmp_path: Path, tiny_dataset: Path, good_lines: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, "sys", good_lines)
    (folder / "meta.json").unlink()
    refused(cli(capsys, "validate", folder, "--data", tiny_dataset), "meta.json: file: missing")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            lambda b: b.replace(b'"leaf_ids"', b'"leaf_\xff\xfeids"', 1),
            ":1: encoding: not valid UTF-8 (byte",
        ),
        (lambda b: b.replace(b"\n", b"\r\n"), None),  # CRLF lines are fine
        (lambda b: b"\xef\xbb\xbf" + b, None),  # a BOM on the first line is fine
        (lambda b: b + b.split(b"\n")[0] + b"\n", "duplicate query"),
        (lambda b: b + b'{"query_id": "nope", "leaf_ids": []}\n', "unknown query 'nope'"),
        (lambda b: b"\x1f\x8b\x08\x00" + b[:50], "gzip: corrupt compressed data"),
        (lambda b: b"\x00" * 5000, ":1: json: not valid JSON"),
        (lambda b: b.replace(b"]}", b'], "rank": 1}', 1), ":1: rank: unexpected field"),
    ],
    ids=[
        "bad-utf8",
        "crlf",
        "bom",
        "duplicate-line",
        "unknown-query",
        "truncated-gzip",
        "nul-bytes",
        "extra-field",
    ],
)
def test_odd_bytes(
    edit: object,
    needle: str | None,
    tmp_path: Path,
    tiny_dataset: Path,
    good_lines: bytes,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = folder_with(tmp_path, "sys", edit(good_lines))  # type: ignore[operator]
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    if needle is None:
        assert result.rc == 0, result.text
    else:
        refused(result, needle)


@pytest.mark.parametrize(
    ("byte", "gib"), [(b"\0", 1.1), (b"a", 2.0)], ids=["zeros-1.1GiB", "a-2GiB"]
)
def test_one_endless_gzip_line_is_refused_without_being_held(
    byte: bytes, gib: float, tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written block by block from a generator: the line never exists in memory, here or there.
    path = tmp_path / "sys" / "predictions.jsonl.gz"
    path.parent.mkdir()
    (path.parent / "meta.json").write_text(meta_json("sys"))
    block = byte * (1 << 20)
    with gzip.open(path, "wb", compresslevel=1) as gz:
        for _ in range(int(gib * 1024)):
            gz.write(block)
    result = cli(capsys, "validate", path.parent, "--data", tiny_dataset)
    refused(result, "gzip: content exceeds 1,073,741,824 bytes when decompressed")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"[]\n" * 5000, ":1: json: expected a JSON object, got list (and 4,999 more problems"),
        (
            b'{"query_id": "q", "leaf_ids": ["a"], "scores": [1' + b"0" * 400 + b"]}\n",
            "scores[0]: expected a number, got an integer of 401 digits",
        ),
        (b"\xff\xfe{}\n", ":1: encoding: not valid UTF-8 (byte 1)"),
        (
            b'{"query_id": "q", "leaf_ids": ["a", "a"]}\n',
            "leaf_ids[1]: duplicate of leaf_ids[0] ('a')",
        ),
        (
            b'{"query_id": "q", "leaf_ids": []}\n' * 2,
            ":2: query_id: duplicate query 'q' (first on line 1)",
        ),
    ],
    ids=["empty-lists", "score-10^400", "bad-utf8", "duplicate-id", "duplicate-query"],
)
def test_score_refuses_hostile_runs_in_one_line(
    body: bytes, needle: str, tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, "sys", body)
    result = cli(capsys, "score", folder, "--data", tiny_dataset)
    line = refused(result, needle)
    assert line.startswith("searchtome: error: ") and result.err.count("\n") == 1
