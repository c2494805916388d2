"""Members, the anonymous board, baselines and the CSV board, over real HTTP."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    board_rows,
    cli,
    get,
    init_home,
    post,
    submission,
    upload,
    wait_scored,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("members")
    public, private = blind_release(root)
    home = root / "srv"
    init_home(
        home, public, private, "--daily-limit", "2", "--anonymous", "--private-fraction", "0.4"
    )
    tokens = {name: add_team(home, name) for name in ("gamma-lab", "zebra-lab", "quokka-lab")}
    done = cli("server", "add-team", "--home", str(home), "--baseline", "bm25-base")
    assert done.returncode == 0, done.stderr
    tokens["bm25-base"] = done.stdout.strip()
    with Server(home) as server:
        yield server, home, private, tokens, root


def member(home, team: str, name: str) -> str:
    done = cli("server", "add-member", "--home", str(home), team, name)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("stm_") and "\n" not in token
    return token


def send(server, token: str, folder) -> tuple[int, dict]:
    preds, meta = (folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes()
    status, raw, _ = upload(server.url, token, preds, meta)
    return status, json.loads(raw)


def test_members_upload_for_their_team_share_its_quota_and_are_revoked_alone(served) -> None:
    server, home, private, tokens, root = served
    ann, bob = member(home, "gamma-lab", "ann"), member(home, "gamma-lab", "bob")
    assert cli("server", "add-member", "--home", str(home), "gamma-lab", "ann").returncode != 0
    status, first = send(server, ann, submission(root / "g1", private, "g-one"))
    assert status == 202 and first["remaining"]["today"] == 1
    status, second = send(server, bob, submission(root / "g2", private, "g-two", right=0.5))
    assert status == 202 and second["remaining"]["today"] == 0  # one quota for the team
    status, refused = send(server, tokens["gamma-lab"], submission(root / "g3", private, "g3"))
    assert status == 429, refused
    wait_scored(server.url, bob, first["id"])  # a member sees the team's runs, any member's
    own = get(server.url + "/api/submissions", ann)[1]
    assert own["team"] == "gamma-lab" and {r["id"] for r in own["runs"]} == {
        first["id"],
        second["id"],
    }
    auth = {"Authorization": f"Bearer {bob}", "Content-Type": "application/json"}
    hid = post(f"{server.url}/api/submissions/{first['id']}/hidden", b'{"hidden": true}', auth)
    assert hid[0] == 200, hid
    wait_scored(server.url, ann, second["id"])
    fin = post(f"{server.url}/api/submissions/{second['id']}/final", b'{"final": true}', auth)
    assert fin[0] == 200 and json.loads(fin[1]) == {"id": second["id"], "final": True}
    status, back, _ = get(f"{server.url}/api/submissions/{first['id']}/predictions", bob)
    g1 = (root / "g1" / "predictions.jsonl").read_text()
    assert status == 200 and back == g1  # another member's upload, back byte for byte
    listed = cli("server", "list", "--home", str(home)).stdout
    assert re.search(r"member ann\s.*active", listed) and "(baseline)" in listed

    assert cli("server", "revoke-member", "--home", str(home), "gamma-lab", "ann").returncode == 0
    assert get(server.url + "/api/submissions", ann)[0] == 401
    assert get(server.url + "/api/submissions", bob)[0] == 200
    assert get(server.url + "/api/submissions", tokens["gamma-lab"])[0] == 200
    assert re.search(r"member ann\s.*revoked", cli("server", "list", "--home", str(home)).stdout)
    assert cli("server", "revoke", "--home", str(home), "gamma-lab").returncode == 0
    assert get(server.url + "/api/submissions", bob)[0] == 401  # the team's revocation is theirs


def test_anonymous_board_baselines_and_the_csv_until_and_after_reveal(served) -> None:
    server, home, private, tokens, root = served
    ids = {}
    for team, right in (("zebra-lab", 1.0), ("quokka-lab", 0.5), ("bm25-base", 0.75)):
        folder = submission(root / team, private, f"run-{right}", right)
        status, reply = send(server, tokens[team], folder)
        assert status == 202, reply
        ids[reply["id"]] = team
    rows = board_rows(server.url, lambda rs: set(ids) <= {r["id"] for r in rs})
    mine = {r["id"]: r for r in rows if r["id"] in ids}
    by_team = {ids[k]: r for k, r in mine.items()}
    for team in ("zebra-lab", "quokka-lab"):
        assert re.fullmatch(r"team \d+", by_team[team]["team"]) and not by_team[team]["baseline"]
    assert by_team["zebra-lab"]["team"] != by_team["quokka-lab"]["team"]
    base = by_team["bm25-base"]
    assert base["baseline"] is True and base["rank"] is None and base["team"] == "bm25-base"
    ranked = [r["rank"] for r in rows if not r["baseline"]]
    assert ranked == list(range(1, len(ranked) + 1))  # the baseline takes no rank
    assert rows.index(base) == 1  # shown in place: between the perfect run and the half one
    text = get(server.url + "/api/leaderboard")[1]
    page = get(server.url + "/")[1]
    for name in ("zebra-lab", "quokka-lab"):
        assert name not in json.dumps(text) and name not in page
    assert 'href="/api/leaderboard.csv"' in page and 'class="tag baseline"' in page
    own = get(server.url + "/api/submissions", tokens["zebra-lab"])[1]
    assert own["team"] == "zebra-lab"  # a team sees its own name
    check_csv(server.url)

    assert cli("server", "reveal", "--home", str(home)).returncode == 0
    rows = board_rows(server.url, lambda rs: any(r["team"] == "zebra-lab" for r in rs))
    assert {r["team"] for r in rows if r["id"] in ids} == set(ids.values())
    assert board_rows(server.url, scope="private")
    scopes = check_csv(server.url)
    assert scopes == {"public", "private"}


def check_csv(url: str) -> set[str]:
    """The CSV holds the JSON's rows, value for value; returns its scopes."""
    status, text, headers = get(url + "/api/leaderboard.csv")
    assert status == 200 and headers["content-type"].startswith("text/csv")
    board = get(url + "/api/leaderboard")[1]
    table = list(csv.DictReader(io.StringIO(text)))
    expected = [(s, r) for s in ("public", "private") if s in board for r in board[s]["rows"]]
    assert len(table) == len(expected)
    for line, (scope, row) in zip(table, expected, strict=True):
        assert line["scope"] == scope and line["id"] == row["id"] and line["team"] == row["team"]
        assert line["rank"] == ("" if row["rank"] is None else str(row["rank"]))
        assert line["baseline"] == ("true" if row["baseline"] else "false")
        for measure, value in row["aggregate"].items():
            assert float(line[measure]) == value
        for domain, values in row["per_domain"].items():
            assert float(line[f"R@1 {domain}"]) == values["R@1"]
    return {line["scope"] for line in table}
