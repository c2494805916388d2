"""The service's database: SQLAlchemy Core tables, a versioned schema, and engine set-up.

One SQLite file in the server home by default (nothing to install), PostgreSQL by URL for a
deployment with several web and scoring processes. The schema is versioned by a one-row
``schema_version`` table and the ordered :data:`MIGRATIONS` below: ``server init`` applies
them, every process checks the version on start and refuses a database newer or older than
its code (Alembic would add an ``env.py``/``alembic.ini`` pair to ship inside the package for
the same guarantee on four tables).

SQLite is opened in WAL mode with ``BEGIN IMMEDIATE`` transactions, so two writers never
deadlock upgrading a read lock; a lock held longer than the busy timeout is an error the
caller turns into one line.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.errors import SearchTomeError

IMMEDIATE = "searchtome_immediate"
PING_AFTER_SECONDS = 10.0  # a pooled PostgreSQL connection idle this long is pinged before use
metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version", metadata, sa.Column("version", sa.Integer, nullable=False)
)
flags = sa.Table(
    "flags",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
teams = sa.Table(
    "teams",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("token_hash", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
    # the organisers' baselines: shown on the board, marked, outside the ranks (version 5)
    sa.Column("baseline", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
)
submissions = sa.Table(
    "submissions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("public_id", sa.String(32), nullable=False, unique=True),
    # indexed (migration 6): a status read counts the team's uploads for its remaining quota
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
    sa.Column("system", sa.String(200), nullable=False),
    # queued -> scoring -> scored | rejected | failed (see searchtome.service.store)
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("meta", sa.Text, nullable=False),
    sa.Column("predictions_name", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("lease_until", sa.Float, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("times_scored", sa.Integer, nullable=False, default=0),
    sa.Column("scored_at", sa.Float, nullable=True),
    sa.Column("scores", sa.LargeBinary, nullable=True),  # per-query arrays: never served
    sa.Column("counts", sa.Text, nullable=True),  # the validator's structure counts
    sa.Column("final", sa.Boolean, nullable=False, default=False),
    # left off the leaderboard by its team (version 2)
    sa.Column("hidden", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
)
# The uploaded bytes, apart from the rows that status polls and board checks read (version 2).
uploads = sa.Table(
    "uploads",
    metadata,
    sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("sha256", sa.String(64), nullable=False),  # of the bytes as uploaded
    sa.Column("size", sa.Integer, nullable=False),  # bytes as uploaded
    sa.Column("codec", sa.String(8), nullable=False),  # how `data` holds them (store.Codec)
    sa.Column("data", sa.LargeBinary, nullable=False),
)
# Each leaderboard document as last computed, with the key of the rows it was computed from.
boards = sa.Table(
    "boards",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("document", sa.Text, nullable=False),  # the JSON served as is
    sa.Column("tests", sa.Text, nullable=True),  # raw tests against the top, reused: not served
    sa.Column("computed_at", sa.Float, nullable=False),
)
# A scoring worker's heartbeat (``/api/health`` counts the live ones); created by _v3_workers.
workers = sa.Table(
    "workers",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("seen_at", sa.Float, nullable=False),
)


def _v1(conn: Connection) -> None:
    """Version 1, frozen: its own table definitions, never the live ones above."""
    v1 = sa.MetaData()
    sa.Table(
        "flags",
        v1,
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    sa.Table(
        "teams",
        v1,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    sa.Table(
        "submissions",
        v1,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("public_id", sa.String(32), nullable=False, unique=True),
        sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("system", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("meta", sa.Text, nullable=False),
        sa.Column("predictions_name", sa.String(64), nullable=False),
        sa.Column("predictions", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.Float, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("times_scored", sa.Integer, nullable=False),
        sa.Column("scored_at", sa.Float, nullable=True),
        sa.Column("scores", sa.LargeBinary, nullable=True),
        sa.Column("counts", sa.Text, nullable=True),
        sa.Column("final", sa.Boolean, nullable=False),
    )
    sa.Table(
        "quota",
        v1,
        sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
    )
    v1.create_all(conn)


def _v2(conn: Connection) -> None:
    """Version 2: uploads move to their own table, leaderboards are cached in ``boards``, a
    team can hide a run (``submissions.hidden``).

    Every stored upload is copied (hashed and, unless already gzip, compressed) before the
    ``predictions`` column is dropped, one row at a time so memory holds one upload.
    """
    from searchtome.service.blobs import pack

    v2 = sa.MetaData()
    new_uploads = sa.Table(
        "uploads",
        v2,
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("codec", sa.String(8), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    sa.Table(
        "boards",
        v2,
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("tests", sa.Text, nullable=True),
        sa.Column("computed_at", sa.Float, nullable=False),
    )
    sa.Table("submissions", v2, sa.Column("id", sa.Integer, primary_key=True))
    v2.create_all(conn, tables=[t for t in v2.sorted_tables if t.name != "submissions"])
    ids = conn.exec_driver_sql("SELECT id FROM submissions ORDER BY id").scalars().all()
    for sub_id in ids:
        raw = conn.execute(
            sa.text("SELECT predictions FROM submissions WHERE id = :id"), {"id": sub_id}
        ).scalar_one()
        conn.execute(new_uploads.insert().values(submission_id=sub_id, **pack(bytes(raw))))
    conn.exec_driver_sql("ALTER TABLE submissions DROP COLUMN predictions")
    conn.exec_driver_sql("ALTER TABLE submissions ADD COLUMN hidden BOOLEAN NOT NULL DEFAULT false")


def _v3_workers(conn: Connection) -> None:
    # Frozen DDL, not the table object above: this step must create the same table forever.
    conn.exec_driver_sql(
        "CREATE TABLE workers (name VARCHAR(128) NOT NULL PRIMARY KEY, "
        "started_at FLOAT NOT NULL, seen_at FLOAT NOT NULL)"
    )


def _v4_competition(conn: Connection) -> None:
    """Phases, each upload's phase, counted refusals, Ladder releases, events, score history.

    Frozen DDL: these definitions are this migration's own, never the live tables of
    :mod:`searchtome.service.tables` (which may grow in later migrations).
    """
    md = sa.MetaData()
    sa.Table("teams", md, sa.Column("id", sa.Integer, primary_key=True))
    sa.Table("submissions", md, sa.Column("id", sa.Integer, primary_key=True))
    new = [
        sa.Table(
            "phases",
            md,
            sa.Column("name", sa.String(64), primary_key=True),
            sa.Column("start_at", sa.Float, nullable=False),
            sa.Column("end_at", sa.Float, nullable=False),
            sa.Column("final", sa.Boolean, nullable=False),
            sa.Column("visibility", sa.String(16), nullable=False),
            sa.Column("daily_limit", sa.Integer, nullable=True),
            sa.Column("phase_limit", sa.Integer, nullable=True),
            sa.Column("late", sa.Boolean, nullable=False),
            sa.Column("changed_at", sa.Float, nullable=False),
        ),
        sa.Table(
            "entries",
            md,
            sa.Column(
                "submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True
            ),
            sa.Column("phase", sa.String(64), nullable=True, index=True),
            sa.Column("late", sa.Boolean, nullable=False),
        ),
        sa.Table(
            "refusals",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
            sa.Column("day", sa.String(10), nullable=False),
            sa.Column("phase", sa.String(64), nullable=True),
            sa.Column("at", sa.Float, nullable=False),
        ),
        sa.Table(
            "releases",
            md,
            sa.Column(
                "submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True
            ),
            sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
            sa.Column("shown_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
            sa.Column("released_at", sa.Float, nullable=False),
        ),
        sa.Table(
            "events",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("at", sa.Float, nullable=False),
            sa.Column("kind", sa.String(32), nullable=False),
            sa.Column("subject", sa.String(64), nullable=True),
            sa.Column("message", sa.Text, nullable=False),
        ),
        sa.Table(
            "score_history",
            md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("scores", sa.LargeBinary, nullable=True),
            sa.Column("error", sa.Text, nullable=True),
            sa.Column("scored_at", sa.Float, nullable=True),
            sa.Column("archived_at", sa.Float, nullable=False),
            sa.Column("reason", sa.Text, nullable=False),
        ),
    ]
    md.create_all(conn, tables=new)


def _v5_members(conn: Connection) -> None:
    """Members of a team, each with a token of their own; teams can be the organisers' baselines.

    Frozen DDL: this migration's own definitions, never the live tables.
    """
    md = sa.MetaData()
    sa.Table("teams", md, sa.Column("id", sa.Integer, primary_key=True))
    members = sa.Table(
        "members",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
        sa.UniqueConstraint("team_id", "name", name="uq_members_team_name"),
    )
    md.create_all(conn, tables=[members])
    conn.exec_driver_sql("ALTER TABLE teams ADD COLUMN baseline BOOLEAN NOT NULL DEFAULT false")


def _v6_team_index(conn: Connection) -> None:
    """An index on ``submissions.team_id``: every status read and upload counts the team's
    uploads (its remaining quota), which scanned every stored submission before."""
    conn.exec_driver_sql("CREATE INDEX ix_submissions_team_id ON submissions (team_id)")


def _v7_no_quota_table(conn: Connection) -> None:
    """Drop ``quota``, the daily counter of version 1: since version 4 quota use is counted
    from the uploads' own rows (``admission``), and nothing read the counter any more."""
    conn.exec_driver_sql("DROP TABLE quota")


