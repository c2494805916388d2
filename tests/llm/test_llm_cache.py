"""The SQLite reply cache: keys, durability under kill -9, export/import."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from searchtome.errors import SearchTomeError
from searchtome.llm.cache import CacheKey, ResponseCache

MSGS = ({"role": "user", "content": "Passage: a unit of text"},)
KEY = CacheKey("gpu01:8000", "mixtral", "questions-v1@abc", {"temperature": 0.0}, MSGS)


def test_roundtrip_and_reopen(tmp_path):
    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        assert cache.get(KEY) is None
        cache.put(KEY, '{"questions": []}', "stop", "served")
        assert len(cache) == 1
    with ResponseCache(path) as cache:
        hit = cache.get(KEY)
        assert (hit.content, hit.finish_reason, hit.served_model, hit.host) == (
            '{"questions": []}',
            "stop",
            "served",
            "gpu01:8000",
        )


@pytest.mark.parametrize(
    "change",
    [
        {"model": "mistral"},
        {"prompt_version": "questions-v2@def"},
        {"sampling": {"temperature": 0.5}},
        {"messages": ({"role": "user", "content": "Passage: another unit"},)},
    ],
)
def test_every_part_of_the_key_matters(change):
    assert replace(KEY, **change).key != KEY.key


def test_replicas_share_replies_but_the_answering_host_is_recorded(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        elsewhere = replace(KEY, host="gpu02:8000")
        assert elsewhere.key == KEY.key  # the endpoint is not part of the key
        cache.put(KEY, "reply", "stop", host="gpu03:8000")
        hit = cache.get(elsewhere)
        assert (hit.content, hit.host) == ("reply", "gpu03:8000")
        assert cache.get(replace(elsewhere, model="x")) is None
        cache.put(elsewhere, "reply", "stop")  # the same request again: still one entry
        assert len(cache) == 1


def _legacy_cache(path):
    """A cache as searchtome wrote it while the host was part of the key: two hosts answered
    one request differently."""
    import sqlite3

    from searchtome.io import stable_hash

    with ResponseCache(path):
        pass
    db = sqlite3.connect(path)
    for host, reply in (("a:1", "reply from a"), ("b:1", "reply from b")):
        key = replace(KEY, host=host)
        old_key = stable_hash({"host": host, "content": key.content_key})
        row = (old_key, key.content_key, key.request_hash, host, "mixtral", KEY.prompt_version)
        db.execute(
            "INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, '{}', ?, 'stop', NULL)", (*row, reply)
        )
    db.commit()
    db.close()


def test_an_older_cache_stays_readable(tmp_path):
    path = tmp_path / "old.sqlite"
    _legacy_cache(path)
    with ResponseCache(path) as cache:
        # Building against one of the two hosts reads its reply, as before.
        assert cache.get(KEY, prefer_hosts=("b:1",)).content == "reply from b"
        assert cache.get(KEY, prefer_hosts=("z:9", "a:1")).content == "reply from a"
        with pytest.raises(SearchTomeError, match=r"different replies.*--endpoint"):
            cache.get(KEY)
        # Exported and imported elsewhere: one reply per request, the first exported kept.
        cache.export(tmp_path / "old.jsonl.gz")
        first = next(cache.rows())["content"]
    with ResponseCache(tmp_path / "new.sqlite") as fresh:
        stats = fresh.import_file(tmp_path / "old.jsonl.gz")
        assert (stats["added"], stats["conflicts"]) == (1, 1)
        assert fresh.get(KEY).content == first
        assert next(fresh.rows())["key"] == KEY.key


def test_export_is_deterministic_and_imports(tmp_path):
    src = ResponseCache(tmp_path / "a.sqlite")
    for i in range(5):
        msgs = ({"role": "user", "content": f"unit {i}"},)
        src.put(replace(KEY, messages=msgs), f"reply {i}", "stop")
    assert src.export(tmp_path / "one.jsonl.gz") == 5
    src.export(tmp_path / "two.jsonl.gz")
    assert (tmp_path / "one.jsonl.gz").read_bytes() == (tmp_path / "two.jsonl.gz").read_bytes()

    dst = ResponseCache(tmp_path / "b.sqlite")
    assert dst.import_file(tmp_path / "one.jsonl.gz") == {
        "added": 5,
        "same": 0,
        "conflicts": 0,
        "replaced": 0,
    }
    assert dst.import_file(tmp_path / "one.jsonl.gz")["same"] == 5
    msgs = ({"role": "user", "content": "unit 3"},)
    assert dst.get(replace(KEY, messages=msgs)).content == "reply 3"
    dst.export(tmp_path / "three.jsonl.gz")
    assert (tmp_path / "three.jsonl.gz").read_bytes() == (tmp_path / "one.jsonl.gz").read_bytes()


def test_import_conflicts_keep_or_replace(tmp_path):
    a = ResponseCache(tmp_path / "a.sqlite")
    a.put(KEY, "theirs", "stop")
    a.export(tmp_path / "x.gz")
    b = ResponseCache(tmp_path / "b.sqlite")
    b.put(KEY, "ours", "stop")
    assert b.import_file(tmp_path / "x.gz")["conflicts"] == 1
    assert b.get(KEY).content == "ours"
    assert b.import_file(tmp_path / "x.gz", replace=True)["replaced"] == 1
    assert b.get(KEY).content == "theirs"


def test_bad_exports_are_refused(tmp_path):
    a = ResponseCache(tmp_path / "a.sqlite")
    for i in range(3):
        a.put(replace(KEY, messages=({"role": "user", "content": str(i)},)), "r", "stop")
    a.export(tmp_path / "x.gz")
    lines = gzip.decompress((tmp_path / "x.gz").read_bytes()).splitlines(keepends=True)
    (tmp_path / "cut.gz").write_bytes(gzip.compress(b"".join(lines[:-1])))
    b = ResponseCache(tmp_path / "b.sqlite")
    with pytest.raises(SearchTomeError, match="truncated"):
        b.import_file(tmp_path / "cut.gz")
    assert len(b) == 0  # nothing half-imported
    (tmp_path / "other.gz").write_bytes(gzip.compress(b'{"format": "something-else"}\n'))
    with pytest.raises(SearchTomeError, match="not a searchtome cache export"):
        b.import_file(tmp_path / "other.gz")
    (tmp_path / "plain.txt").write_text("hello")
    with pytest.raises(SearchTomeError, match="unreadable"):
        b.import_file(tmp_path / "plain.txt")
    with pytest.raises(SearchTomeError, match="not found"):
        b.import_file(tmp_path / "missing.gz")


def test_a_corrupt_cache_file_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(SearchTomeError, match="not a usable response cache"):
        ResponseCache(path)


_WRITER = """
import sys
from searchtome.llm.cache import CacheKey, ResponseCache
cache = ResponseCache(sys.argv[1])
for i in range(100000):
    key = CacheKey("h", "m", "p", {}, ({"role": "user", "content": str(i)},))
    cache.put(key, "reply %d" % i, "stop")
    print(i, flush=True)
"""


def test_every_committed_reply_survives_kill_9(tmp_path):
    path = tmp_path / "c.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    announced = -1
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while announced < 200 and time.monotonic() < deadline:
        announced = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert announced >= 200
    with ResponseCache(path) as cache:
        for i in range(announced + 1):
            key = CacheKey("h", "m", "p", {}, ({"role": "user", "content": str(i)},))
            assert cache.get(key) is not None, f"reply {i} was committed but is lost"
