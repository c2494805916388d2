"""A full disk gives one line naming the path, never a traceback, and the old file survives.

The real thing first: a 64 KiB tmpfs mounted by the test (needs root and mount rights; the test
skips saying why when it cannot mount). Then a stand-in that works anywhere: a child process
whose file-size limit (RLIMIT_FSIZE) makes writes fail with EFBIG.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from tests.fixtures.hostile_cli import cli, folder_with, refused


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled to the last block."""
    mount = tmp_path / "full"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command to make a small file system")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a 64 KiB tmpfs here: {made.stderr.decode().strip()}")
    try:
        filler = mount / "filler"
        try:
            with open(filler, "wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError:
            pass
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def submission(tmp_path: Path, tiny_dataset: Path) -> Path:
    ds = load(tiny_dataset)
    rows = [{"query_id": q.query_id, "leaf_ids": [q.leaf_id]} for q in ds.queries("test")]
    return folder_with(tmp_path, "sys", "".join(json.dumps(r) + "\n" for r in rows).encode())


def test_export_run_to_a_full_disk(
    full_disk: Path, submission: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = full_disk / "run.trec"
    result = cli(capsys, "export", "run", submission, "--format", "trec", "--out", out)
    line = refused(result, "no space left on device")
    assert (
        line
        == f"searchtome: error: {out}: cannot write: no space left on device; free some space or write somewhere else"
    )
    assert not out.exists()
    assert [p.name for p in full_disk.iterdir()] == ["filler"]  # no temporary file left behind


def test_export_beir_to_a_full_disk(
    full_disk: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, "export", "beir", tiny_dataset, "--out", full_disk / "beir")
    refused(result, "no space left on device")


def test_full_disk_keeps_the_old_file(
    full_disk: Path, submission: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (full_disk / "filler").unlink()
    out = full_disk / "run.jsonl"
    out.write_text("old\n")
    with open(full_disk / "filler", "wb", buffering=0) as fh, pytest.raises(OSError):
        while True:
            fh.write(b"\0" * 4096)
            fh.flush()
    result = cli(capsys, "export", "run", submission, "--format", "jsonl", "--out", out)
    refused(result, f"{out}: cannot write: no space left on device")
    assert out.read_text() == "old\n"


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (500, 500))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed


def test_file_size_limit_stand_in(tmp_path: Path, submission: Path) -> None:
    out = tmp_path / "run.trec"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "searchtome.cli",
            "export",
            "run",
            str(submission),
            "--format",
            "trec",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"searchtome: error: {out}: cannot write: file too large for this file system "
        "(or the process's file size limit)"
    )
    assert not out.exists()
