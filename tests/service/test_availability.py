"""One team cannot stop everyone: slow bodies, team slots, revocation mid-upload, body caps.

Over real HTTP against ``server run``: slow clients are raw sockets that send the headers and
part of a body, then stall; an honest team's upload must still be accepted.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from pathlib import Path

import pytest

from searchtome.service.client import Server as Client
from searchtome.submissions.schema import TEXT_LIMITS
from tests.service.helpers import (
    Server,
    add_team,
    cli,
    free_port,
    get,
    init_home,
    meta_json,
    multipart,
    post,
    release_with_run,
    submission,
    upload,
    wait_scored,
    wait_until,
)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory):
    return release_with_run(tmp_path_factory.mktemp("availability"))


def new_home(release, name: str, *extra: str, **settings: object) -> Path:
    root, public, private, _ = release
    home = root / name
    init_home(home, public, private, "--daily-limit", "100", *extra)
    if settings:
        path = home / "server.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **settings}))
    return home


class SlowUpload:
    """An upload that sends its headers and the first bytes of its body, then stalls."""

    def __init__(self, url: str, token: str, files: tuple[bytes, bytes]) -> None:
        body, ctype = multipart({"meta": ("meta.json", files[1]), "predictions": ("p", files[0])})
        port = int(url.rsplit(":", 1)[1])
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        head = (
            f"POST /api/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}"
            f"\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body[:100])

    def answer(self, timeout: float) -> tuple[int, dict]:
        """The status and JSON body the server answered with (waits up to ``timeout``)."""
        self.sock.settimeout(timeout)
        raw = b""
        while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        return int(head.split()[1]), json.loads(body)

    def close(self) -> None:
        self.sock.close()


def one_line(status: int, raw: bytes, expected: int) -> str:
    assert status == expected, (status, raw[:300])
    assert raw.count(b"\n") == 0
    body = json.loads(raw)
    # an upload's refusal also carries the team's remaining quota
    assert set(body) <= {"error", "remaining"} and body["error"]
    return body["error"]


def test_slow_uploads_of_one_team_do_not_block_another_and_revoking_frees_them(release) -> None:
    # Slow bodies are not cut by the clock here (a long grace): only the team slots and the
    # revocation stop them.
    home = new_home(
        release, "slots", "--upload-slots", "4", "--team-uploads", "2", upload_grace=600
    )
    slow_a, honest = add_team(home, "slow-a"), add_team(home, "c")
    files = release[3]
    with Server(home, workers=0) as server:
        a = [SlowUpload(server.url, slow_a, files) for _ in range(4)]
        # two of the four are in flight; the other two are refused at once, in one JSON line
        refused = [s for s in a if _answered(s)]
        assert len(refused) == 2
        for s in refused:
            status, body = s.answer(5)
            assert status == 429 and "already has 2 uploads in flight" in body["error"]
        assert upload(server.url, honest, *files)[0] == 202
        assert cli("server", "revoke", "--home", str(home), "slow-a").returncode == 0
        cut = [s.answer(10) for s in a if s not in refused]
        assert [status for status, _ in cut] == [403, 403]
        assert all("revoked during the upload" in body["error"] for _, body in cut)
        for s in a:
            s.close()


def test_a_slow_body_holds_no_upload_slot(release) -> None:
    # Two slow bodies from two teams, as many as the slots: before a body had to arrive before
    # its upload took a slot, they held both and the honest upload waited for the clock.
    home = new_home(
        release, "bodies", "--upload-slots", "2", "--team-uploads", "1", upload_grace=600
    )
    slow = [add_team(home, f"slow-{i}") for i in range(2)]
    honest = add_team(home, "honest")
    files = release[3]
    with Server(home, workers=0) as server:
        dripping = [SlowUpload(server.url, token, files) for token in slow]
        assert not any(_answered(s) for s in dripping)  # both are being received
        status, raw, _ = upload(server.url, honest, *files)
        assert status == 202, raw
        assert not any(_answered(s) for s in dripping)  # and still are, after the 202
        for s in dripping:
            s.close()


def test_bodies_past_the_limit_wait_for_a_place_then_get_503_and_retry_after(release) -> None:
    home = new_home(
        release,
        "places",
        "--upload-slots",
        "2",
        "--team-uploads",
        "1",
        "--upload-bodies",
        "2",
        upload_grace=600,
        upload_body_wait=10,
    )
    slow = [add_team(home, f"slow-{i}") for i in range(3)]
    honest = add_team(home, "honest")
    files = release[3]
    with Server(home, workers=0) as server:
        dripping = [SlowUpload(server.url, token, files) for token in slow[:2]]
        assert not any(_answered(s) for s in dripping)  # they hold both body places
        # a third upload waits for a place, and is received once one frees
        done: list[object] = []
        waiting = threading.Thread(target=lambda: done.append(upload(server.url, honest, *files)))
        waiting.start()
        waiting.join(1)
        assert waiting.is_alive() and not done
        assert cli("server", "revoke", "--home", str(home), "slow-0").returncode == 0
        assert dripping[0].answer(10)[0] == 403  # cut, and its place is free again
        waiting.join(30)
        assert len(done) == 1 and done[0][0] == 202, done
        # both places held again: past the wait, a 503 with Retry-After, in one line
        dripping.append(SlowUpload(server.url, slow[2], files))
        assert not _answered(dripping[-1])
        status, raw, headers = upload(server.url, honest, *files)
        error = one_line(status, raw, 503)
        assert "receiving 2 uploads at once for 10 s" in error and "nothing was accepted" in error
        assert {k.lower(): v for k, v in headers.items()}["retry-after"] == "2"
        # `searchtome submit`'s client sends it again after the wait, until a place is free
        run = release[0] / "places-run"
        run.mkdir()
        (run / "predictions.jsonl").write_bytes(files[0])
        (run / "meta.json").write_bytes(files[1])
        sent: list[object] = []
        client = Client(server.url, honest)
        sending = threading.Thread(
            target=lambda: sent.append(client.upload(run / "predictions.jsonl", run / "meta.json"))
        )
        sending.start()
        sending.join(15)
        assert sending.is_alive() and not sent  # refused once at least, and trying again
        assert cli("server", "revoke", "--home", str(home), "slow-1").returncode == 0
        sending.join(40)
        assert len(sent) == 1 and sent[0].state == "queued", sent
        for s in dripping:
            s.close()


def test_the_upload_limits_are_checked_at_init(release) -> None:
    root, public, private, _ = release
    for extra, why in (
        (("--upload-slots", "4", "--team-uploads", "4"), "--team-uploads 4: must be at least 1"),
        (("--upload-slots", "4", "--upload-bodies", "3"), "--upload-bodies 3: must be at least"),
    ):
        home = root / "bad-limits"
        done = cli("server", "init", "--home", str(home), "--public", str(public),
                   "--private", str(private), *extra)  # fmt: skip
        assert done.returncode != 0 and why in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and not home.exists()


def _answered(s: SlowUpload) -> bool:
    s.sock.settimeout(2)
    try:
        return bool(s.sock.recv(1, socket.MSG_PEEK))
    except TimeoutError:
        return False


def test_a_stalled_upload_is_cut_by_the_minimum_rate(release) -> None:
    home = new_home(release, "stall", "--upload-min-rate", "1", upload_grace=1.0)
    token = add_team(home, "t")
    with Server(home, workers=0) as server:
        slow = SlowUpload(server.url, token, release[3])
        status, body = slow.answer(15)
        slow.close()
        assert status == 408
        assert "below the minimum of 1 KiB/s" in body["error"] and "send it again" in body["error"]
        home_settings = json.loads((home / "server.json").read_text())
        assert home_settings["upload_min_rate"] == 1024  # recorded at init
        assert upload(server.url, token, *release[3])[0] == 202  # the server still serves


def streamed(port: int, path: str, token: str, size: int, tries: int = 3) -> bytes:
    """POST ``size`` bytes in chunks without a Content-Length, as a client that streams does,
    stopping once the server has answered; the reply's first bytes. The server closes a
    connection whose body it cut, so a chunk already in flight can reset it before the reply is
    read: that try is made again (a TCP race, not the server's answer)."""
    for _ in range(tries):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                "Transfer-Encoding: chunked\r\n\r\n".encode()
            )
            piece, sent, reply = b"x" * 16384, 0, b""
            try:
                while sent < size and not select.select([sock], [], [], 0)[0]:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent += len(piece)
                while b"limit" not in reply and (chunk := sock.recv(4096)):
                    reply += chunk
            except (BrokenPipeError, ConnectionResetError):
                continue
            return reply
    raise AssertionError(f"{path}: every try was reset before the reply came")


