"""Faults on SQLite: a worker killed mid-job, a restart with a queue, a locked and a full file.

The queue's promise: an accepted submission (HTTP 202) is scored exactly once whatever crashes;
an upload the database could not store is answered with a clear error and not counted.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from searchtome.service import store
from searchtome.service.admission import Admission, Policy
from searchtome.service.db import make_engine, submissions
from searchtome.service.tables import entries
from searchtome.service.worker import PAUSE_ENV
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
    return release_with_run(tmp_path_factory.mktemp("faults"))


def new_home(release, name: str, *extra: str) -> tuple[Path, str]:
    root, public, private, _ = release
    home = root / name
    init_home(home, public, private, "--lease-seconds", "2", "--daily-limit", "50", *extra)
    return home, add_team(home, "team")


def row(home: Path, public_id: str) -> dict:
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(submissions).where(submissions.c.public_id == public_id)
        ).first()
    engine.dispose()
    assert found is not None
    return dict(found._mapping)


def test_a_worker_killed_mid_job_is_retried_and_scores_once(release) -> None:
    home, token = new_home(release, "kill")
    preds, meta = release[3]
    with Server(home, workers=0) as server:
        status, raw, _ = upload(server.url, token, preds, meta)
        assert status == 202
        public_id = json.loads(raw)["id"]
        with Worker(home, env={PAUSE_ENV: "60"}) as doomed:
            wait_until(lambda: row(home, public_id)["state"] == "scoring", 60)
            doomed.kill9()
        assert row(home, public_id)["state"] == "scoring"  # nobody finished it
        with Worker(home):
            state = wait_scored(server.url, token, public_id)
        assert state["state"] == "scored"
        assert state["scores"]["public"]["aggregate"]["R@1"] == 1.0
    done = row(home, public_id)
    assert (done["attempts"], done["times_scored"]) == (2, 1)


def test_a_stale_worker_cannot_write_after_losing_its_lease(release) -> None:
    home, token = new_home(release, "stale")
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    with engine.connect() as conn:
        team = store.authenticate(conn, token)
    assert team is not None
    store.enqueue(
        engine,
        team,
        system="s",
        meta="{}",
        predictions_name="predictions.jsonl",
        predictions=b"",
        admission=Admission(team, Policy(daily_limit=5, count_refused=False)),
    )
    first = store.claim(engine, "w1", lease_seconds=0.01)
    assert first is not None
    time.sleep(0.05)
    second = store.claim(engine, "w2", lease_seconds=60)  # w1's lease ran out: requeued
    assert second is not None and second.id == first.id and second.attempt == 2
    assert not store.heartbeat(engine, first, "w1", 60)
    assert not store.finish(engine, first, "w1", scores=b"stale")
    assert store.finish(engine, second, "w2", scores=b"fresh")
    assert store.claim(engine, "w3", 60) is None
    with engine.connect() as conn:
        r = conn.execute(sa.select(submissions)).first()
    assert (r.state, r.scores, r.times_scored) == ("scored", b"fresh", 1)
    # and a job that crashed twice is failed, not retried forever
    store.enqueue(
        engine,
        team,
        system="s",
        meta="{}",
        predictions_name="predictions.jsonl",
        predictions=b"",
        admission=Admission(team, Policy(daily_limit=5, count_refused=False)),
    )
    for worker in ("w4", "w5"):
        assert store.claim(engine, worker, lease_seconds=0.01) is not None
        time.sleep(0.05)
    assert store.claim(engine, "w6", 60) is None
    with engine.connect() as conn:
        states = conn.execute(sa.select(submissions.c.state).order_by(submissions.c.id)).scalars()
        assert list(states) == ["scored", "failed"]
    engine.dispose()


def test_a_restart_with_a_queue_scores_everything(release) -> None:
    home, token = new_home(release, "restart")
    preds, meta = release[3]
    with Server(home, workers=0) as server:
        ids = [json.loads(upload(server.url, token, preds, meta)[1])["id"] for _ in range(3)]
    assert {row(home, i)["state"] for i in ids} == {"queued"}
    with Server(home, workers=1) as server:
        states = [wait_scored(server.url, token, i)["state"] for i in ids]
    assert states == ["scored"] * 3
    assert all(row(home, i)["times_scored"] == 1 for i in ids)


def _set(home: Path, **values: object) -> None:
    path = home / "server.json"
    settings = json.loads(path.read_text())
    settings.update(values)
    path.write_text(json.dumps(settings))


def test_a_locked_database_is_a_clear_error_and_loses_nothing(release) -> None:
    home, token = new_home(release, "locked")
    _set(home, busy_timeout_ms=300)
    preds, meta = release[3]
    with Server(home, workers=0) as server:
        assert upload(server.url, token, preds, meta)[0] == 202
        holder = sqlite3.connect(home / "server.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            status, raw, _ = upload(server.url, token, preds, meta)
            assert status == 503
            message = json.loads(raw)["error"]
            assert "busy" in message and "not accepted" in message and "\n" not in message
            assert get(server.url + "/api/leaderboard")[0] == 200  # readers are not blocked
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert upload(server.url, token, preds, meta)[0] == 202
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(submissions)).scalar() == 2
        held = conn.execute(sa.select(sa.func.count()).select_from(entries)).scalar()
    assert held == 2  # the refused upload was not counted (quota use is counted from entries)
    engine.dispose()


def test_a_full_database_is_a_clear_error_and_loses_nothing(release) -> None:
    home, token = new_home(release, "full")
    preds, meta = release[3]
    with Server(home, workers=0) as server:
        first = json.loads(upload(server.url, token, preds, meta)[1])["id"]
    pages = sqlite3.connect(home / "server.db").execute("PRAGMA page_count").fetchone()[0]
    # Stored compressed, the small run would fit in the file's free pages many times: this one
    # carries 64 KB of random hex after its first line (accepted, for the worker to refuse).
    big = preds + b"\n".join(
        os.urandom(32_000).hex().encode()[i : i + 80] for i in range(0, 64_000, 80)
    )
    with Server(home, workers=0, env={"SEARCHTOME_SERVER_SQLITE_MAX_PAGES": str(pages)}) as server:
        refused = []
        for _ in range(5):  # the file may hold a page or two of free space
            status, raw, _ = upload(server.url, token, big, meta)
            if status != 202:
                refused.append((status, json.loads(raw)["error"]))
                break
        assert refused, "the capped database never filled up"
        status, message = refused[0]
        assert status == 507 and "full" in message and "not accepted" in message
        assert get(server.url + "/api/health")[0] == 200
    # the upload accepted before the disk filled is intact: a worker (here in-process) scores it
    from searchtome.service.home import open_home
    from searchtome.service.worker import Worker as InProcessWorker

    InProcessWorker(open_home(home)).serve(once=True)
    assert (row(home, first)["state"], row(home, first)["times_scored"]) == ("scored", 1)


def test_workers_stop_when_server_run_is_killed(release) -> None:
    import os
    import signal

    home, _token = new_home(release, "orphans")
    with Server(home, workers=2) as server:
        children = [
            int(c)
            for task in Path(f"/proc/{server.proc.pid}/task").glob("*/children")
            for c in task.read_text().split()
        ]
        assert len(children) == 2
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        wait_until(
            lambda: (
                not any(
                    Path(f"/proc/{c}").exists()
                    and "zombie" not in Path(f"/proc/{c}/status").read_text()
                    for c in children
                )
            ),
            30,
        )