# Each entry brings the schema from version i to i + 1; append, never edit a released one.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (
    _v1,
    _v2,
    _v3_workers,
    _v4_competition,
    _v5_members,
    _v6_team_index,
    _v7_no_quota_table,
)
SCHEMA_VERSION = len(MIGRATIONS)


def sqlite_url(path: os.PathLike[str] | str) -> str:
    return f"sqlite:///{os.fspath(path)}"


def _sqlite_setup(engine: Engine, busy_timeout_ms: int) -> None:
    # pysqlite's own transaction handling starts transactions late and deferred; take it over so
    # every transaction is BEGIN IMMEDIATE (SQLAlchemy's documented recipe).
    max_pages = os.environ.get("SEARCHTOME_SERVER_SQLITE_MAX_PAGES")

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = FULL")
        cur.execute("PRAGMA foreign_keys = ON")
        if max_pages:  # caps the file's size: how the tests make the database "full"
            cur.execute(f"PRAGMA max_page_count = {int(max_pages)}")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextlib.contextmanager
def write(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes: on SQLite it takes the write lock at once (BEGIN IMMEDIATE).

    Readers use plain ``engine.connect()`` and a deferred BEGIN, so they never wait for a writer
    (WAL) and never deadlock upgrading to a writer.
    """
    with engine.connect() as conn:
        conn.execution_options(**{IMMEDIATE: True})
        with conn.begin():
            yield conn


def _is_closed(dbapi_conn: Any) -> bool:
    """Whether a pooled PostgreSQL connection's socket was closed or spoken to while it sat
    idle: a server that restarts or ends the session sends its goodbye and closes the socket,
    which makes it readable. One local ``poll``, no round trip."""
    if dbapi_conn.closed:
        return True
    poller = select.poll()
    poller.register(dbapi_conn.fileno(), select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def _postgres_liveness(engine: Engine) -> None:
    """A pooled connection is checked before each use without a round trip (:func:`_is_closed`);
    one idle longer than :data:`PING_AFTER_SECONDS` is pinged as well (a server host that
    vanished without closing its sockets). SQLAlchemy's ``pool_pre_ping`` pinged every
    checkout: a round trip per request that this replaces. A connection found dead is
    replaced before the request uses it (``DisconnectionError`` makes the pool retry)."""

    @sa.event.listens_for(engine, "checkin")
    def _checkin(dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        idle = time.monotonic() - record.info.get("idle_since", time.monotonic())
        try:
            dead = _is_closed(dbapi_conn)
            if not dead and idle > PING_AFTER_SECONDS:
                dead = not engine.dialect.do_ping(dbapi_conn)
        except Exception:  # the ping itself failed: the connection is gone
            dead = True
        if dead:
            raise sa.exc.DisconnectionError("pooled connection closed by the server")


@contextlib.contextmanager
def read(engine: Engine) -> Iterator[Connection]:
    """A connection for several reads that belong together (a status read).

    On SQLite they share one deferred transaction: one WAL snapshot, never waiting for a writer.
    On PostgreSQL they run in autocommit: under its READ COMMITTED every statement takes its own
    snapshot inside a transaction too, so BEGIN and the pool's ROLLBACK would add two round
    trips (a third of a status read's time) and no consistency.
    """
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level="AUTOCOMMIT")
        yield conn


def make_engine(url: str, busy_timeout_ms: int = 5000) -> Engine:
    """An engine for ``url`` (``sqlite:///...`` or ``postgresql+psycopg://...``)."""
    try:
        engine = sa.create_engine(url)
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise SearchTomeError(
            f"--db {url!r}: not a usable database URL ({exc}); use sqlite:///PATH or "
            "postgresql+psycopg://USER:PASSWORD@HOST:PORT/NAME"
        ) from None
    if engine.dialect.name == "sqlite":
        _sqlite_setup(engine, busy_timeout_ms)
    else:
        _postgres_liveness(engine)
    return engine


def current_version(conn: Connection) -> int:
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    row = conn.execute(sa.select(schema_version.c.version)).first()
    return int(row[0]) if row else 0


def migrate(engine: Engine) -> int:
    """Apply the missing migrations in one transaction each; returns the new version."""
    with write(engine) as conn:
        if not sa.inspect(conn).has_table("schema_version"):
            metadata.create_all(conn, tables=[schema_version])
            conn.execute(schema_version.insert().values(version=0))
    while True:
        with write(engine) as conn:
            version = current_version(conn)
            if version > SCHEMA_VERSION:
                raise SearchTomeError(
                    f"database schema version {version} is newer than this searchtome's "
                    f"{SCHEMA_VERSION}; use the searchtome that wrote it"
                )
            if version == SCHEMA_VERSION:
                break
            MIGRATIONS[version](conn)
            conn.execute(schema_version.update().values(version=version + 1))
    return SCHEMA_VERSION


def check_version(engine: Engine, where: str) -> None:
    """Refuse to run against a database whose schema this code does not know."""
    try:
        with engine.connect() as conn:
            version = current_version(conn)
    except sa.exc.OperationalError as exc:
        raise SearchTomeError(f"{where}: cannot open the database ({one_line(exc)})") from None
    if version != SCHEMA_VERSION:
        raise SearchTomeError(
            f"{where}: database schema version {version}, this searchtome expects "
            f"{SCHEMA_VERSION}; run `searchtome server migrate --home ...` with this version "
            "(it upgrades in place, every upload kept) or use the matching searchtome"
        )


def one_line(exc: BaseException) -> str:
    """A database error's message without SQLAlchemy's SQL echo and background link."""
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split("\n")[0].split())


def is_busy(exc: BaseException) -> bool:
    text = one_line(exc).lower()
    return "locked" in text or "busy" in text


def is_full(exc: BaseException) -> bool:
    text = one_line(exc).lower()
    return "full" in text or "no space" in text
