"""Rows of the service: teams and tokens, the scoring queue's state machine.

A submission moves ``queued -> scoring -> scored`` (or ``rejected`` when the worker's validator
refuses it, or ``failed``); quota use is counted from these rows (:mod:`admission`), where
``rejected`` and ``failed`` uploads give their slot back unless the organiser counts them. Its
uploaded bytes sit apart in the ``uploads`` table and :func:`upload_of` is their one reader. A
worker claims a job with a conditional ``UPDATE ... WHERE state = 'queued'`` (exactly one
claimer wins, on SQLite and on PostgreSQL alike), keeps a lease alive with heartbeats, and
writes its result with an ``UPDATE`` that also requires its own claim (``claimed_by`` and
``attempts``) to be still current. A worker killed mid-job stops heartbeating; once its lease
runs out the job is queued again, once: a second crash marks it ``failed``. A stale worker
that wakes up after losing its lease cannot write, so no submission is scored twice.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.service import blobs
from searchtome.service.db import flags, submissions, teams, uploads, write
from searchtome.service.tables import members

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 2  # a job whose worker died is retried once
TEAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
REVEALED = "revealed"
CHANGED = "board_changed"  # a fresh value whenever a final mark or a revocation changes the board


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def utc_day(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now if now is not None else time.time()))


# -- teams ---------------------------------------------------------------------------------------


def check_team_name(name: str) -> None:
    if not TEAM_NAME.match(name):
        raise SearchTomeError(
            f"team name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )


def add_team(engine: Engine, name: str) -> str:
    """Create a team; returns its token ``st_<id>_<secret>`` (only a hash is stored)."""
    return add_teams(engine, [name])[0][1]


def add_teams(engine: Engine, names: list[str], baseline: bool = False) -> list[tuple[str, str]]:
    """Create several teams in one transaction: all of them, or none when one name is taken or
    malformed. Returns ``(name, token)`` pairs in the order given. ``baseline``: the
    organisers' baselines, shown on the board but outside the ranks."""
    for name in names:
        check_team_name(name)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SearchTomeError(f"team {repeated[0]!r} is named twice; each name once")
    out = []
    with write(engine) as conn:
        for name in names:
            _name_free(conn, name)
        now = time.time()
        for name in names:
            secret = secrets.token_urlsafe(32)
            result = conn.execute(
                teams.insert().values(
                    name=name, token_hash=hash_token(secret), created_at=now, baseline=baseline
                )
            )
            out.append((name, f"st_{result.inserted_primary_key[0]}_{secret}"))
    return out


def _name_free(conn: Connection, name: str) -> None:
    row = conn.execute(sa.select(teams.c.revoked_at).where(teams.c.name == name)).first()
    if row is None:
        return
    if row.revoked_at is not None:
        # A revoked name never gets a token again: its runs stay attributed to the old team.
        raise SearchTomeError(
            f"team {name!r} was revoked and its name is not reused; add the team under a new "
            f"name (e.g. {name}-2)"
        )
    raise SearchTomeError(
        f"team {name!r} exists with a working token; to replace a lost token, revoke it "
        f"(`server revoke {name}`) and add the team under a new name"
    )


def revoke_team(engine: Engine, name: str) -> None:
    with write(engine) as conn:
        done = conn.execute(
            teams.update()
            .where(teams.c.name == name, teams.c.revoked_at.is_(None))
            .values(revoked_at=time.time())
        )
        _touch_board(conn)
        if done.rowcount == 0:
            names = conn.execute(sa.select(teams.c.name)).scalars().all()
            if name in names:
                raise SearchTomeError(f"team {name!r} is already revoked")
            raise unknown_name("team", name, names)


def list_teams(engine: Engine) -> list[dict[str, Any]]:
    n_subs = (
        sa.select(sa.func.count())
        .where(submissions.c.team_id == teams.c.id)
        .scalar_subquery()
        .label("submissions")
    )
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                teams.c.name, teams.c.created_at, teams.c.revoked_at, teams.c.baseline, n_subs
            ).order_by(teams.c.name)
        ).mappings()
        return [dict(r) for r in rows]


@dataclass(frozen=True)
class Team:
    id: int
    name: str


TOKEN = re.compile(r"(stm?)_(\d{1,18})_([A-Za-z0-9_-]{20,100})")


