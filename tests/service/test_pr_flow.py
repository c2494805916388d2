"""The pull-request flow: scripts/check_submission_pr.sh on a scratch git repository.

The same script the GitHub workflow runs, run here against the tiny dataset: a good folder
passes and is ranked, a bad one fails with the validator's one line, a PR touching anything
outside submissions/ is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from tests.fixtures.submission_helpers import all_lines, meta_for
from tests.service.helpers import ROOT

SCRIPT = ROOT / "scripts" / "check_submission_pr.sh"
WORKFLOW = ROOT / ".github" / "workflows" / "submission.yml"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def add_submission(repo: Path, name: str, lines: list[str]) -> None:
    folder = repo / "submissions" / name
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text("".join(line + "\n" for line in lines))
    (folder / "meta.json").write_text(json.dumps(meta_for(name)))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("no git on this machine")
    root = tmp_path_factory.mktemp("pr") / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.org")
    git(root, "config", "user.name", "t")
    ds = load(tiny_dataset)
    misses = [json.dumps({"query_id": q.query_id, "leaf_ids": []}) for q in ds.queries("test")[:5]]
    add_submission(root, "baseline", misses + all_lines(ds, skip=5))
    (root / "README").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def check(repo: Path, branch: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(SCRIPT), "main", str(data), str(repo.parent / f"out-{branch}")],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def branch(repo: Path, name: str) -> None:
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", name)


def test_the_workflow_runs_the_script() -> None:
    text = WORKFLOW.read_text()
    assert "scripts/check_submission_pr.sh" in text and "pull_request:" in text
    assert "pull_request_target" not in text  # forks' code never runs with secrets


def test_a_good_submission_passes_and_is_ranked(repo: Path, tiny_dataset: Path) -> None:
    branch(repo, "good")
    ds = load(tiny_dataset)
    add_submission(repo, "newcomer", all_lines(ds))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "add newcomer")
    done = check(repo, "good", tiny_dataset)
    assert done.returncode == 0, done.stdout + done.stderr
    board = json.loads((repo.parent / "out-good" / "leaderboard.json").read_text())
    assert board["systems"][0]["system"] == "newcomer"


def test_a_bad_submission_fails_with_one_line(repo: Path, tiny_dataset: Path) -> None:
    branch(repo, "bad")
    ds = load(tiny_dataset)
    add_submission(repo, "broken", ["{not json", *all_lines(ds)])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "add broken")
    done = check(repo, "bad", tiny_dataset)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("check_submission_pr: submissions/broken: rejected: ")
    assert "predictions.jsonl:1: json: not valid JSON" in lines[0]
    assert "::error::submissions/broken: rejected" in done.stdout


def test_a_pr_touching_code_is_refused(repo: Path, tiny_dataset: Path) -> None:
    branch(repo, "sneaky")
    add_submission(repo, "sneaky", all_lines(load(tiny_dataset)))
    (repo / "README").write_text("changed\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "sneaky")
    done = check(repo, "sneaky", tiny_dataset)
    assert done.returncode == 1 and "also changes: README" in done.stderr
