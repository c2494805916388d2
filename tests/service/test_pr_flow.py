"""The pull-request road: scripts/check_submission_pr.sh on a scratch copy of this repository.

The scratch repository holds this checkout's files; each test opens a "pull request" (a
branch) on it and runs the check as the workflow does, with the base branch's code. The walk
follows docs/guide.md: add a folder, validate and score it, run the check, merge, and the
repository's own tests that read submissions/ still pass. A PR that also touches code is
refused in one line, and the PR's code is never run: its schema.py would accept a meta.json
without ``license`` and leaves a mark when imported; the check still refuses the folder and
no mark appears.
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

SCRIPT = Path("scripts") / "check_submission_pr.sh"
WORKFLOW = ROOT / ".github" / "workflows" / "submission.yml"
PEER = ROOT.parent / "shared" / "peer" / "whole-child"
# The PR's change to the validator: no licence needed, and a mark left whenever it is imported.
PR_SCHEMA_CHANGE = """
META_REQUIRED.pop("license", None)  # the pull request's change
open(__import__("os").environ["PR_CANARY"], "a").close()
"""

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git on this machine")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return done.stdout.decode()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository holding this checkout's tracked files on ``main``, beside a link to
    ``../shared`` (so its tests find the Whole Child release as this checkout's do)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to copy")
    top = tmp_path_factory.mktemp("pr")
    root = top / "repo"
    for rel in git(ROOT, "ls-files", "-z").split("\0"):
        if rel and (ROOT / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, root / rel)
    if (ROOT.parent / "shared").is_dir():
        (top / "shared").symlink_to(ROOT.parent / "shared")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.org")
    git(root, "config", "user.name", "t")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {**base, "PATH": path, "PYTHON": sys.executable, "SEARCHTOME_NO_PROGRESS": "1", **extra}


def check(repo: Path, data: Path, **extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = repo.parent / f"out-{git(repo, 'branch', '--show-current').strip()}"
    done = subprocess.run(
        ["bash", str(SCRIPT), "main", str(data), str(out)],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env(**extra),
        timeout=600,
    )
    return done, out


def pull_request(repo: Path, name: str) -> None:
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "clean", "-qfd")
    git(repo, "checkout", "-q", "-B", name)


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def add_folder(repo: Path, name: str, lines: list[str], **meta: object) -> Path:
    folder = repo / "submissions" / name
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text("".join(line + "\n" for line in lines))
    (folder / "meta.json").write_text(json.dumps({**meta_for(name), **meta}, indent=2))
    return folder


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The refusal: exit 1, one line on stderr, the same as a GitHub annotation on stdout."""
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"::error::{lines[0].removeprefix('check_submission_pr: ')}" in done.stdout
    return lines[0]


def test_the_workflow_runs_the_base_branchs_script_and_code() -> None:
    text = WORKFLOW.read_text()
    assert "pull_request:" in text and "pull_request_target" not in text  # no secrets for forks
    assert 'git archive "origin/$BASE"' in text  # the base branch's tree ...
    assert '/bin/pip" install "$RUNNER_TEMP/base"' in text  # ... is what gets installed
    assert 'bash "$RUNNER_TEMP/base/scripts/check_submission_pr.sh"' in text  # and run
    assert "pip install -e ." not in text and "pip install ." not in text  # never the PR's


@pytest.mark.skipif(not PEER.is_dir(), reason="needs ../shared/peer/whole-child")
def test_the_documented_road_is_green(repo: Path, tmp_path: Path) -> None:
    """docs/guide.md's steps for a new run; after the merge the repository's tests still pass."""
    data = tmp_path / "whole-child"
    subprocess.run(
        [sys.executable, "-m", "searchtome", "import", "repro", str(PEER), "--out", str(data)],
        check=True,
        capture_output=True,
        env=env(),
    )
    pull_request(repo, "newcomer")
    folder = repo / "submissions" / "newcomer"
    folder.mkdir()
    shutil.copy(repo / "submissions" / "bm25" / "predictions.jsonl.gz", folder)
    (folder / "meta.json").write_text(json.dumps(meta_for("newcomer"), indent=2))
    for command in ("validate", "score"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "searchtome",
                command,
                "submissions/newcomer",
                "--data",
                str(data),
            ],
            cwd=repo,
            check=True,
            capture_output=True,
            env=env(),
        )
    commit(repo, "add newcomer")
    done, out = check(repo, data)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: newcomer validated, scored and ranked by main's code" in done.stdout
    ranked = [s["system"] for s in json.loads((out / "leaderboard.json").read_text())["systems"]]
    expected = json.loads((repo / "leaderboard" / "whole-child" / "expected.json").read_text())
    assert sorted(ranked) == sorted([*expected["systems"], "newcomer"])  # the base's runs too
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge newcomer", "newcomer")
    tests = [  # every test that reads submissions/ as a whole, or the committed board
        "tests/submissions/test_submitted_runs.py",
        "tests/submissions/test_meta_document.py",
        "tests/dataset/test_revision.py",
        "tests/leaderboard/test_seeds.py::test_groups_of_one_leave_every_output_byte_identical",
    ]
    pytest_args = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", *tests]
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env(),
        timeout=900,
    )
    assert suite.returncode == 0, suite.stdout[-3000:]
    assert " passed" in suite.stdout and "skipped" not in suite.stdout, suite.stdout[-500:]
    assert git(repo, "status", "--porcelain") == ""


