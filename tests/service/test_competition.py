"""A competition on a real server: phases, the deadline's freeze, the Ladder, quotas, the
organiser's log, requeue and rescore (real HTTP on 127.0.0.1, real ``server run`` processes)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from searchtome.dataset.blind import load_private_queries
from searchtome.service import store
from searchtome.service.db import make_engine
from searchtome.service.home import open_home, private_queries
from searchtome.service.phases import iso
from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    cli,
    get,
    init_home,
    meta_json,
    post,
    submission,
    upload,
    wait_scored,
    wait_until,
)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("competition")
    public, private = blind_release(root)
    return root, public, private


def files(folder: Path) -> tuple[bytes, bytes]:
    return (folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes()


def send(url: str, token: str, folder: Path) -> tuple[int, dict]:
    status, raw, _ = upload(url, token, *files(folder))
    assert raw.count(b"\n") == 0, raw  # every reply one JSON line
    return status, json.loads(raw)


def phase(home: Path, name: str, start: float, end: float, *extra: str) -> None:
    done = cli(
        "server", "phase", "--home", str(home), name, "--start", iso(start), "--end", iso(end),
        *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()) + 0.2)


def test_competition_rehearsal(release) -> None:
    """Three teams; uploads before, during and after the deadline; reveal; the frozen board."""
    root, public, private = release
    home = root / "rehearsal"
    init_home(home, public, private, "--private-fraction", "0.5", "--daily-limit", "10")
    tokens = {name: add_team(home, name) for name in ("alpha", "beta", "gamma")}
    runs = {
        name: submission(root / "runs" / name, private, name, right=right)
        for name, right in (("perfect", 1.0), ("half", 0.5), ("most", 0.8), ("some", 0.6))
    }
    with Server(home) as server:
        # A phase set while the server runs applies at once: before it opens, uploads are refused.
        start = time.time() + 4
        phase(home, "main", start, start + 14, "--final", "--allow-late")
        status, body = send(server.url, tokens["alpha"], runs["perfect"])
        assert status == 403 and "'main', opens at" in body["error"]
        assert body["remaining"]["today"] == 10
        assert "Uploads are closed; <strong>main</strong> opens" in get(server.url + "/")[1]

        until(start)
        page = get(server.url + "/")[1]  # the cached board follows time
        assert "<strong>main</strong> (final phase):\nuploads are open until" in page
        accepted = {}
        for team, run in (("alpha", "perfect"), ("beta", "half"), ("gamma", "most")):
            status, body = send(server.url, tokens[team], runs[run])
            assert status == 202 and body["phase"] == "main" and not body["after_deadline"]
            assert body["remaining"]["today"] == 9
            accepted[team] = body["id"]
        status, body = send(server.url, tokens["gamma"], runs["some"])
        assert status == 202 and body["remaining"]["today"] == 8
        alpha = wait_scored(server.url, tokens["alpha"], accepted["alpha"])
        assert alpha["remaining"]["today"] == 9 and alpha["phase"] == "main"
        auth = {"Authorization": f"Bearer {tokens['alpha']}"}
        final_url = f"{server.url}/api/submissions/{accepted['alpha']}/final"
        assert post(final_url, b'{"final": true}', auth)[0] == 200

        until(start + 14)  # the deadline
        status, late = send(server.url, tokens["beta"], runs["perfect"])
        assert status == 202 and late["after_deadline"] and late["phase"] is None
        beta_final = f"{server.url}/api/submissions/{accepted['beta']}/final"
        status, raw, _ = post(
            beta_final, b'{"final": true}', {"Authorization": f"Bearer {tokens['beta']}"}
        )
        assert status == 403 and b"frozen" in raw
        late_view = wait_scored(server.url, tokens["beta"], late["id"])
        assert late_view["state"] == "scored" and "public" in late_view["scores"]
        for team in ("beta", "gamma"):
            wait_scored(server.url, tokens[team], accepted[team])

        board = get(server.url + "/api/leaderboard")[1]
        assert "private" not in board and board["frozen_at"] == iso(start + 14)
        assert {r["team"] for r in board["public"]["rows"]} == {"alpha", "beta", "gamma"}
        assert [r["system"] for r in board["after_deadline"]["rows"]] == ["perfect"]
        assert board["after_deadline"]["rows"][0]["team"] == "beta"

        done = cli("server", "reveal", "--home", str(home))
        assert done.returncode == 0, done.stderr
        ranking = done.stdout.splitlines()[1:]
        assert ranking[0].split()[:3] == ["private", "ranking", "(15"]
        ranked = [line.split()[1:3] for line in ranking[1:]]
        assert ranked == [["alpha", "perfect"], ["gamma", "most"], ["beta", "half"]]

        board = get(server.url + "/api/leaderboard")[1]
        private_rows = [(r["team"], r["system"]) for r in board["private"]["rows"]]
        assert private_rows == [("alpha", "perfect"), ("gamma", "most"), ("beta", "half")]
        late_view = get(f"{server.url}/api/submissions/{late['id']}", tokens["beta"])[1]
        assert "private" not in late_view["scores"] and "frozen" in late_view["private_note"]
        page = get(server.url + "/")[1]
        assert "After the deadline: not part of the competition" in page and "frozen" in page

    log = cli("server", "log", "--home", str(home)).stdout
    kinds = [line.split()[1] for line in log.splitlines()]
    assert kinds == ["team-added"] * 3 + ["phase-changed", "reveal"]
    assert (home / "events.log").read_text().splitlines() == log.splitlines()


def public_ids(home: Path, private: Path) -> list[str]:
    settings = open_home(home).settings
    ids = sorted(q.query_id for q in load_private_queries(private))
    secret = private_queries(ids, settings.secret, settings.private_fraction)
    return [q for q in ids if q not in secret]


def answering(folder: Path, private: Path, right: set[str], system: str) -> Path:
    """A run right on exactly the queries in ``right``."""
    queries = load_private_queries(private)
    leaves = sorted({q.leaf_id for q in queries})
    lines = []
    for q in queries:
        wrong = next(leaf for leaf in leaves if leaf != q.leaf_id)
        leaf = q.leaf_id if q.query_id in right else wrong
        lines.append(json.dumps({"query_id": q.query_id, "leaf_ids": [leaf]}))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "meta.json").write_text(json.dumps(meta_json(system)))
    return folder


def test_ladder_hides_one_query_differences_and_quotas_count_as_told(release) -> None:
    root, public, private = release
    home = root / "ladder"
    init_home(
        home, public, private, "--private-fraction", "0.5", "--public-scores", "ladder",
        "--count-refused", "--daily-limit", "10",
    )  # fmt: skip
    token = add_team(home, "prober")
    phase(home, "open", time.time() - 60, time.time() + 3600, "--limit", "5")
    ids = public_ids(home, private)
    half = set(ids[: len(ids) // 2])
    base = answering(root / "l-base", private, half, "base")
    probe = answering(root / "l-probe", private, half | {ids[-1]}, "probe")
    better = answering(root / "l-better", private, half | set(ids[-5:]), "better")
    with Server(home) as server:
        bad = root / "l-bad"
        bad.mkdir()
        (bad / "predictions.jsonl").write_text("not json\n")
        (bad / "meta.json").write_text(json.dumps(meta_json("bad")))
        status, body = send(server.url, token, bad)
        assert status == 422 and body["remaining"]["in_phase"] == 4  # --count-refused
        shown = {}
        for folder in (base, probe, better):
            status, body = send(server.url, token, folder)
            assert status == 202
            view = wait_scored(server.url, token, body["id"])
            shown[folder.name] = (body["id"], view)
        base_id, base_view = shown["l-base"]
        _, probe_view = shown["l-probe"]
        better_id, better_view = shown["l-better"]
        r1 = base_view["scores"]["public"]["aggregate"]["R@1"]
        assert probe_view["scores"]["public"]["aggregate"]["R@1"] == r1  # one query: no change
        assert (
            probe_view["ladder"]["improved"] is False and probe_view["ladder"]["shows"] == base_id
        )
        assert better_view["ladder"]["improved"] is True
        assert better_view["scores"]["public"]["aggregate"]["R@1"] > r1
        assert better_view["remaining"]["in_phase"] == 1
        rows = get(server.url + "/api/leaderboard")[1]["public"]["rows"]
        assert [r["id"] for r in rows] == [better_id]  # the team's best shown run only
        assert send(server.url, token, base)[0] == 202
        status, body = send(server.url, token, base)
        assert status == 429 and "phase 'open'" in body["error"]
        assert body["remaining"]["in_phase"] == 0


def test_failed_jobs_are_logged_requeued_and_rescored_with_history(release) -> None:
    from searchtome.service.organiser import history

    root, public, private = release
    home = root / "organiser"
    init_home(home, public, private, "--lease-seconds", "2")
    token = add_team(home, "team")
    with Server(home, workers=0) as server:
        status, body = send(server.url, token, submission(root / "o-run", private, "o-run"))
        assert status == 202
        public_id = body["id"]
        engine = make_engine(open_home(home).settings.db)
        for dead in ("w1", "w2"):  # two workers that die mid-job
            assert store.claim(engine, dead, lease_seconds=0.01) is not None
            time.sleep(0.05)
        assert cli("server", "worker", "--home", str(home), "--once").returncode == 0
        view = get(f"{server.url}/api/submissions/{public_id}", token)[1]
        assert view["state"] == "failed" and view["remaining"]["today"] == 5  # slot given back
        log = cli("server", "log", "--home", str(home), "--kind", "job-failed").stdout
        assert public_id in log and f"server requeue --home SRV {public_id}" in log

        refused = cli("server", "rescore", "--home", str(home), public_id)
        assert refused.returncode == 1 and "server requeue" in refused.stderr
        assert cli("server", "requeue", "--home", str(home), public_id).returncode == 0
        assert cli("server", "worker", "--home", str(home), "--once").returncode == 0
        first = wait_scored(server.url, token, public_id)
        assert first["state"] == "scored"

        done = cli("server", "rescore", "--home", str(home), "--all", "--reason", "gold fix")
        assert done.returncode == 0 and done.stdout.startswith("1 run(s)")
        assert get(f"{server.url}/api/submissions/{public_id}", token)[1]["state"] == "queued"
        assert cli("server", "worker", "--home", str(home), "--once").returncode == 0
        again = wait_scored(server.url, token, public_id)
        assert again["scores"] == first["scores"]
        old = history(engine, public_id)
        assert [(h["state"], h["reason"]) for h in old] == [("scored", "gold fix")]
        assert old[0]["scores"]
        engine.dispose()
    log = cli("server", "log", "--home", str(home)).stdout.splitlines()
    assert [line.split()[1] for line in log] == ["team-added", "job-failed", "requeued", "rescore"]
    assert (home / "events.log").read_text().splitlines() == log


def test_phases_are_checked_and_listed(release) -> None:
    root, public, private = release
    home = root / "phases"
    init_home(
        home, public, private, "--phase", "warm-up", "2030-01-01", "2030-01-10T00:00:00Z",
        "--final-phase", "main", "2030-01-10T00:00:00+00:00", "2030-02-01T12:00:00Z",
    )  # fmt: skip
    listed = cli("server", "phase", "--home", str(home)).stdout.splitlines()
    assert listed[0].startswith("name=warm-up start=2030-01-01T00:00:00Z end=2030-01-10T00:00:00Z")
    assert "name=main" in listed[1] and "final=True" in listed[1]

    def refused(*args: str) -> str:
        done = cli("server", "phase", "--home", str(home), *args)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done
        return done.stderr

    assert "overlaps phase 'main'" in refused(
        "extra", "--start", "2030-01-20", "--end", "2030-03-01"
    )
    assert "'main' is already final" in refused(
        "late", "--start", "2031-01-01", "--end", "2031-02-01", "--final"
    )
    assert "not an ISO 8601 time" in refused("x", "--start", "next monday", "--end", "2031-01-01")
    assert "is not after --start" in refused("x", "--start", "2031-01-02", "--end", "2031-01-01")
    assert "give both --start and --end" in refused("new-one", "--end", "2031-01-01")
    assert "--allow-late needs --final" in refused("warm-up", "--allow-late")
    changed = cli("server", "phase", "--home", str(home), "warm-up", "--scores", "hidden")
    assert changed.returncode == 0 and "public scores hidden" in changed.stdout
    add_team(home, "gone")
    assert cli("server", "revoke", "--home", str(home), "gone").returncode == 0
    log = cli("server", "log", "--home", str(home), "--tail", "2").stdout.splitlines()
    assert [line.split()[1:3] for line in log] == [
        ["team-added", "gone:"],
        ["team-revoked", "gone:"],
    ]
    phases_logged = cli("server", "log", "--home", str(home), "--kind", "phase-changed").stdout
    assert len(phases_logged.splitlines()) == 3  # two at init, one change


def test_a_shown_at_end_phase_shows_scores_when_it_ends(release) -> None:
    root, public, private = release
    home = root / "blind-phase"
    init_home(home, public, private)
    token = add_team(home, "team")
    phase(
        home, "quiet", time.time() - 60, time.time() + 3600, "--scores", "shown-at-end",
        "--daily-limit", "2",
    )  # fmt: skip
    with Server(home) as server:
        status, body = send(server.url, token, submission(root / "q-run", private, "q-run"))
        assert status == 202
        assert body["remaining"]["daily_limit"] == 2 and body["remaining"]["today"] == 1
        view = wait_scored(server.url, token, body["id"])
        assert "public" not in view["scores"] and "shown at its end" in view["public_hidden"]
        assert get(server.url + "/api/leaderboard")[1]["public"]["rows"] == []
        end = time.time() + 1
        phase(home, "quiet", time.time() - 60, end)  # applies to the running server at once
        until(end)
        view = get(f"{server.url}/api/submissions/{body['id']}", token)[1]
        assert view["scores"]["public"]["aggregate"]["R@1"] == 1.0

        def rows() -> list[str]:
            return [r["id"] for r in get(server.url + "/api/leaderboard")[1]["public"]["rows"]]

        # the phase's end moves the board's key with no write: a worker's next idle poll
        # refreshes it (the stored board is served as is until then)
        wait_until(lambda: rows() == [body["id"]], 30)


def test_ladder_and_phase_quota_on_postgres_with_two_web_processes(release) -> None:
    import os

    from tests.service.helpers import postgres
    from tests.service.test_server import race

    root, public, private = release
    try:
        manager = postgres()
        url = manager.__enter__()
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL could not start on CI: {exc}")
        pytest.skip(f"PostgreSQL could not start: {exc}")
    try:
        home = root / "pg-ladder"
        init_home(
            home, public, private, "--db", url, "--private-fraction", "0.5",
            "--public-scores", "ladder", "--daily-limit", "20",
        )  # fmt: skip
        token = add_team(home, "prober")
        phase(home, "open", time.time() - 60, time.time() + 3600, "--limit", "4")
        ids = public_ids(home, private)
        half = set(ids[: len(ids) // 2])
        base = answering(root / "pg-base", private, half, "base")
        probe = answering(root / "pg-probe", private, half | {ids[-1]}, "probe")
        with Server(home, workers=2, web=2) as server:
            views = []
            for folder in (base, probe):
                status, body = send(server.url, token, folder)
                assert status == 202
                views.append(wait_scored(server.url, token, body["id"]))
            r1 = [v["scores"]["public"]["aggregate"]["R@1"] for v in views]
            assert r1[0] == r1[1] and views[1]["ladder"]["improved"] is False
            assert send(server.url, token, base)[0] == 202  # 3 of 4 used
            assert race(server.url, token, *files(base)) == [202, 429]  # the phase's last slot
    finally:
        manager.__exit__(None, None, None)