def authenticate(conn: Connection, token: str) -> Team | None:
    """The active team holding ``token``: the team's own (``st_``) or one of its members'
    (``stm_``, see :mod:`searchtome.service.members`); hashes are compared in constant time.
    A revoked team's members are refused with it."""
    match = TOKEN.fullmatch(token or "")
    if not match:
        return None
    kind, key, secret = match.groups()
    row = conn.execute(_token_query(kind), {"key": int(key)}).first()
    member_revoked = row.member_revoked if row is not None and kind == "stm" else None
    presented = hash_token(secret)
    stored = row.token_hash if row is not None else hash_token("")
    if not hmac.compare_digest(presented.encode(), stored.encode()) or row is None:
        return None
    if row.revoked_at is not None or member_revoked is not None:
        return None
    return Team(row.id, row.name)


@functools.cache
def _token_query(kind: str) -> sa.Select[Any]:
    """The row holding a team's (``st``) or a member's (``stm``) token, by its id; built once
    (every request authenticates)."""
    if kind == "st":
        query = sa.select(teams.c.id, teams.c.name, teams.c.token_hash, teams.c.revoked_at)
        return query.where(teams.c.id == sa.bindparam("key"))
    return (
        sa.select(
            teams.c.id,
            teams.c.name,
            members.c.token_hash,
            teams.c.revoked_at,
            members.c.revoked_at.label("member_revoked"),
        )
        .join(teams, teams.c.id == members.c.team_id)
        .where(members.c.id == sa.bindparam("key"))
    )


# -- uploads -------------------------------------------------------------------------------------


class QuotaExceeded(SearchTomeError):
    pass


class Revoked(SearchTomeError):
    pass


def _require_active(conn: Connection, team: Team) -> None:
    """In the upload's own transaction: a team revoked while it uploaded is not accepted."""
    revoked = conn.execute(sa.select(teams.c.revoked_at).where(teams.c.id == team.id)).scalar()
    if revoked is not None:
        raise Revoked(f"team {team.name!r} was revoked during the upload; nothing was accepted")


class Admitter(Protocol):
    """Checks an upload may be taken (``take``, raising) and records it (``record``), both in
    :func:`enqueue`'s transaction (:class:`searchtome.service.admission.Admission`)."""

    def take(self, conn: Connection) -> None: ...

    def record(self, conn: Connection, submission_id: int) -> None: ...


def enqueue(
    engine: Engine,
    team: Team,
    *,
    system: str,
    meta: str,
    predictions_name: str,
    predictions: bytes,
    admission: Admitter,
) -> str:
    """Queue the upload with its bytes, in one transaction with ``admission``'s checks.

    ``admission`` (:class:`searchtome.service.admission.Admission`) checks the open phase and
    the quotas (``take``, which raises) and records the upload's phase (``record``); quota use
    is counted from these rows, so of two uploads racing for the last slot one is refused.
    """
    now = time.time()
    day = utc_day(now)
    public_id = secrets.token_hex(8)
    stored = blobs.pack(predictions)  # hashed and compressed before the write lock is taken
    with write(engine) as conn:
        _require_active(conn, team)
        admission.take(conn)
        sub_id = conn.execute(
            submissions.insert().values(
                public_id=public_id,
                team_id=team.id,
                system=system,
                state="queued",
                meta=meta,
                predictions_name=predictions_name,
                created_at=now,
                day=day,
                attempts=0,
                times_scored=0,
                final=False,
            )
        ).inserted_primary_key[0]
        conn.execute(uploads.insert().values(submission_id=sub_id, **stored))
        admission.record(conn, sub_id)
    return public_id


def upload_of(conn: Connection, public_id: str) -> tuple[str, bytes]:
    """The predictions file name and the bytes a submission uploaded: the one reader of them."""
    row = conn.execute(
        sa.select(submissions.c.predictions_name, uploads.c.codec, uploads.c.data, uploads.c.size)
        .join(uploads, uploads.c.submission_id == submissions.c.id)
        .where(submissions.c.public_id == public_id)
    ).first()
    if row is None:
        raise LookupError(public_id)
    return row.predictions_name, blobs.unpack(row.codec, row.data, row.size)


# -- the queue -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    id: int
    public_id: str
    attempt: int
    meta: str
    predictions_name: str
    predictions: bytes


def requeue_expired(conn: Connection, now: float) -> list[str]:
    """Put expired jobs back in the queue; returns the ids of those failed for good."""
    expired = (submissions.c.state == "scoring") & (submissions.c.lease_until < now)
    failed = fail_abandoned(conn, expired)
    conn.execute(submissions.update().where(expired).values(state="queued", lease_until=None))
    return failed


