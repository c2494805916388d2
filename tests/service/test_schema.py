"""The schema's migrations: a fresh database equals the live tables, and a version-1 server home
upgrades in place with every upload kept (SQLite, and PostgreSQL where it can start)."""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from searchtome.dataset.blind import with_private
from searchtome.dataset.loader import load
from searchtome.service import store, tables  # noqa: F401  (tables: the live competition tables)
from searchtome.service.checks import pack_scores, validate
from searchtome.service.db import MIGRATIONS, make_engine, metadata, migrate, sqlite_url
from searchtome.service.home import open_home
from searchtome.submissions import Limits
from tests.service.helpers import (
    Server,
    blind_release,
    board_rows,
    cli,
    init_home,
    postgres,
    submission,
    wait_scored,
)


def schema(engine: sa.Engine) -> dict[str, Any]:
    """Tables, columns (type, nullability), indexes and unique constraints, as reflected."""
    inspector = sa.inspect(engine)
    out: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        out[table] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)
            ],
            "primary": inspector.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted(
                (tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table)
            ),
            "unique": sorted(
                tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)
            ),
            "foreign": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"])
                for f in inspector.get_foreign_keys(table)
            ),
        }
    return out


def test_a_fresh_sqlite_migration_is_the_live_schema(tmp_path: Path) -> None:
    migrated, live = (
        make_engine(sqlite_url(tmp_path / "a.db")),
        make_engine(sqlite_url(tmp_path / "b.db")),
    )
    migrate(migrated)
    metadata.create_all(live)
    assert schema(migrated) == schema(live)
    assert "predictions" not in {c[0] for c in schema(migrated)["submissions"]["columns"]}


@pytest.fixture(scope="module")
def pg_url():
    try:
        manager = postgres()
        url = manager.__enter__()
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL could not start on CI: {exc}")
        pytest.skip(f"PostgreSQL could not start: {exc}")
    try:
        yield url
    finally:
        manager.__exit__(None, None, None)


def test_a_fresh_postgres_migration_is_the_live_schema(pg_url: str) -> None:
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for name in ("fresh_migrated", "fresh_live"):
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    base = pg_url.rsplit("/", 1)[0]
    migrated, live = make_engine(f"{base}/fresh_migrated"), make_engine(f"{base}/fresh_live")
    migrate(migrated)
    metadata.create_all(live)
    assert schema(migrated) == schema(live)
    migrated.dispose()
    live.dispose()


# -- upgrading a version-1 home ------------------------------------------------------------------


def make_v1(engine: sa.Engine) -> None:
    """Turn a fresh database into an empty one at schema version 1 (the released first)."""
    metadata.drop_all(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        MIGRATIONS[0](conn)
        conn.exec_driver_sql("INSERT INTO schema_version (version) VALUES (1)")


def insert_v1(conn: sa.Connection, team_id: int, public_id: str, state: str, **row: Any) -> None:
    values = {
        "public_id": public_id,
        "team_id": team_id,
        "system": public_id,
        "state": state,
        "created_at": time.time(),
        "day": store.utc_day(),
        "attempts": 0,
        "times_scored": 0,
        "final": False,
        **row,
    }
    names = ", ".join(values)
    marks = ", ".join(f":{k}" for k in values)
    conn.execute(sa.text(f"INSERT INTO submissions ({names}) VALUES ({marks})"), values)


def upgrade_keeps_every_upload(root: Path, extra: tuple[str, ...]) -> None:
    public, private = blind_release(root)
    home = root / "srv"
    init_home(home, public, private, *extra)
    settings = open_home(home).settings
    engine = make_engine(settings.db)
    make_v1(engine)
    token = cli("server", "add-team", "--home", str(home), "old-team")
    assert token.returncode == 1 and "schema version 1" in token.stderr  # refused until migrated
    full = with_private(load(public), private)
    plain = submission(root / "plain", private, "plain")
    packed = submission(root / "packed", private, "packed", right=0.5, gz=True)
    uploads = {
        "queued-plain": ("predictions.jsonl", (plain / "predictions.jsonl").read_bytes()),
        "queued-gz": ("predictions.jsonl.gz", (packed / "predictions.jsonl.gz").read_bytes()),
        "scored-plain": ("predictions.jsonl", (plain / "predictions.jsonl").read_bytes()),
    }
    meta = (plain / "meta.json").read_text()
    secret = "st_1_" + "a" * 32
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO teams (name, token_hash, created_at) VALUES ('old', :h, :t)"),
            {"h": store.hash_token("a" * 32), "t": time.time()},
        )
        for public_id, (name, data) in uploads.items():
            scored: dict[str, Any] = {}
            if public_id.startswith("scored"):
                report, error = validate(meta.encode(), name, data, full, "test", Limits())
                assert error is None, error
                scored = {"scores": pack_scores(report, full, "test"), "scored_at": time.time()}
                scored["counts"] = json.dumps(report.counts.to_dict())
            state = "scored" if scored else "queued"
            insert_v1(conn, 1, public_id, state, meta=meta, predictions_name=name,
                      predictions=data, **scored)  # fmt: skip
    done = cli("server", "migrate", "--home", str(home))
    last = len(MIGRATIONS)
    assert done.returncode == 0 and f"from version 1 to {last}" in done.stdout, done.stderr
    assert f"already at version {last}" in cli("server", "migrate", "--home", str(home)).stdout
    with engine.connect() as conn:
        for public_id, expected in uploads.items():
            assert store.upload_of(conn, public_id) == expected
    engine.dispose()
    with Server(home) as server:
        for public_id in ("queued-plain", "queued-gz"):
            assert wait_scored(server.url, secret, public_id)["state"] == "scored"
        rows = board_rows(server.url, lambda rows: len(rows) == len(uploads))
        assert {r["id"] for r in rows} == set(uploads)
        scores = {r["id"]: r["aggregate"]["R@1"] for r in rows}
        assert scores["scored-plain"] == scores["queued-plain"] == 1.0
        assert scores["queued-gz"] < 1.0


def test_a_version_1_sqlite_home_upgrades_in_place_with_every_upload_kept(tmp_path: Path) -> None:
    upgrade_keeps_every_upload(tmp_path, ())


def test_a_version_1_postgres_home_upgrades_in_place_with_every_upload_kept(
    tmp_path: Path, pg_url: str
) -> None:
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql("CREATE DATABASE upgrade_v1")
    admin.dispose()
    upgrade_keeps_every_upload(tmp_path, ("--db", pg_url.rsplit("/", 1)[0] + "/upgrade_v1"))


def test_uploads_are_stored_compressed_unless_already_gzip() -> None:
    from searchtome.service.blobs import Codec, pack, unpack

    text = b'{"query_id": "q", "leaf_ids": ["a/1"]}\n' * 1000
    for raw in (text, gzip.compress(text)):
        row = pack(raw)
        assert unpack(row["codec"], row["data"], row["size"]) == raw and row["size"] == len(raw)
    assert pack(text)["codec"] == Codec.ZSTD and len(pack(text)["data"]) < len(text) / 10
    assert pack(gzip.compress(text))["codec"] == Codec.STORED
    # a standard Zstandard frame (magic 28 b5 2f fd), and rows stored as zlib still read
    assert pack(text)["data"][:4] == bytes.fromhex("28b52ffd")
    assert unpack(Codec.ZLIB, zlib.compress(text, 1), len(text)) == text
