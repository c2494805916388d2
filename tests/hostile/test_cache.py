"""A poisoned reply cache: listed, dropped, and never blocking a rerun."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import searchtome
from searchtome.cli import main
from searchtome.llm.cache import ResponseCache
from tests.hostile.conftest import build_args

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
