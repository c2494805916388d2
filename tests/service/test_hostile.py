"""Hostile uploads over HTTP: each refused with a 4xx and one JSON line, the server still serving.

The caps are lowered for the test (a 4 MiB upload, 8 MiB decompressed) so the bombs stay small
on disk; the reader stops at the cap whatever the true size, so a 2 GB line is refused like this
one, and the web process's peak memory stays far below the sizes it was sent.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import zlib
from pathlib import Path

import pytest

from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    cli,
    get,
    init_home,
    post,
    submission,
    upload,
)


def gzip_line(total_bytes: int) -> bytes:
    """A gzip stream whose content is one line of ``total_bytes`` (``{"query_id": "aaaa...``).

    Built from one fully flushed deflate block repeated, so 2 GB of content costs ~2 MB of bytes
    and no time; the trailer is never reached because the reader stops at its line cap.
    """
    block = b"a" * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(b'{"query_id": "' + block) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(block) + c.flush(zlib.Z_FULL_FLUSH) == again
    return head + again * (total_bytes // len(block) - 1)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile")
    public, private = blind_release(root)
    home = root / "srv"
    init_home(home, public, private, "--upload-max-mb", "4", "--daily-limit", "1000")
    settings = json.loads((home / "server.json").read_text())
    settings["max_decompressed_bytes"] = 8 << 20
    (home / "server.json").write_text(json.dumps(settings))
    token = add_team(home, "mallory")
    folder = submission(root / "good", private, "good")
    good = ((folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes())
    with Server(home, workers=0) as server:
        yield server, token, good


def one_line_error(status: int, raw: bytes) -> str:
    assert 400 <= status < 500, (status, raw[:300])
    assert raw.count(b"\n") == 0
    body = json.loads(raw)
    assert set(body) <= {"error", "remaining"} and body["error"]  # remaining: the quota left
    return body["error"]


def cases(good: tuple[bytes, bytes]) -> dict[str, tuple[bytes, bytes, str]]:
    preds, meta = good
    first = preds.splitlines()[0]
    deep = b'{"query_id": "x", "leaf_ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    meta_obj = json.loads(meta)
    return {
        "not json": (b"this is not json\n" + preds, meta, "predictions.jsonl"),
        "duplicate query": (first + b"\n" + preds, meta, "predictions.jsonl"),
        "unknown query": (
            preds + b'{"query_id": "q-nope", "leaf_ids": []}\n',
            meta,
            "predictions.jsonl",
        ),
        "missing queries": (first + b"\n", meta, "predictions.jsonl"),
        "deeply nested": (deep, meta, "predictions.jsonl"),
        "huge integer": (
            b'{"query_id": "x", "leaf_ids": [], "scores": [1' + b"0" * 400 + b"]}\n" + preds,
            meta,
            "predictions.jsonl",
        ),
        "not utf-8": (b"\xff\xfe\x00bad\n" + preds, meta, "predictions.jsonl"),
        "empty": (b"", meta, "predictions.jsonl"),
        "gzip bomb": (gzip.compress(b"\0" * (40 << 20), 9), meta, "predictions.jsonl.gz"),
        "2 GB line": (gzip_line(2 << 30), meta, "predictions.jsonl.gz"),
        "meta not json": (preds, b"{nope", "predictions.jsonl"),
        "meta field missing": (
            preds,
            json.dumps({k: v for k, v in meta_obj.items() if k != "license"}).encode(),
            "predictions.jsonl",
        ),
        "meta nested": (preds, b"[" * 50_000 + b"]" * 50_000, "predictions.jsonl"),
    }


# Refused before the 202 by the web process's cheap pass (meta.json, the first line, the caps);
# the rest are accepted and refused by the scoring worker, which reads the whole file.
REFUSED_AT_ONCE = {
    "not json",
    "deeply nested",
    "huge integer",
    "not utf-8",
    "empty",
    "gzip bomb",
    "2 GB line",
    "meta not json",
    "meta field missing",
    "meta nested",
}


def test_each_hostile_upload_is_one_line_4xx_or_rejected_in_one_line(hostile) -> None:
    server, token, good = hostile
    assert len(cases(good)["2 GB line"][0]) < 4 << 20
    queued = {}
    for name, (preds, meta, filename) in cases(good).items():
        status, raw, _ = upload(server.url, token, preds, meta, filename)
        assert status < 500, (name, server.output()[-3000:])
        if name in REFUSED_AT_ONCE:
            message = one_line_error(status, raw)
            assert status in (413, 422), (name, status, message)
        else:
            assert status == 202, (name, raw)
            queued[name] = json.loads(raw)["id"]
        assert get(server.url + "/api/health")[0] == 200, name
    assert set(queued) == {"duplicate query", "unknown query", "missing queries"}
    assert cli("server", "worker", "--home", str(server.home), "--once").returncode == 0
    expected = {
        "duplicate query": "predictions.jsonl:2: query_id: duplicate query",
        "unknown query": "unknown query 'q-nope'",
        "missing queries": "queries have no line",
    }
    for name, public_id in queued.items():
        body = get(f"{server.url}/api/submissions/{public_id}", token)[1]
        assert body["state"] == "rejected", (name, body)
        assert "\n" not in body["error"] and expected[name] in body["error"], (name, body)
    assert upload(server.url, token, *good)[0] == 202  # still accepting good ones


def test_oversized_bodies_are_cut_off_while_streaming(hostile) -> None:
    server, token, _good = hostile
    # announced too large: refused before a byte of the body is read
    status, raw, _ = post(
        server.url + "/api/submissions",
        b"x" * 10,
        {
            "Authorization": f"Bearer {token}",
            "Content-Length": str(5 << 30),
            "Content-Type": "multipart/form-data; boundary=b",
        },
    )
    assert status == 413 and "exceeds" in one_line_error(status, raw)
    # no length, chunked: refused once the count passes the cap
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def body():
        yield b'--b\r\nContent-Disposition: form-data; name="predictions"; filename="p.jsonl"\r\n\r\n'
        for _ in range(64):  # 64 MiB, 16 times the cap
            yield b"y" * (1 << 20)

    # the server may answer and close before we finish sending
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.request(
            "POST",
            "/api/submissions",
            body=body(),
            encode_chunked=True,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "multipart/form-data; boundary=b",
            },
        )
    response = conn.getresponse()
    raw = response.read()
    assert response.status == 413 and "exceeds" in one_line_error(response.status, raw)
    conn.close()
    assert get(server.url + "/api/health")[0] == 200


def test_other_malformed_requests(hostile) -> None:
    server, token, _good = hostile
    auth = {"Authorization": f"Bearer {token}"}
    multipart = {**auth, "Content-Type": "multipart/form-data; boundary=b"}
    for headers, body in (
        (multipart, b"--b\r\nnot a part\r\n"),
        (multipart, b"--b--\r\n"),  # no fields
        ({**auth, "Content-Type": "multipart/form-data"}, b"x"),  # no boundary
        ({**auth, "Content-Type": "application/json"}, b"{}"),
    ):
        status, raw, _ = post(server.url + "/api/submissions", body, headers)
        one_line_error(status, raw)
    for token_header in (
        "Bearer",
        "Basic abc",
        "Bearer st_1_" + "a" * 5000,
        "Bearer st_1_" + "!" * 30,
    ):
        status, raw, _ = post(server.url + "/api/submissions", b"", {"Authorization": token_header})
        assert status == 401, token_header
        one_line_error(status, raw)


def test_memory_stays_bounded(hostile) -> None:
    server = hostile[0]
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    peak_kib = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
    )
    # Sent: a 2 GB line, a 40 MB bomb, 64 MiB streamed; the web process never held them.
    print(f"web process peak RSS after the hostile uploads: {peak_kib / 1024:.0f} MiB")
    assert peak_kib < 700 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"


def test_rate_limit_counts_per_address_in_a_sliding_minute() -> None:
    from searchtome.service.app import RateLimit

    limit = RateLimit(per_minute=3)
    assert [limit.allow("a") for _ in range(4)] == [True, True, True, False]
    assert limit.allow("b")  # another address has its own budget


# Last in the module: it spends the fixture server's per-minute budget for this address.
def test_too_many_requests_get_429_in_one_line(hostile) -> None:
    server = hostile[0]
    statuses = [get(server.url + "/api/health") for _ in range(130)]
    limited = [s for s in statuses if s[0] == 429]
    assert limited and statuses[0][0] == 200
    assert limited[0][1] == {"error": "too many requests from this address; wait a minute"}
