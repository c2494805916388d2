"""A poisoned reply cache: listed, dropped, and never blocking a rerun."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import searchtome
from searchtome.cli import main
from searchtome.llm.cache import ResponseCache
from tests.fixtures.fake_openai import FakeOpenAIServer
from tests.generate.test_build import make_pdf
from tests.hostile.conftest import build_args

REPO = Path(__file__).resolve().parents[2]

POISON = {
    "brackets": "[" * 50_000,
    "huge": "x" * 9_000_000,
    "empty": "",
    "prose": "As an AI I cannot help.",
}


def _poison(cache: Path, contents: list[str]) -> list[str]:
    """Overwrite the first rows (as an older searchtome would have cached them)."""
    with sqlite3.connect(cache) as db:
        keys = [r[0] for r in db.execute("SELECT key FROM responses ORDER BY key")]
        for key, content in zip(keys, contents, strict=False):
            db.execute("UPDATE responses SET content=? WHERE key=?", (content, key))
    return keys[: len(contents)]


def test_check_lists_and_drop_removes_bad_entries_then_a_rerun_heals(
    book_dir, server, tmp_path, capsys
):
    cache, out = tmp_path / "c.sqlite", tmp_path / "data"
    args = build_args(book_dir, server.base_url, out, cache)
    assert main(args) == 0
    assert main(["cache", "check", "--cache", str(cache)]) == 0
    assert "0 unusable" in capsys.readouterr().out
    bad = _poison(cache, list(POISON.values()))
    # Replaying the poisoned cache alone fails those units, with no traceback.
    replay = build_args(
        book_dir, "cache", tmp_path / "replay", cache, "--max-failed-units", "1", "--no-repair"
    )
    assert main(replay) == 0
    printed, err = capsys.readouterr()
    assert "Traceback" not in printed + err and "FAILED units 4" in printed
    assert main(["cache", "check", "--cache", str(cache)]) == 1
    listed = capsys.readouterr().out
    assert f"{len(bad)} unusable" in listed and "reply too large (9,000,000 characters" in listed
    assert "not JSON" in listed and "empty reply" in listed
    assert main(["cache", "drop", "--bad", "--cache", str(cache)]) == 0
    assert f"dropped {len(bad)} replies" in capsys.readouterr().out
    with ResponseCache(cache) as c:
        assert not {r["key"] for r in c.rows()} & set(bad)
    server.clear()
    assert main(args) == 0
    assert len(server.chat_records()) == len(bad)  # exactly the dropped ones, asked again


def test_a_live_rerun_reasks_poisoned_entries_without_a_drop(book_dir, server, tmp_path, capsys):
    cache, out = tmp_path / "c.sqlite", tmp_path / "data"
    args = build_args(book_dir, server.base_url, out, cache)
    assert main(args) == 0
    _poison(cache, [POISON["brackets"], POISON["huge"]])
    server.clear()
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "FAILED" not in printed and len(server.chat_records()) == 2
    assert main(["cache", "check", "--cache", str(cache)]) == 0  # replaced by good replies
    assert searchtome.load(out).queries("train")


def test_drop_needs_a_choice_and_a_known_key(tmp_path, capsys):
    cache = tmp_path / "c.sqlite"
    ResponseCache(cache).close()
    assert main(["cache", "drop", "--cache", str(cache)]) == 1
    assert "--bad, or --key" in capsys.readouterr().err
    assert main(["cache", "drop", "--key", "abc", "--cache", str(cache)]) == 1
    assert "0 replies have a key starting 'abc'" in capsys.readouterr().err


def test_an_unreadable_cache_file_is_one_line(tmp_path, capsys):
    cache = tmp_path / "c.sqlite"
    cache.write_bytes(b"not sqlite at all" * 100)
    assert main(["cache", "check", "--cache", str(cache)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a usable response cache" in err


_BUILD = "import sys; from searchtome.cli import main; sys.exit(main(sys.argv[1:]))"


def _spawn(args: list[str], tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", _BUILD, *args], env=env, cwd=tmp_path)


def test_two_builds_at_once_on_one_cache_ask_each_request_once(tmp_path):
    pdfs = tmp_path / "pdfs"
    make_pdf(pdfs / "big.pdf", chapters=2, sections=3, paragraphs=2, seed=5)
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer(latency=0.3) as slow:
        runs = [
            _spawn(
                [*build_args(pdfs, slow.base_url, tmp_path / f"d{i}", cache), "--concurrency", "3"],
                tmp_path,
            )
            for i in (1, 2)
        ]
        assert [p.wait(timeout=300) for p in runs] == [0, 0]
        asked = [r.messages_hash for r in slow.chat_records()]
    n_units = len(searchtome.load(tmp_path / "d1").units())
    assert len(asked) == len(set(asked)) == n_units  # nobody paid twice
    assert _files(tmp_path / "d1") == _files(tmp_path / "d2")
    assert not list((tmp_path / "c.sqlite.claims").iterdir())  # every claim released


def test_a_killed_builds_claims_do_not_block_the_next(tmp_path):
    pdfs = tmp_path / "pdfs"
    make_pdf(pdfs / "big.pdf", chapters=2, sections=3, paragraphs=2, seed=6)
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer(latency=5) as stuck:
        args = [*build_args(pdfs, stuck.base_url, tmp_path / "d", cache), "--concurrency", "4"]
        proc = _spawn(args, tmp_path)
        deadline = time.monotonic() + 120
        while len(stuck.chat_records()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # Left behind, its owner dead: the marker of a build alone with its claims in memory.
    assert list((tmp_path / "c.sqlite.claims" / "members").glob("*.solo"))
    with FakeOpenAIServer() as healthy:
        args = build_args(pdfs, healthy.base_url, tmp_path / "d", cache)
        assert main(args) == 0
        assert len(healthy.chat_records()) == len(searchtome.load(tmp_path / "d").units())
    assert not list((tmp_path / "c.sqlite.claims").iterdir())


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