def test_a_pr_that_also_changes_the_validator_is_refused_and_its_code_never_runs(
    repo: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    canary = tmp_path / "the PR's code ran"
    pull_request(repo, "nolicence")
    lines = all_lines(load(tiny_dataset))
    folder = add_folder(repo, "nolicence", lines)
    meta = json.loads((folder / "meta.json").read_text())
    del meta["license"]
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    schema = repo / "searchtome" / "submissions" / "schema.py"
    schema.write_text(schema.read_text() + PR_SCHEMA_CHANGE)
    # With the PR's code the folder would pass (and leave the mark): the change is real.
    theirs = subprocess.run(
        [sys.executable, "-m", "searchtome", "validate", str(folder), "--data", str(tiny_dataset)],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env(PR_CANARY=str(canary)),
    )
    assert theirs.returncode == 0 and canary.exists(), theirs.stdout + theirs.stderr
    canary.unlink()
    commit(repo, "a run, and a validator that wants no licence")
    done, _ = check(repo, tiny_dataset, PR_CANARY=str(canary))
    assert one_line(done) == (
        "check_submission_pr: searchtome/submissions/schema.py: a submission PR changes only "
        "files in a new folder submissions/NAME/; move this change to a pull request of its own"
    )
    assert not canary.exists()
    # Even with the PR's code first on the import path (as `pip install -e .` of the PR
    # would put it), the folder alone is judged by the base branch's validator.
    git(repo, "reset", "-q", "HEAD~1")
    git(repo, "add", "submissions/nolicence")
    git(repo, "commit", "-qm", "the run alone; the changed schema.py stays in the checkout")
    done, _ = check(repo, tiny_dataset, PR_CANARY=str(canary), PYTHONPATH=str(repo))
    assert one_line(done) == (
        "check_submission_pr: submissions/nolicence/meta.json: license: missing (licence of the "
        "predictions and meta data); fix it and rerun `searchtome validate "
        "submissions/nolicence --data DATA` until it passes"
    )
    assert not canary.exists()


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ("README.md", "README.md: a submission PR changes only files in a new folder"),
        (
            "submissions/bm25/meta.json",
            "submissions/bm25/meta.json: submissions/bm25 is already on main; a submission PR "
            "adds a new folder (a new version of a run gets a new name)",
        ),
        (
            "leaderboard/whole-child/runs.txt",
            "leaderboard/whole-child/runs.txt: a submission PR changes only files in a new",
        ),
    ],
)
def test_a_pr_touching_anything_but_its_new_folder_is_refused(
    repo: Path, tiny_dataset: Path, change: str, line: str
) -> None:
    pull_request(repo, "sneaky")
    add_folder(repo, "sneaky", all_lines(load(tiny_dataset)))
    with (repo / change).open("a") as f:
        f.write("\n")
    commit(repo, "sneaky")
    assert one_line(check(repo, tiny_dataset)[0]).startswith(f"check_submission_pr: {line}")


def test_a_symbolic_link_is_refused(repo: Path, tiny_dataset: Path) -> None:
    pull_request(repo, "linked")
    folder = add_folder(repo, "linked", all_lines(load(tiny_dataset)))
    (folder / "notes.txt").symlink_to("/etc/hostname")
    commit(repo, "linked")
    assert one_line(check(repo, tiny_dataset)[0]) == (
        "check_submission_pr: submissions/linked/notes.txt: a symbolic link or submodule (mode "
        "120000); commit the file itself"
    )


def test_a_bad_submission_fails_with_the_validators_line(repo: Path, tiny_dataset: Path) -> None:
    pull_request(repo, "broken")
    add_folder(repo, "broken", ["{not json", *all_lines(load(tiny_dataset))])
    commit(repo, "broken")
    line = one_line(check(repo, tiny_dataset)[0])
    assert line.startswith(
        "check_submission_pr: submissions/broken/predictions.jsonl:1: json: not valid JSON"
    )
    assert line.endswith("`searchtome validate submissions/broken --data DATA` until it passes")


def test_a_pr_adding_no_folder_has_nothing_to_check(repo: Path, tiny_dataset: Path) -> None:
    pull_request(repo, "empty")
    done, _ = check(repo, tiny_dataset)
    assert done.returncode == 0 and "nothing to check" in done.stdout