def fail_abandoned(conn: Connection, expired: Any) -> list[str]:
    """Mark ``failed`` the expired jobs whose worker died :data:`MAX_ATTEMPTS` times (a
    ``failed`` upload is not counted against the quota: the team did nothing wrong)."""
    rows = conn.execute(
        sa.select(submissions.c.id, submissions.c.public_id).where(
            expired, submissions.c.attempts >= MAX_ATTEMPTS
        )
    ).all()
    failed = []
    for r in rows:
        done = conn.execute(
            submissions.update()
            .where(submissions.c.id == r.id, expired)
            .values(
                state="failed",
                error=f"scoring stopped {MAX_ATTEMPTS} times without finishing; the organisers "
                "have been told (server log) and the upload was not counted against the quota",
                lease_until=None,
            )
        )
        if done.rowcount == 1:  # not already failed by another worker's sweep
            failed.append(r.public_id)
    return failed


def claim(engine: Engine, worker: str, lease_seconds: float) -> Job | None:
    """Take the oldest queued job, or ``None``; expired leases are put back first."""
    now = time.time()
    with write(engine) as conn:
        failed = requeue_expired(conn, now)
    for public_id in failed:
        log.error(
            "submission %s failed: its worker died %d times while scoring it; "
            "the quota slot was returned",
            public_id,
            MAX_ATTEMPTS,
        )
    with write(engine) as conn:
        ids = conn.execute(
            sa.select(submissions.c.id)
            .where(submissions.c.state == "queued")
            .order_by(submissions.c.id)
            .limit(8)
        ).scalars()
        for job_id in list(ids):
            won = conn.execute(
                submissions.update()
                .where(submissions.c.id == job_id, submissions.c.state == "queued")
                .values(
                    state="scoring",
                    claimed_by=worker,
                    lease_until=now + lease_seconds,
                    attempts=submissions.c.attempts + 1,
                )
            )
            if won.rowcount == 1:
                row = conn.execute(
                    sa.select(
                        submissions.c.public_id, submissions.c.attempts, submissions.c.meta
                    ).where(submissions.c.id == job_id)
                ).one()
                name, data = upload_of(conn, row.public_id)
                return Job(job_id, row.public_id, row.attempts, row.meta, name, data)
    return None


def _mine(job: Job, worker: str) -> Any:
    return (
        (submissions.c.id == job.id)
        & (submissions.c.state == "scoring")
        & (submissions.c.claimed_by == worker)
        & (submissions.c.attempts == job.attempt)
    )


def heartbeat(engine: Engine, job: Job, worker: str, lease_seconds: float) -> bool:
    with write(engine) as conn:
        done = conn.execute(
            submissions.update()
            .where(_mine(job, worker))
            .values(lease_until=time.time() + lease_seconds)
        )
    return done.rowcount == 1


def finish(
    engine: Engine,
    job: Job,
    worker: str,
    *,
    scores: bytes | None = None,
    counts: dict[str, Any] | None = None,
    error: str | None = None,
) -> bool:
    """Record the result if the claim is still this worker's; ``False`` when it was lost.

    A run the validator refuses (``error``) becomes ``rejected``: as when the web process
    refused it before the 202, it is not counted against the quota (see :mod:`admission`).
    """
    values: dict[str, Any] = {"lease_until": None, "scored_at": time.time()}
    if counts is not None:
        values["counts"] = json.dumps(counts)
    if error is None:
        values.update(state="scored", scores=scores, times_scored=submissions.c.times_scored + 1)
    else:
        values.update(state="rejected", error=error)
    with write(engine) as conn:
        done = conn.execute(submissions.update().where(_mine(job, worker)).values(**values))
    return done.rowcount == 1


# -- reading -------------------------------------------------------------------------------------


def _touch_board(conn: Connection) -> None:
    conn.execute(flags.delete().where(flags.c.name == CHANGED))
    conn.execute(flags.insert().values(name=CHANGED, value=secrets.token_hex(8)))


def get_flag(conn: Connection, name: str) -> str | None:
    return conn.execute(sa.select(flags.c.value).where(flags.c.name == name)).scalar()


def set_flag(engine: Engine, name: str, value: str) -> None:
    with write(engine) as conn:
        conn.execute(flags.delete().where(flags.c.name == name))
        conn.execute(flags.insert().values(name=name, value=value))


