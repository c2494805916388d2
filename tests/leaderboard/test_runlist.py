"""A board's run list (``--runs``): only the folders it names are ranked; bad lists fail in one
line naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.dataset.loader import Dataset
from searchtome.errors import SearchTomeError
from searchtome.leaderboard.runlist import read_run_list
from tests.fixtures.submission_helpers import (  # noqa: F401  (ds is a fixture)
    all_lines,
    dataset_fixture,
    submission_folder,
)


def test_only_the_listed_folders_are_ranked(
    ds: Dataset, tiny_dataset: Path, tmp_path: Path
) -> None:
    subs = tmp_path / "submissions"
    subs.mkdir()
    for name in ("ours", "theirs"):
        submission_folder(subs, ds, all_lines(ds), name=name)
    (tmp_path / "runs.txt").write_text("# the project's runs\nours\n\n")
    args = ["--no-progress", "leaderboard", "--data", str(tiny_dataset), "--no-pair"]
    args += ["--submissions", str(subs), "--out", str(tmp_path / "board")]
    assert main([*args, "--runs", str(tmp_path / "runs.txt")]) == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert [s["system"] for s in board["systems"]] == ["ours"]
    assert main(args) == 0  # without a list every folder is ranked
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert sorted(s["system"] for s in board["systems"]) == ["ours", "theirs"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ours\n../etc\n", "runs.txt:2: '../etc' is not a folder name"),
        ("ours\nours # again\n", "runs.txt:2: 'ours' is listed twice"),
        ("# nothing\n\n", "runs.txt: names no run"),
    ],
)
def test_a_bad_list_fails_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "runs.txt").write_text(text)
    with pytest.raises(SearchTomeError) as caught:
        read_run_list(tmp_path / "runs.txt")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_listed_folder_that_is_missing_fails(
    ds: Dataset, tiny_dataset: Path, tmp_path: Path, capsys
) -> None:
    subs = tmp_path / "submissions"
    subs.mkdir()
    submission_folder(subs, ds, all_lines(ds), name="ours")
    (tmp_path / "runs.txt").write_text("ours\ngone\n")
    args = ["--no-progress", "leaderboard", "--data", str(tiny_dataset), "--submissions"]
    args += [str(subs), "--out", str(tmp_path / "b"), "--runs", str(tmp_path / "runs.txt")]
    assert main(args) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        "runs.txt: lists 'gone', which is no submission folder here; add "
        "the folder or remove the line"
    )
