"""Hostile LLM replies and endpoint faults against `searchtome build`, over real HTTP.

Each case: the build never shows a traceback, a unit that cannot be used fails alone (or the
build stops with one line when it cannot go on), nothing answered is lost, and a rerun against
a healthy server succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import searchtome
from searchtome.cli import main
from searchtome.generate.replies import MAX_REPLY_CHARS
from searchtome.io import read_json
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault
from tests.hostile.conftest import build_args

REPO = Path(__file__).resolve().parents[2]


def _units(book_dir: Path, server: FakeOpenAIServer, tmp_path: Path) -> list:
    probe = tmp_path / "probe"
    assert main(build_args(book_dir, server.base_url, probe, tmp_path / "probe.sqlite")) == 0
    server.clear()
    return searchtome.load(probe).units()


def _marker(unit) -> str:
    return unit.text.split(".")[0]


def _no_traceback(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return out, err


DEGENERATE = {
    "brackets": "[" * 20_000,
    "braces": "{" * 20_000,
    "nested-lists-then-prose": "[" * 3000 + " sorry " + "]" * 10,
    "empty": "",
    "whitespace": " \n\t " * 50,
    "wrong-shape-number": '{"questions": 5}',
    "wrong-shape-items": '{"questions": [1, 2, {"x": 3}]}',
    "bare-null": "null",
    "prose": "I would rather not.",
    "lone-surrogate": '{"questions": ["What is \ud800 here?"]}',
    "nul-bytes": '{"questions": ["What\x00 is this?"]}' * 3,
}


@pytest.mark.parametrize("shape", sorted(DEGENERATE))
def test_a_degenerate_reply_fails_its_unit_never_the_build(
    shape, book_dir, server, tmp_path, capsys
):
    victim = _units(book_dir, server, tmp_path)[0]
    server.inject(Fault.reply(DEGENERATE[shape]), times=2, match=_marker(victim))
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "data"
    assert main(build_args(book_dir, server.base_url, out, cache)) == 0
    printed, _ = _no_traceback(capsys)
    report = read_json(out / "build-report.json")
    failed = {f["unit_id"] for f in report["failed_units"]}
    assert failed <= {victim.unit_id}  # a NUL byte or surrogate may still leave a question
    # Rerun against a healthy server: the unusable cached replies are asked again.
    server.clear()
    assert main(build_args(book_dir, server.base_url, out, cache)) == 0
    printed, _ = _no_traceback(capsys)
    assert "FAILED" not in printed
    if failed:
        assert len(server.chat_records()) == 1  # only the victim, once
    assert victim.unit_id in {
        q.unit_id for s in ("train", "dev", "test") for q in searchtome.load(out).queries(s)
    }


def test_an_8_mb_reply_is_refused_before_the_cache_and_the_repair(
    book_dir, server, tmp_path, capsys
):
    victim = _units(book_dir, server, tmp_path)[0]
    huge = json.dumps({"questions": [f"What is the meaning of item {i}?" for i in range(250_000)]})
    assert len(huge) > 8_000_000
    server.inject(Fault.reply(huge), times=2, match=_marker(victim))
    cache = tmp_path / "c.sqlite"
    assert main(build_args(book_dir, server.base_url, tmp_path / "data", cache)) == 0
    _no_traceback(capsys)
    report = read_json(tmp_path / "data" / "build-report.json")
    assert report["failed_units"][0]["reason"].startswith("reply too large (")
    with sqlite3.connect(cache) as db:
        longest = db.execute("SELECT max(length(content)) FROM responses").fetchone()[0]
    assert longest < MAX_REPLY_CHARS
    # The repair request did not carry the 8 MB back.
    assert max(len(json.dumps(r.body)) for r in server.chat_records()) < 100_000


def test_a_reply_with_thousands_of_questions_is_read_up_to_a_cap(book_dir, server, tmp_path):
    victim = _units(book_dir, server, tmp_path)[0]
    many = json.dumps({"questions": [f"Is point {i} in the text?" for i in range(1000)]})
    assert len(many) < MAX_REPLY_CHARS
    server.inject(Fault.reply(many), times=1, match=_marker(victim))
    out = tmp_path / "data"
    assert main(build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")) == 0
    removed = [
        r
        for r in read_json(out / "build-report.json")["removed_questions"]
        if r["unit_id"] == victim.unit_id
    ]
    assert 0 < len(removed) <= 50  # read 50 of 1,000, the rest never reached the filters


def test_a_truncated_reply_and_a_hostile_finish_reason(book_dir, server, tmp_path, capsys):
    units = _units(book_dir, server, tmp_path)
    server.inject(Fault.truncated(), times=2, match=_marker(units[0]))
    # A finish reason that is not a string (and a model name that is an object) is dropped.
    bad_body = json.dumps(
        {
            "model": {"evil": True},
            "choices": [
                {
                    "message": {"role": "assistant", "content": '{"questions": ["Why is it so?"]}'},
                    "finish_reason": {"nested": [1, 2]},
                }
            ],
        }
    ).encode()
    server.inject(Fault(raw_body=bad_body, name="odd-fields"), times=1, match=_marker(units[1]))
    out = tmp_path / "data"
    assert main(build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")) == 0
    _no_traceback(capsys)
    failed = {
        f["unit_id"]: f["reason"] for f in read_json(out / "build-report.json")["failed_units"]
    }
    assert failed == {
        units[
            0
        ].unit_id: "reply cut off at the token limit; after repair: reply cut off at the token limit"
    }


def test_invalid_utf8_and_broken_bodies_are_transport_failures_that_heal(
    book_dir, server, tmp_path, capsys
):
    units = _units(book_dir, server, tmp_path)
    head = b'{"choices": [{"message": {"role": "assistant", "content": "\xff\xfe bad"}}]}'
    server.inject(Fault(raw_body=head, name="bad-utf8"), times=10, match=_marker(units[0]))
    server.inject(Fault.malformed_body(), times=10, match=_marker(units[1]))
    cache = tmp_path / "c.sqlite"
    args = build_args(book_dir, server.base_url, tmp_path / "data", cache)
    assert main(args) == 3
    _, err = _no_traceback(capsys)
    assert "rerun the same command" in err
    server.clear()
    assert main(args) == 0
    assert len(server.chat_records()) == 2  # only the two, once each
    assert "FAILED" not in _no_traceback(capsys)[0]


def test_every_unit_failing_writes_nothing_and_says_so_once(book_dir, server, tmp_path, capsys):
    server.go_down(Fault.reply("[" * 5000))
    out = tmp_path / "data"
    args = build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")
    assert main(args) == 3
    _, err = _no_traceback(capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "units failed" in lines[0] and "nothing written" in lines[0]
    assert not out.exists()
    # The poisoned replies were cached; a rerun against the healed server still succeeds.
    server.come_back()
    assert main(args) == 0
    assert searchtome.load(out).queries("train")


def test_the_failure_threshold_is_an_option(book_dir, server, tmp_path, capsys):
    units = _units(book_dir, server, tmp_path)
    server.inject(Fault.reply("no"), times=2, match=_marker(units[0]))
    out = tmp_path / "data"
    args = build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")
    assert main([*args, "--max-failed-units", "0"]) == 3
    assert not out.exists()
    assert "above --max-failed-units 0" in capsys.readouterr().err
    assert main([*args, "--max-failed-units", "2"]) == 1
    assert "between 0 and 1" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_is_one_line_and_no_folder(book_dir, tmp_path, capsys):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out = tmp_path / "data"
    args = build_args(book_dir, url, out, tmp_path / "c.sqlite", "--max-attempts", "1")
    assert main(args) == 3
    _, err = _no_traceback(capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert "no request to 127.0.0.1" in lines[0] and "nothing was written" in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".data.*"))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_our_stale_temporary_folders_are_removed(book_dir, server, tmp_path):
    from searchtome.io import owner_tag

    out = tmp_path / "data"
    host = owner_tag().rpartition("-")[2]
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = tmp_path / f".data.st{_dead_pid()}-{host}.abc123.tmp"
        dead_old = tmp_path / f".data.old.st{_dead_pid()}-{host}"
        dead_scratch = tmp_path / f".data.full.st{_dead_pid()}-{host}.xyz"
        keep = {
            "live": tmp_path / f".data.st{sleeper.pid}-{host}.def456.tmp",
            "other host": tmp_path
            / f".data.st{_dead_pid()}-{'0' * 8 if host != '0' * 8 else '1' * 8}.x.tmp",
            "untagged": tmp_path / ".data.q1w2e3.tmp",
            "other name": tmp_path / f".data2.st{_dead_pid()}-{host}.x.tmp",
        }
        for folder in (dead, dead_old, dead_scratch, *keep.values()):
            folder.mkdir()
            (folder / "corpus.parquet").write_bytes(b"half")
        (tmp_path / f".data.st{_dead_pid()}-{host}.file.tmp").write_bytes(b"a file, not ours")
        assert main(build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")) == 0
        assert not dead.exists() and not dead_old.exists() and not dead_scratch.exists()
        for why, folder in keep.items():
            assert (folder / "corpus.parquet").is_file(), why
    finally:
        sleeper.kill()
        sleeper.wait()


_BUILD = "import sys; from searchtome.cli import main; sys.exit(main(sys.argv[1:]))"


def test_a_killed_blind_build_leaves_nothing_after_the_rerun(book_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "blind"
    with FakeOpenAIServer(latency=0.3) as slow:
        args = build_args(book_dir, slow.base_url, out, tmp_path / "c.sqlite", "--blind", "test")
        args += ["--concurrency", "1"]
        proc = subprocess.Popen([sys.executable, "-c", _BUILD, *args], env=env, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while not slow.chat_records() and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the build ended (rc {proc.returncode}) before it could be killed")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".blind.")]
        assert left, "the killed build had a scratch folder"
        assert subprocess.run([sys.executable, "-c", _BUILD, *args], env=env).returncode == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".blind")]
    assert load_ok(out)


def load_ok(folder: Path) -> bool:
    return bool(searchtome.load(folder).queries("train"))


def test_filters_language_fullwidth_mark_and_short_copies(book_dir, server, tmp_path):
    victim = _units(book_dir, server, tmp_path)[0]
    short_copy = " ".join(victim.text.split()[:4]).rstrip(".,") + "?"
    reply = {
        "questions": [
            "Wie funktioniert das und die Sache hier?",  # German about an English passage
            "Как это связано с текстом выше?",  # Cyrillic about a Latin-script passage
            "How do these two ideas relate to each other？",  # full-width mark: a question
            short_copy,  # a verbatim copy under six words
        ]
    }
    server.inject(Fault.reply(json.dumps(reply)), times=1, match=_marker(victim))
    out = tmp_path / "data"
    assert main(build_args(book_dir, server.base_url, out, tmp_path / "c.sqlite")) == 0
    removed = {
        r["text"]: r["reason"]
        for r in read_json(out / "build-report.json")["removed_questions"]
        if r["unit_id"] == victim.unit_id
    }
    assert removed == {
        reply["questions"][0]: "not in the passage's language",
        reply["questions"][1]: "not in the passage's language",
        short_copy: "copies the unit text",
    }
    kept = {q.text for s in ("train", "dev", "test") for q in searchtome.load(out).queries(s)}
    assert reply["questions"][2] in kept
    # The check is recorded only when turned off, so earlier manifests keep their bytes.
    assert "check_language" not in read_json(out / "manifest.json")["generation"]["filters"]
    again = tmp_path / "again"
    args = build_args(
        book_dir, server.base_url, again, tmp_path / "c.sqlite", "--no-language-check"
    )
    assert main(args) == 0
    manifest = read_json(again / "manifest.json")
    assert manifest["generation"]["filters"]["check_language"] is False
    kept = {q.text for s in ("train", "dev", "test") for q in searchtome.load(again).queries(s)}
    assert reply["questions"][0] in kept


def test_the_local_timeout_fits_its_batching(monkeypatch, capsys):
    from searchtome.generate.endpoint import local_timeout

    monkeypatch.delenv("SEARCHTOME_LOCAL_BATCH", raising=False)
    assert local_timeout(16, 0.0) == 240  # its own batch and the one running before it
    assert local_timeout(64, 0.0) == 600  # four batches queued ahead, plus the running one
    assert local_timeout(16, 0.7) == 1920  # sampled requests run one at a time
    monkeypatch.setenv("SEARCHTOME_LOCAL_BATCH", "4")
    assert local_timeout(16, None) == 600
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the packaged catalog v2" in text and "SearchTome v1" not in text
