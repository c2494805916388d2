"""`server init --check-public-overlap`: a private half whose questions are public is refused.

The reproduction's release (``../shared/peer/whole-child``) publishes every question with its
gold; a blind release imported from it (`import repro --blind`) must be refused against it.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from searchtome.dataset.overlap import normal, public_texts
from tests.conftest import PEER
from tests.service.helpers import blind_release, cli

pytestmark = pytest.mark.skipif(
    not (PEER / "data" / "splits").is_dir(), reason="no ../shared/peer/whole-child"
)


def init(home: Path, public: Path, private: Path, *extra: str):
    args = ("--home", str(home), "--public", str(public), "--private", str(private))
    return cli("server", "init", *args, *extra)


def test_a_private_half_published_elsewhere_is_refused(tmp_path: Path) -> None:
    public, private = tmp_path / "wc", tmp_path / "wc-private"
    done = cli("import", "repro", str(PEER), "--out", str(public), "--blind", "test")
    assert done.returncode == 0, done.stderr
    home = tmp_path / "srv"
    refused = init(home, public, private, "--check-public-overlap", str(PEER))
    assert refused.returncode != 0 and not home.exists()
    line = refused.stderr.splitlines()[-1]
    assert line.startswith(f"searchtome: error: {private}: 1,758 of 1,758 private test questions")
    assert "--allow-public-overlap" in line
    # the override is a rehearsal: it warns and goes on
    allowed = init(
        home, public, private, "--check-public-overlap", str(PEER), "--allow-public-overlap"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "searchtome: warning:" in allowed.stderr and "rehearsal" in allowed.stderr
    assert stat.S_IMODE((home / "private").stat().st_mode) == 0o700
    assert {
        stat.S_IMODE(p.stat().st_mode) for p in (home / "private").rglob("*") if p.is_file()
    } == {0o600}


def test_fresh_questions_pass_the_check(tmp_path: Path) -> None:
    public, private = blind_release(tmp_path)  # the tiny built dataset: its own questions
    done = init(tmp_path / "srv", public, private, "--check-public-overlap", str(PEER))
    assert done.returncode == 0, done.stderr
    assert "no private question appears in it verbatim" in done.stderr
    # a blind public half holds its blind questions without gold: only the other splits count
    full = load(tmp_path / "full")
    assert public_texts(public) == {
        normal(q.text) for s in ("train", "dev") for q in full.queries(s)
    }