STATUS_COLUMNS = (
    submissions.c.public_id,
    submissions.c.team_id,
    submissions.c.system,
    submissions.c.state,
    submissions.c.error,
    submissions.c.final,
    submissions.c.hidden,
    submissions.c.created_at,
    submissions.c.scored_at,
    teams.c.name.label("team"),
)  # a status reply's columns besides the scores (a web process keeps the scores' view)


def _shown_columns() -> sa.Select[Any]:
    """What a status reply shows of a submission (never its upload)."""
    return sa.select(*STATUS_COLUMNS, submissions.c.meta, submissions.c.scores).join(
        teams, teams.c.id == submissions.c.team_id
    )


def submission_row(conn: Connection, public_id: str) -> Any:
    return conn.execute(_shown_columns().where(submissions.c.public_id == public_id)).first()


def team_rows(conn: Connection, team_id: int) -> list[Any]:
    """A team's own submissions, oldest first."""
    query = _shown_columns().where(submissions.c.team_id == team_id).order_by(submissions.c.id)
    return list(conn.execute(query))


def board_key(conn: Connection) -> tuple[Any, ...]:
    """Changes whenever the leaderboard would: scored rows, finals, revocations, reveal."""
    row = conn.execute(
        sa.select(
            sa.func.count(),
            sa.func.max(submissions.c.scored_at),
            sa.func.sum(sa.case((submissions.c.final, 1), else_=0)),
        ).where(submissions.c.state == "scored")
    ).first()
    revoked = conn.execute(
        sa.select(sa.func.count()).where(teams.c.revoked_at.is_not(None))
    ).scalar()
    return (*tuple(row or ()), revoked, get_flag(conn, REVEALED), get_flag(conn, CHANGED))


def scored_rows(conn: Connection) -> list[Any]:
    return list(
        conn.execute(
            sa.select(
                submissions.c.public_id,
                submissions.c.system,
                submissions.c.created_at,
                submissions.c.final,
                submissions.c.scores,
                submissions.c.meta,
                submissions.c.counts,
                submissions.c.team_id,
                teams.c.name.label("team"),
                teams.c.baseline,
            )
            .join(teams, teams.c.id == submissions.c.team_id)
            .where(
                submissions.c.state == "scored",
                submissions.c.hidden.is_(False),
                teams.c.revoked_at.is_(None),
            )
            .order_by(submissions.c.id)
        )
    )


def mark_final(engine: Engine, team: Team, public_id: str, final: bool, max_final: int) -> None:
    with write(engine) as conn:
        # Lock the team's row (PostgreSQL; SQLite's write lock covers it): two marks racing at
        # the cap are counted one after the other.
        conn.execute(sa.select(teams.c.id).where(teams.c.id == team.id).with_for_update())
        row = _own(conn, team, public_id)
        if final:
            if row.hidden:
                raise SearchTomeError(
                    f"submission {public_id} is hidden; show it before marking it final"
                )
            if row.state != "scored":
                raise SearchTomeError(
                    f"submission {public_id} is {row.state}; only a scored run can be final"
                )
            marked = conn.execute(
                sa.select(sa.func.count()).where(
                    submissions.c.team_id == team.id,
                    submissions.c.final,
                    submissions.c.id != row.id,
                )
            ).scalar()
            if marked >= max_final:
                raise QuotaExceeded(
                    f"team {team.name!r} already has {max_final} final runs; unmark one first"
                )
        conn.execute(submissions.update().where(submissions.c.id == row.id).values(final=final))
        _touch_board(conn)


def _own(conn: Connection, team: Team, public_id: str) -> Any:
    """The team's own submission ``public_id``; ``LookupError`` when it has none of that id."""
    row = conn.execute(
        sa.select(
            submissions.c.id, submissions.c.state, submissions.c.hidden, submissions.c.final
        ).where(submissions.c.public_id == public_id, submissions.c.team_id == team.id)
    ).first()
    if row is None:
        raise LookupError(public_id)
    return row


def set_hidden(engine: Engine, team: Team, public_id: str, hidden: bool) -> None:
    """Hide a run from the leaderboard, or show it again; a final run cannot be hidden."""
    with write(engine) as conn:
        row = _own(conn, team, public_id)
        if hidden and row.final:
            raise SearchTomeError(
                f"submission {public_id} is a final run; unmark it before hiding it"
            )
        conn.execute(submissions.update().where(submissions.c.id == row.id).values(hidden=hidden))
        _touch_board(conn)