def test_every_body_is_capped_and_final_takes_only_a_boolean(release) -> None:
    home = new_home(release, "caps")
    token = add_team(home, "t")
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with Server(home, workers=1) as server:
        public_id = json.loads(upload(server.url, token, *release[3])[1])["id"]
        assert wait_scored(server.url, token, public_id)["state"] == "scored"
        final = f"{server.url}/api/submissions/{public_id}/final"
        # a declared 512 MiB body is refused before a byte of it is read
        port = server.port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"POST /api/submissions/{public_id}/final HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {token}\r\nContent-Length: {512 << 20}\r\n\r\n".encode()
            )
            head = b""
            while b"limit" not in head:  # the head and the body may come in two packets
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
        assert head.startswith(b"HTTP/1.1 413") and b"65,536-byte limit" in head
        # one without a length is cut while it streams
        head = streamed(port, f"/api/submissions/{public_id}/final", token, 1 << 20)
        assert head.startswith(b"HTTP/1.1 413") and b"exceeds the 65,536-byte limit" in head
        for body in (b"", b'"no"', b"no", b'{"final": "no"}', b'{"final": 1}', b"[true]"):
            status, raw, _ = post(final, body, auth)
            assert "{" in one_line(status, raw, 400), body
        status, raw, _ = post(final, b'{"final": true}', auth)
        assert (status, json.loads(raw)) == (200, {"id": public_id, "final": True})
        assert get(server.url + "/api/health")[0] == 200


