"""A dead worker is noticed: `server run` restarts it, `/api/health` reports the queue's age.

Real processes: the worker under `server run` is killed with SIGKILL; the health check is read
over HTTP with no worker, then with one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from searchtome.service import store
from searchtome.service.admission import Admission, Policy, team_remaining
from searchtome.service.db import make_engine, submissions
from tests.service.helpers import (
    Server,
    Worker,
    add_team,
    get,
    init_home,
    release_with_run,
    upload,
    wait_scored,
    wait_until,
)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory):
    return release_with_run(tmp_path_factory.mktemp("supervision"))


def children(pid: int) -> list[int]:
    return [
        int(c)
        for task in Path(f"/proc/{pid}/task").glob("*/children")
        for c in task.read_text().split()
    ]


def test_a_killed_worker_is_restarted_and_scores_the_queue(release) -> None:
    root, public, private, files = release
    home = root / "restart"
    init_home(home, public, private, "--daily-limit", "10")
    token = add_team(home, "t")
    with Server(home, workers=1) as server:
        wait_until(lambda: get(server.url + "/api/health")[1]["workers"]["live"] == 1, 30)
        (first,) = children(server.proc.pid)
        os.kill(first, signal.SIGKILL)
        public_id = json.loads(upload(server.url, token, *files)[1])["id"]
        assert wait_scored(server.url, token, public_id, timeout=90)["state"] == "scored"
        out = server.output()
        assert f"worker-0 (pid {first}) killed by signal 9" in out
        assert "worker-0 restarted as pid" in out
        second = int(re.search(r"worker-0 restarted as pid (\d+)", out).group(1))
        assert second in children(server.proc.pid)
        os.kill(second, signal.SIGTERM)  # asked to stop: a shutdown, not a death
        wait_until(lambda: "stopped; not restarted" in server.output(), 30, server.output)
        assert server.output().count("restarted as pid") == 1


def test_health_turns_503_when_the_queue_waits_too_long(release) -> None:
    root, public, private, files = release
    home = root / "health"
    init_home(home, public, private, "--health-max-queue-age", "1")
    token = add_team(home, "t")
    with Server(home, workers=0) as server:
        status, body, _ = get(server.url + "/api/health")
        assert status == 200 and body["ok"] and body["workers"]["live"] == 0
        public_id = json.loads(upload(server.url, token, *files)[1])["id"]
        wait_until(lambda: get(server.url + "/api/health")[0] == 503, 30)
        status, body, _ = get(server.url + "/api/health")
        assert body["ok"] is False and body["queue"]["queued"] == 1
        assert body["queue"]["oldest_queued_s"] > 1 and body["max_queue_age_s"] == 1
        assert "over the 1 s limit" in body["error"] and "0 live" in body["error"]
        with Worker(home):
            assert wait_scored(server.url, token, public_id)["state"] == "scored"
            wait_until(lambda: get(server.url + "/api/health")[1]["workers"]["live"] == 1, 30)
            status, body, _ = get(server.url + "/api/health")
            assert status == 200 and body["ok"] and body["queue"]["queued"] == 0


def test_a_job_whose_worker_died_twice_fails_with_a_log_line_and_its_quota_back(
    release, caplog: pytest.LogCaptureFixture
) -> None:
    root, public, private, _ = release
    home = root / "twice"
    init_home(home, public, private)
    token = add_team(home, "t")
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    with engine.connect() as conn:
        team = store.authenticate(conn, token)
    assert team is not None
    policy = Policy(daily_limit=5, count_refused=False)
    public_id = store.enqueue(
        engine,
        team,
        system="s",
        meta="{}",
        predictions_name="predictions.jsonl",
        predictions=b"",
        admission=Admission(team, policy),
    )
    assert team_remaining(engine, team, policy).today == 4
    for worker in ("w1", "w2"):  # both die: their leases run out
        assert store.claim(engine, worker, lease_seconds=0.01) is not None
        time.sleep(0.05)
    logger = logging.getLogger("searchtome.service.store")  # the CLI stops propagation
    logger.addHandler(caplog.handler)
    try:
        assert store.claim(engine, "w3", 60) is None
    finally:
        logger.removeHandler(caplog.handler)
    assert f"submission {public_id} failed: its worker died 2 times" in caplog.text
    with engine.connect() as conn:
        row = conn.execute(sa.select(submissions).where(submissions.c.public_id == public_id)).one()
        assert row.state == "failed" and "not counted against the quota" in row.error
    assert team_remaining(engine, team, policy).today == 5
    engine.dispose()
