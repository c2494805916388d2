"""The service end to end on SQLite: init, teams, submit over real HTTP, the leaderboard."""

from __future__ import annotations

import json

import pytest

from searchtome.cli import main
from searchtome.dataset.blind import load_private_queries
from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    board_rows,
    cli,
    get,
    init_home,
    meta_json,
    post,
    submission,
    upload,
    wait_scored,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("served")
    public, private = blind_release(root)
    home = root / "srv"
    init_home(
        home, public, private, "--private-fraction", "0.5", "--daily-limit", "3", "--max-final", "1"
    )
    tokens = {name: add_team(home, name) for name in ("alpha", "beta")}
    with Server(home) as server:
        yield server, home, private, tokens, root


def test_submit_wait_prints_the_public_score(served, capsys) -> None:
    server, _home, private, tokens, root = served
    folder = submission(root / "perfect", private, "perfect")
    code = main(
        [
            "submit",
            str(folder),
            "--server",
            server.url,
            "--token",
            tokens["alpha"],
            "--wait",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "scored" in out and "public (15 queries): R@1 100.0" in out
    assert "remaining: 2 of 3 today (UTC)" in out
    assert "private" not in out  # not revealed yet
    # the worker logs each job's claim and finish with its time
    log = server.output()
    assert "claimed" in log and " scored in " in log and "s CPU)" in log


def test_the_leaderboard_ranks_runs_and_tests_them_against_the_top(served) -> None:
    server, _home, private, tokens, root = served
    half = submission(root / "half", private, "half", right=0.5, gz=True)
    code = main(
        [
            "submit",
            str(half / "predictions.jsonl.gz"),
            "--meta",
            str(half / "meta.json"),
            "--server",
            server.url,
            "--token",
            tokens["beta"],
            "--wait",
            "--no-progress",
        ]
    )
    assert code == 0
    board_rows(server.url, lambda rows: "half" in {r["system"] for r in rows})
    status, board, _headers = get(server.url + "/api/leaderboard")
    assert status == 200
    rows = board["public"]["rows"]
    assert [r["system"] for r in rows][:1] == ["perfect"]
    second = next(r for r in rows if r["system"] == "half")
    assert second["rank"] > 1 and second["aggregate"]["R@1"] < 1.0
    delta = second["delta_to_top"]["R@1"]
    assert delta["diff"] < 0 and delta["ci_low"] <= delta["diff"] <= delta["ci_high"]
    # rounded (the default): to the page's digits, without the count measures
    assert set(second["aggregate"]) == {"R@1", "R@3", "nDCG@3"}
    assert all(v == round(v, 3) for v in second["aggregate"].values())
    assert set(second["per_domain"]) == {"Law", "Natural Sciences"}
    assert "private" not in board and board["revealed"] is False


def test_nothing_identifies_which_queries_were_right(served) -> None:
    server, _home, private, tokens, _root = served
    query_ids = {q.query_id for q in load_private_queries(private)}
    texts = [get(server.url + "/api/leaderboard")[1], get(server.url + "/")[1]]
    _status, sub_list, _ = get(server.url + "/api/leaderboard")
    run_id = sub_list["public"]["rows"][0]["id"]
    texts.append(get(f"{server.url}/api/submissions/{run_id}", tokens["alpha"])[1])
    for text in map(json.dumps, texts):
        assert not any(q in text for q in query_ids)
        assert "per_query" not in text


def test_pages_have_a_strict_csp_and_no_cookies(served) -> None:
    server = served[0]
    for path in ("/", "/api/leaderboard", "/static/app.js", "/nope"):
        status, body, headers = get(server.url + path)
        lower = {k.lower(): v for k, v in headers.items()}
        assert "default-src 'none'" in lower["content-security-policy"]
        assert "set-cookie" not in lower
    status, body, headers = get(server.url + "/nope")
    assert status == 404 and body == {"error": "Not Found"}


def test_errors_are_one_json_line(served) -> None:
    server, _home, _private, tokens, _root = served
    cases = [
        ({}, 401),  # no token
        ({"Authorization": "Bearer st_1_" + "x" * 40}, 401),  # wrong secret
        ({"Authorization": f"Bearer {tokens['alpha']}", "Content-Type": "text/plain"}, 415),
    ]
    for headers, expected in cases:
        status, raw, _ = post(server.url + "/api/submissions", b"hello", headers)
        assert status == expected
        assert raw.count(b"\n") == 0 and set(json.loads(raw)) == {"error"}
    # Another team's submission is not found, not forbidden: its existence is not disclosed.
    run_id = get(server.url + "/api/leaderboard")[1]["public"]["rows"][0]["id"]
    status, body, _ = get(f"{server.url}/api/submissions/{run_id}", tokens["beta"])
    assert status == 404 and "error" in body
    # ... word for word as an id that was never uploaded
    made_up = "0" * len(run_id)
    status, unknown, _ = get(f"{server.url}/api/submissions/{made_up}", tokens["beta"])
    assert status == 404 and unknown["error"].replace(made_up, run_id) == body["error"]


def test_a_rejected_upload_exits_non_zero_with_the_validators_line(
    served, tmp_path, capsys
) -> None:
    server, _home, private, tokens, _root = served
    folder = submission(tmp_path / "dup", private, "dup")
    lines = (folder / "predictions.jsonl").read_text().splitlines()
    (folder / "predictions.jsonl").write_text("\n".join([lines[0], *lines]) + "\n")
    argv = ["submit", str(folder), "--server", server.url, "--token", tokens["alpha"]]
    # Accepted at once (the web process checks only the first line); the worker refuses it.
    assert main([*argv, "--no-progress"]) == 0
    assert "accepted as" in capsys.readouterr().out
    code = main([*argv, "--wait", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and ": rejected: predictions.jsonl:2: query_id: duplicate" in err[0]
    # a bad first line is refused before the 202, with the same line
    (folder / "predictions.jsonl").write_text("not json\n" + "\n".join(lines) + "\n")
    assert main([*argv, "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(422)" in err[0] and "predictions.jsonl:1: json: not valid" in err[0]


def test_final_runs_are_capped_and_private_scores_wait_for_reveal(served) -> None:
    server, home, private, tokens, root = served
    rows = get(server.url + "/api/leaderboard")[1]["public"]["rows"]
    mine = next(r["id"] for r in rows if r["team"] == "alpha")
    auth = {"Authorization": f"Bearer {tokens['alpha']}"}
    status, _, _ = post(f"{server.url}/api/submissions/{mine}/final", b'{"final": true}', auth)
    assert status == 200
    # a second final run is over the cap of 1
    folder = submission(root / "second", private, "second", right=0.8)
    status, raw, _ = upload(
        server.url,
        tokens["alpha"],
        (folder / "predictions.jsonl").read_bytes(),
        (folder / "meta.json").read_bytes(),
    )
    assert status == 202
    second = json.loads(raw)["id"]
    wait_scored(server.url, tokens["alpha"], second)
    status, raw, _ = post(f"{server.url}/api/submissions/{second}/final", b'{"final": true}', auth)
    assert status == 409 and b"already has 1 final" in raw
    assert (
        "private" not in get(f"{server.url}/api/submissions/{mine}", tokens["alpha"])[1]["scores"]
    )
    assert cli("server", "reveal", "--home", str(home)).returncode == 0
    board = get(server.url + "/api/leaderboard")[1]
    finals = {(r["team"], r["system"]) for r in board["private"]["rows"]}
    assert finals == {("alpha", "perfect"), ("beta", "half")}  # beta marked none: its best
    assert board["private"]["n_queries"] == 15
    scores = get(f"{server.url}/api/submissions/{mine}", tokens["alpha"])[1]["scores"]
    assert scores["private"]["aggregate"]["R@1"] == 1.0
    # the reveal froze the private board: final marks can no longer change it
    status, raw, _ = post(f"{server.url}/api/submissions/{mine}/final", b'{"final": false}', auth)
    assert status == 403 and b"frozen" in raw and raw.count(b"\n") == 0
    board = get(server.url + "/api/leaderboard")[1]
    assert {r["system"] for r in board["private"]["rows"] if r["team"] == "alpha"} == {"perfect"}
    assert board["frozen_at"] is not None


def test_quota_is_per_team_and_day(served) -> None:
    server, home, private, _tokens, root = served
    folder = submission(root / "quota", private, "quota")
    preds, meta = (folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes()
    first, second = add_team(home, "quota-a"), add_team(home, "quota-b")
    bad = b"not json\n"
    assert upload(server.url, first, bad, meta)[0] == 422  # a rejected upload is not counted
    assert [upload(server.url, first, preds, meta)[0] for _ in range(4)] == [202, 202, 202, 429]
    assert upload(server.url, second, preds, meta)[0] == 202  # another team's quota


def test_a_run_the_worker_rejects_gives_its_quota_back(served) -> None:
    server, home, private, _tokens, root = served
    folder = submission(root / "refund", private, "refund")
    preds, meta = (folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes()
    token = add_team(home, "refund")
    first = preds.splitlines(keepends=True)[0]
    status, raw, _ = upload(server.url, token, first + preds, meta)  # duplicate line 2
    assert status == 202
    state = wait_scored(server.url, token, json.loads(raw)["id"])
    assert state["state"] == "rejected" and "duplicate query" in state["error"]
    assert [upload(server.url, token, preds, meta)[0] for _ in range(4)] == [202, 202, 202, 429]


def race(url: str, token: str, preds: bytes, meta: bytes, n: int = 2) -> list[int]:
    """``n`` uploads released at the same instant; their HTTP statuses."""
    import threading

    barrier = threading.Barrier(n)
    statuses: list[int] = []

    def one() -> None:
        barrier.wait()
        statuses.append(upload(url, token, preds, meta)[0])

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(statuses)


def test_two_uploads_racing_at_quota_minus_one_accept_exactly_one(served) -> None:
    server, home, private, _tokens, root = served
    folder = submission(root / "race", private, "race")
    preds, meta = (folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes()
    for i in range(3):
        token = add_team(home, f"racer{i}")
        assert [upload(server.url, token, preds, meta)[0] for _ in range(2)] == [202, 202]
        assert race(server.url, token, preds, meta) == [202, 429]  # limit 3


def test_names_from_meta_are_escaped_on_the_page(served) -> None:
    server, home, private, _tokens, root = served
    token = add_team(home, "escapes")
    folder = submission(root / "escape", private, "escape")
    meta = json.loads((folder / "meta.json").read_text())
    meta["system"] = '<img src=x onerror="alert(1)">'
    status, raw, _ = upload(
        server.url, token, (folder / "predictions.jsonl").read_bytes(), json.dumps(meta).encode()
    )
    if status == 422:  # the validator refuses such a name: nothing to escape
        return
    assert status == 202
    run_id = json.loads(raw)["id"]
    state = wait_scored(server.url, token, run_id)
    if state["state"] == "rejected":  # the worker's validator refused it: nothing to escape
        return
    # uploaded after the module's reveal froze the board: in the after-the-deadline table
    board_rows(server.url, lambda rows: run_id in {r["id"] for r in rows}, "after_deadline")
    page = get(server.url + "/")[1]
    assert "<img src=x" not in page and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page


def test_a_revoked_team_cannot_upload_and_leaves_the_board(served) -> None:
    server, home, private, _tokens, root = served
    token = add_team(home, "leaving")
    folder = submission(root / "leaving", private, "leaving-run")
    status, raw, _ = upload(
        server.url,
        token,
        (folder / "predictions.jsonl").read_bytes(),
        (folder / "meta.json").read_bytes(),
    )
    assert status == 202
    wait_scored(server.url, token, json.loads(raw)["id"])

    def systems() -> set[str]:  # uploaded after the reveal: in the after-the-deadline table
        board = get(server.url + "/api/leaderboard")[1]
        return {r["system"] for r in board.get("after_deadline", {}).get("rows", [])}

    board_rows(
        server.url, lambda rows: "leaving-run" in {r["system"] for r in rows}, "after_deadline"
    )
    assert cli("server", "revoke", "--home", str(home), "leaving").returncode == 0
    assert "leaving-run" not in systems()
    assert upload(server.url, token, b"", b"{}")[0] == 401


def test_a_bare_trec_run_with_meta_is_accepted(served, tmp_path, capsys) -> None:
    server, home, private, _tokens, _root = served
    from searchtome.dataset.blind import load_private_queries
    from searchtome.records import Run
    from searchtome.submissions import write_trec

    token = add_team(home, "trec-team")
    run = Run("trec-run", {q.query_id: (q.leaf_id,) for q in load_private_queries(private)})
    path = write_trec(tmp_path / "my.run", run)
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps(meta_json("trec-run")))
    code = main(
        [
            "submit",
            str(path),
            "--meta",
            str(meta),
            "--server",
            server.url,
            "--token",
            token,
            "--wait",
            "--no-progress",
        ]
    )
    assert code == 0 and "R@1 100.0" in capsys.readouterr().out
