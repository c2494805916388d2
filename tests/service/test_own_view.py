"""The participant's own view over real HTTP: the team's runs, its uploads back, hide and show."""

from __future__ import annotations

import json

import pytest

from searchtome.cli import main
from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    board_rows,
    get,
    init_home,
    post,
    submission,
    upload,
    wait_scored,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("own")
    public, private = blind_release(root)
    home = root / "srv"
    init_home(home, public, private, "--daily-limit", "10")
    tokens = {name: add_team(home, name) for name in ("mine", "theirs")}
    with Server(home) as server:
        yield server, private, tokens, root


def send(server, token: str, folder, name: str) -> tuple[str, bytes]:
    data = (folder / name).read_bytes()
    status, raw, _ = upload(server.url, token, data, (folder / "meta.json").read_bytes(), name)
    assert status == 202, raw
    return json.loads(raw)["id"], data


def test_a_team_lists_its_runs_gets_its_uploads_back_and_hides_one(served, capsys) -> None:
    server, private, tokens, root = served
    token = tokens["mine"]
    plain, plain_bytes = send(
        server, token, submission(root / "a", private, "a"), "predictions.jsonl"
    )
    packed, packed_bytes = send(
        server,
        token,
        submission(root / "b", private, "b", right=0.5, gz=True),
        "predictions.jsonl.gz",
    )
    dup = submission(root / "c", private, "c")
    lines = (dup / "predictions.jsonl").read_bytes()
    (dup / "predictions.jsonl").write_bytes(lines.splitlines(keepends=True)[0] + lines)
    bad, _ = send(server, token, dup, "predictions.jsonl")  # rejected by the worker
    other, _ = send(
        server, tokens["theirs"], submission(root / "d", private, "d"), "predictions.jsonl"
    )
    for public_id in (plain, packed, bad, other):
        wait_scored(server.url, tokens["theirs" if public_id == other else "mine"], public_id)

    status, listed, _ = get(server.url + "/api/submissions", token)
    assert status == 200 and listed["team"] == "mine"
    runs = {r["id"]: r for r in listed["runs"]}
    assert list(runs) == [bad, packed, plain]  # its own, newest first; never another team's
    assert runs[plain]["scores"]["public"]["aggregate"]["R@1"] == 1.0
    assert runs[packed]["scores"]["public"]["aggregate"]["R@1"] < 1.0
    assert runs[bad]["state"] == "rejected" and "duplicate query" in runs[bad]["error"]
    assert "scores" not in runs[bad]
    assert {r["final"] for r in runs.values()} == {False} and {
        r["hidden"] for r in runs.values()
    } == {False}

    # the upload back, byte for byte, plain and gzip; another team's is not found
    for public_id, expected in ((plain, plain_bytes), (packed, packed_bytes)):
        status, body, headers = get_bytes(
            f"{server.url}/api/submissions/{public_id}/predictions", token
        )
        assert status == 200 and body == expected
        assert public_id in headers["content-disposition"]
    assert get_bytes(f"{server.url}/api/submissions/{other}/predictions", token)[0] == 404

    # hide: off the board; a hidden run cannot be final, a final run cannot be hidden
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    board_rows(server.url, lambda rows: plain in {r["id"] for r in rows})
    status, raw, _ = post(f"{server.url}/api/submissions/{plain}/hidden", b'{"hidden": true}', auth)
    assert status == 200 and json.loads(raw) == {"id": plain, "hidden": True}
    assert plain not in {r["id"] for r in board_rows(server.url)}
    assert get(f"{server.url}/api/submissions/{plain}", token)[1]["hidden"] is True
    status, raw, _ = post(f"{server.url}/api/submissions/{plain}/final", b'{"final": true}', auth)
    assert status == 409 and b"hidden" in raw
    assert post(f"{server.url}/api/submissions/{packed}/final", b'{"final": true}', auth)[0] == 200
    status, raw, _ = post(
        f"{server.url}/api/submissions/{packed}/hidden", b'{"hidden": true}', auth
    )
    assert status == 409 and b"final run" in raw
    assert (
        post(f"{server.url}/api/submissions/{plain}/hidden", b'{"hidden": "yes"}', auth)[0] == 400
    )
    assert post(f"{server.url}/api/submissions/{other}/hidden", b'{"hidden": true}', auth)[0] == 404

    # the command line: lists them, and shows the hidden one again
    code = main(
        ["submissions", "--server", server.url, "--token", token, "--show", plain, "--no-progress"]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0] == "team mine: 3 runs, newest first"
    lines = {line.split()[0]: line for line in out[2:]}
    assert "final" in lines[packed] and "hidden" not in lines[plain] and "100.0" in lines[plain]
    assert "rejected" in lines[bad] and "duplicate query" in lines[bad]
    assert plain in {r["id"] for r in board_rows(server.url)}


def get_bytes(url: str, token: str) -> tuple[int, bytes, dict[str, str]]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_the_list_needs_a_token(served) -> None:
    server = served[0]
    status, body, _ = get(server.url + "/api/submissions")
    assert status == 401 and list(body) == ["error"]