def test_names_and_descriptions_have_one_limit_and_invisible_characters_are_escaped(
    release,
) -> None:
    home = new_home(release, "names")
    token = add_team(home, "t")
    preds = release[3][0]
    with Server(home, workers=1) as server:
        for field, cap in TEXT_LIMITS.items():
            meta = {**meta_json("sys"), field: "x" * (cap + 1)}
            status, raw, _ = upload(server.url, token, preds, json.dumps(meta).encode())
            message = one_line(status, raw, 422)
            assert f"{field}: {cap + 1:,} characters; at most {cap:,}" in message
        meta = {**meta_json("evil\u202egnp.exe"), "description": "bell\x07 and \u2066isolate"}
        status, raw, _ = upload(server.url, token, preds, json.dumps(meta).encode())
        assert status == 202
        assert wait_scored(server.url, token, json.loads(raw)["id"])["state"] == "scored"
        row = get(server.url + "/api/leaderboard")[1]["public"]["rows"][0]
        assert row["system"] == "evil\\u202egnp.exe"
        assert row["meta"]["description"] == "bell\\u0007 and \\u2066isolate"
        page = get(server.url + "/")[1]
        assert "evil\\u202egnp.exe" in page and "\u202e" not in page and "\x07" not in page
        assert "bell\\u0007 and \\u2066isolate" in page  # the description is on the page


def test_one_row_per_team(release) -> None:
    root, _, private, _ = release
    home = new_home(release, "onerow", "--one-row-per-team")
    token = add_team(home, "t")
    with Server(home, workers=1) as server:
        for name, right in (("half", 0.5), ("all", 1.0), ("none", 0.0)):
            folder = submission(root / f"one-{name}", private, name, right=right)
            files = (
                (folder / "predictions.jsonl").read_bytes(),
                (folder / "meta.json").read_bytes(),
            )
            public_id = json.loads(upload(server.url, token, *files)[1])["id"]
            assert wait_scored(server.url, token, public_id)["state"] == "scored"
        board = get(server.url + "/api/leaderboard")[1]
    assert board["one_row_per_team"] is True
    assert [r["system"] for r in board["public"]["rows"]] == ["all"]


def test_a_revoked_name_gets_no_new_token_and_is_told_what_to_do(release) -> None:
    home = new_home(release, "names-reuse")
    add_team(home, "gone")
    assert cli("server", "revoke", "--home", str(home), "gone").returncode == 0
    done = cli("server", "add-team", "--home", str(home), "gone")
    assert done.returncode != 0 and not done.stdout
    assert "was revoked and its name is not reused" in done.stderr and "gone-2" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_busy_port_is_one_line(release) -> None:
    home = new_home(release, "busy")
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        done = cli("server", "run", "--home", str(home), "--port", str(port), "--workers", "0")
    assert done.returncode != 0
    assert done.stderr.startswith("searchtome: error: --host 127.0.0.1 --port")
    assert "choose another --port" in done.stderr and done.stderr.count("\n") == 1


def test_the_server_logs_uploads_refusals_and_scores(release) -> None:
    home = new_home(release, "log")
    token = add_team(home, "t")
    with Server(home, workers=1) as server:
        public_id = json.loads(upload(server.url, token, *release[3])[1])["id"]
        wait_scored(server.url, token, public_id)
        assert upload(server.url, "st_1_" + "x" * 40, *release[3])[0] == 401
        wait_until(lambda: "refused POST" in server.output(), 10, server.output)
        out = server.output()
    assert f"upload {public_id} accepted from team t" in out
    assert f"{public_id} scored" in out
    assert "refused POST /api/submissions from 127.0.0.1 (401)" in out


def test_the_same_name_limit_and_health_on_postgresql(release) -> None:
    from tests.service.helpers import postgres

    root, public, private, files = release
    try:
        manager = postgres()
        url = manager.__enter__()
    except RuntimeError as exc:
        pytest.skip(f"PostgreSQL could not start: {exc}")
    try:
        home = root / "pg"
        init_home(home, public, private, "--db", url)
        token = add_team(home, "t")
        cap = TEXT_LIMITS["system"]
        with Server(home, workers=1) as server:
            too_long = json.dumps({**meta_json("s"), "system": "x" * (cap + 1)}).encode()
            status, raw, _ = upload(server.url, token, files[0], too_long)
            assert f"{cap + 1:,} characters; at most {cap:,}" in one_line(status, raw, 422)
            longest = json.dumps(meta_json("y" * cap)).encode()
            status, raw, _ = upload(server.url, token, files[0], longest)
            assert status == 202
            assert wait_scored(server.url, token, json.loads(raw)["id"])["state"] == "scored"
            wait_until(lambda: get(server.url + "/api/health")[1]["workers"]["live"] == 1, 30)
    finally:
        manager.__exit__(None, None, None)
