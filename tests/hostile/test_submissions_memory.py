"""Hostile predictions files that used to exhaust memory: every finding was kept without limit.

Each case goes through the real ``searchtome validate`` and must give a clear line, exit 1, and
(where the file is large) a peak resident memory far below what the old validator needed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from tests.fixtures.hostile_cli import cli, cli_rss, folder_with, refused

# What `searchtome validate` on the tiny dataset may use, whatever the file: the interpreter,
# numpy and pyarrow with the dataset loaded take ~130 MiB; docs/submissions.md promises this
# plus at most ~100 MiB for any file within the limits.
BOUND_MIB = 400


def _gzip_lines(line: bytes, count: int) -> bytes:
    """``count`` copies of ``line``, gzip-compressed, without holding the plain text."""
    import io

    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as gz:
        block = line * 65536
        for _ in range(count // 65536):
            gz.write(block)
        gz.write(line * (count % 65536))
    return buffer.getvalue()


def test_gzip_of_empty_list_lines_stops_early_in_bounded_memory(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    # 100 M lines of `[]` (300 MB decompressed, inside the 1 GiB limit) in under 1 MB of gzip.
    data = _gzip_lines(b"[]\n", 100_000_000)
    assert len(data) < 1 << 20
    folder = folder_with(tmp_path, "bomb", data, "predictions.jsonl.gz")
    result = cli_rss("validate", folder, "--data", tiny_dataset)
    refused(result, "stopped reading at line 100,000 after 100,000 errors")
    refused(result, "json: expected a JSON object, got list")
    assert "INVALID" in result.line_with("bomb: INVALID")
    assert result.peak_mib is not None and result.peak_mib < BOUND_MIB, result.peak_mib


def test_plain_file_of_bad_objects_counts_every_error_keeps_the_first(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = b"".join(b'{"query_id": %d, "leaf_ids": "x"}\n' % i for i in range(3000))
    folder = folder_with(tmp_path, "bad", lines)
    result = cli(capsys, "validate", folder, "--data", tiny_dataset, "--json")
    assert result.rc == 1
    (report,) = json.loads(result.out)
    # Two type errors a line, each counted; only the first 1000 of the kind are kept.
    assert report["problem_counts"]["error:type"] == 6000
    assert sum(p["code"] == "type" for p in report["problems"]) == 1000
    text = cli(capsys, "validate", folder, "--data", tiny_dataset)
    refused(text, "... and 5,980 more errors of kind 'type'")
    assert "INVALID (6001 errors)" in text.out  # 6000 type errors + the missing queries


def test_a_million_made_up_query_ids_use_no_table(tmp_path: Path, tiny_dataset: Path) -> None:
    # Distinct ids never seen in the split: none of them is remembered.
    data = _gzip_lines(b'{"query_id": "zz", "leaf_ids": []}\n', 1)
    body = b"".join(b'{"query_id": "made-up-%07d", "leaf_ids": []}\n' % i for i in range(400_000))
    folder = folder_with(tmp_path, "unknown", gzip.compress(body) + data, "predictions.jsonl.gz")
    result = cli_rss("validate", folder, "--data", tiny_dataset)
    refused(result, "query_id: unknown query 'made-up-0000000' in the test split")
    assert result.peak_mib is not None and result.peak_mib < BOUND_MIB, result.peak_mib


def test_a_huge_query_id_is_quoted_short(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qid = "q" * 900_000
    line = json.dumps({"query_id": qid, "leaf_ids": ["a", "a"]}).encode() + b"\n"
    folder = folder_with(tmp_path, "long", line * 3)
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    shown = refused(result, "unknown query 'qqq")
    assert "(900,000 characters)" in shown
    refused(result, "duplicate of leaf_ids[0] ('a')")


def test_one_line_with_a_hundred_thousand_bad_ids(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = load(tiny_dataset)
    qid = ds.queries("test")[0].query_id
    line = json.dumps({"query_id": qid, "leaf_ids": [0] * 100_000}).encode() + b"\n"
    folder = folder_with(tmp_path, "wide", line)
    result = cli(capsys, "validate", folder, "--data", tiny_dataset)
    refused(result, "leaf_ids[0]: expected a non-empty string, got number")
    refused(result, "more errors of kind 'type'")


def test_a_gigabyte_of_blank_lines_stops_at_the_line_cap(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    # The default cap is 10,000,000 lines (~10 s of reading); a small one shows the same refusal.
    from searchtome.submissions import Limits, validate_submission

    data = _gzip_lines(b"\n", 1_000_000_000 // 8)  # 125 M newlines, inside the 1 GiB limit
    folder = folder_with(tmp_path, "blank", data, "predictions.jsonl.gz")
    report = validate_submission(folder, tiny_dataset, limits=Limits(max_lines=50_000))
    assert [str(p).split(": ", 1)[1] for p in report.errors] == [
        "size: more than 50,000 lines; one line per query is expected"
    ]
    assert not report.missing  # not read to its end: no "missing queries"
