"""Publishing with names the Hub refuses, an unreachable Hub, and books of unknown licence."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from searchtome.cli import main
from tests.fixtures.hub_standin import HubStandIn
from tests.hostile.conftest import build_args

TOKEN = "hf_TESTtokenThatMustNeverBePrinted0123"

# Each is refused by the Hub; `publish --dry-run` used to accept every one of them.
BAD_NAMES = [
    "org/a..b",
    "org/a--b",
    "org/-name",
    "org/name-",
    "org/.name",
    "org/name.",
    "org/name.git",
    "org/" + "n" * 97,
    "org/na me",
    "org/name\n",
    "org/a/b",
    "name",
    "org/",
    "-org/name",
    "org/näme",
]


@pytest.fixture
def data(tiny_dataset: Path, tmp_path: Path) -> Path:
    out = tmp_path / "data"
    shutil.copytree(tiny_dataset, out)
    return out


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_name_the_hub_refuses_is_refused_by_the_dry_run(data, name, capsys):
    assert main(["publish", str(data), f"--repo={name}", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("searchtome: error: --repo ")


def test_a_real_publish_with_a_bad_name_fails_before_any_request(data, monkeypatch, capsys):
    with HubStandIn() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        assert main(["publish", str(data), "--repo", "org/a..b"]) == 1
        assert hub.requests == []
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "the Hub refuses this name" in captured.err
    assert TOKEN not in captured.out + captured.err


def test_good_names_still_pass(data, capsys):
    for name in ("org/name", "Org_1/Name-2.v3", "o/" + "n" * 96):
        assert main(["publish", str(data), "--repo", name, "--dry-run"]) == 0, name
    capsys.readouterr()


def test_an_unreachable_hub_is_one_line(data, monkeypatch, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    assert main(["publish", str(data), "--repo", "org/tiny"]) == 1
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.startswith("searchtome: error:")]
    assert len(lines) == 1 and "publishing to org/tiny failed" in lines[0], captured.err
    assert "Traceback" not in captured.err and TOKEN not in captured.out + captured.err


def test_a_book_of_unknown_licence_is_published_with_a_warning(
    book_dir, server, tmp_path, capsys, caplog
):
    out = tmp_path / "built"
    assert main(build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")) == 0
    capsys.readouterr()
    assert main(["publish", str(out), "--repo", "org/mine", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "warning: licence unknown for field-notes" in printed
