"""Hostile JSON in predictions and meta.json: one line naming file, line and field, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from tests.fixtures.hostile_cli import cli, folder_with, meta_json, refused

HUGE = "1" + "0" * 400  # 10**400 as a JSON literal


@pytest.fixture(scope="module")
def qid(tiny_dataset: Path) -> str:
    return load(tiny_dataset).queries("test")[0].query_id


def _validate(capsys: pytest.CaptureFixture[str], folder: Path, data: Path) -> object:
    return cli(capsys, "validate", folder, "--data", data)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("[" * 200_000 + "]" * 200_000, ":1: json: not valid JSON (nested too deeply"),
        (
            '{"query_id": "Q", "leaf_ids": ' + "[" * 5000 + "]" * 5000 + "}",
            ":1: json: not valid JSON (nested too deeply",
        ),
        (
            '{"query_id": "Q", "leaf_ids": [[["a"]]]}',
            ":1: leaf_ids[0]: expected a non-empty string, got list",
        ),
        (
            '{"query_id": "Q", "leaf_ids": ["a"], "scores": [' + HUGE + "]}",
            ":1: scores[0]: expected a number, got an integer of 401 digits (out of range)",
        ),
        (
            '{"query_id": "Q", "leaf_ids": ["a"], "scores": [-' + "9" * 6000 + "]}",
            ":1: scores[0]: expected a number, got an integer of 6,000 digits",
        ),
        (
            '{"query_id": "Q", "leaf_ids": ["a"], "scores": [1e400]}',
            ":1: scores[0]: not a finite number",
        ),
        (
            '{"query_id": "Q", "leaf_ids": ["a"], "scores": [NaN]}',
            ":1: json: not valid JSON (NaN is not allowed in JSON)",
        ),
        (
            '{"query_id": ' + HUGE + ', "leaf_ids": []}',
            ":1: query_id: expected a non-empty string, got an integer of 401 digits",
        ),
        (
            '{"query_id": "Q", "query_id": "Q", "leaf_ids": []}',
            ":1: json: not valid JSON (duplicate field 'query_id')",
        ),
        ('{"query_id": "Q", "leaf_ids": [], "' + "k" * 5000 + '": 1}', ":1: kkkkkkkkkk"),
        ("\ufeff\ufeff{}", ":1: json: not valid JSON"),
    ],
    ids=[
        "array-200k-deep",
        "leaf-ids-5000-deep",
        "leaf-ids-nested-list",
        "score-10^400",
        "score-minus-6000-digits",
        "score-1e400",
        "score-NaN",
        "query-id-10^400",
        "repeated-key",
        "5000-char-field-name",
        "two-BOMs",
    ],
)
def test_hostile_prediction_line(
    line: str,
    needle: str,
    qid: str,
    tmp_path: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = folder_with(tmp_path, "sys", line.replace('"Q"', json.dumps(qid)).encode() + b"\n")
    refused(_validate(capsys, folder, tiny_dataset), needle)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            lambda m: m.replace('"models": []', '"models": [], "seed": ' + HUGE),
            "meta.json:4: seed: expected an integer or null, got an integer of 401 digits",
        ),
        (
            lambda m: m.replace(
                '"models": []', '"models": [], "run_info": {"wall_time_s": ' + HUGE + "}"
            ),
            "run_info: run_info.wall_time_s: an integer of 401 digits is out of range",
        ),
        (
            lambda m: m.replace(
                '"models": []', '"models": [], "run_info": {"peak_rss_mib": 1e999}'
            ),
            "run_info: run_info.peak_rss_mib: inf is not a finite number",
        ),
        (
            lambda m: m.replace('"models": []', '"models": [], "config": ' + "[" * 100 + "]" * 100),
            "config: expected an object, got list",
        ),
        (
            lambda m: m.replace(
                '"models": []', '"models": [], "config": {"a": ' + "[" * 100 + "]" * 100 + "}"
            ),
            "config: config.a[0][0]",
        ),
        (
            lambda m: m.replace(
                '"models": []', '"models": [], "config": ' + '{"a": ' * 50_000 + "1" + "}" * 50_000
            ),
            "meta.json: json: not valid JSON (nested too deeply",
        ),
        (lambda m: "[" * 300_000, "meta.json: json: not valid JSON (nested too deeply"),
    ],
    ids=[
        "seed-10^400",
        "run-info-10^400",
        "run-info-1e999",
        "config-list-100-deep",
        "config-100-deep",
        "config-50000-deep",
        "meta-300k-deep",
    ],
)
def test_hostile_meta_json(
    edit: object,
    needle: str,
    qid: str,
    tmp_path: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = json.dumps({"query_id": qid, "leaf_ids": []}).encode() + b"\n"
    folder = folder_with(tmp_path, "sys", line)
    (folder / "meta.json").write_text(edit(meta_json("sys")))  # type: ignore[operator]
    refused(_validate(capsys, folder, tiny_dataset), needle)


def test_deep_run_file_scored_is_one_line(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with(tmp_path, "sys", b"[" * 100_000 + b"\n")
    result = cli(capsys, "score", folder, "--data", tiny_dataset)
    line = refused(result, "searchtome: error:")
    assert "nested too deeply" in line
