"""A team's members: each holds a token of their own and uploads as the team (one quota).

A member's token is ``stm_<member id>_<secret>``; only its hash is stored. It authenticates as
the team wherever the team's own token does (:func:`searchtome.service.store.authenticate`);
revoking a member stops that token alone, revoking the team stops every member's.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.service.db import teams, write
from searchtome.service.store import check_team_name, hash_token
from searchtome.service.tables import members


def _active_team(conn: Connection, team: str) -> int:
    row = conn.execute(sa.select(teams.c.id, teams.c.revoked_at).where(teams.c.name == team))
    found = row.first()
    if found is None:
        names = conn.execute(sa.select(teams.c.name)).scalars().all()
        raise unknown_name("team", team, names)
    if found.revoked_at is not None:
        raise SearchTomeError(f"team {team!r} is revoked; its members cannot be changed")
    return int(found.id)


def add_member(engine: Engine, team: str, member: str) -> str:
    """Add ``member`` to ``team``; returns the member's token (shown once, only a hash kept).
    A member name is unique within its team, revoked members included."""
    check_team_name(member)  # the same characters as team names
    with write(engine) as conn:
        team_id = _active_team(conn, team)
        taken = conn.execute(
            sa.select(members.c.id).where(members.c.team_id == team_id, members.c.name == member)
        ).first()
        if taken is not None:
            raise SearchTomeError(
                f"team {team!r} already has a member {member!r}; to replace a lost token, "
                f"revoke it (`server revoke-member {team} {member}`) and add a new name"
            )
        secret = secrets.token_urlsafe(32)
        result = conn.execute(
            members.insert().values(
                team_id=team_id, name=member, token_hash=hash_token(secret), created_at=time.time()
            )
        )
    return f"stm_{result.inserted_primary_key[0]}_{secret}"


def revoke_member(engine: Engine, team: str, member: str) -> None:
    with write(engine) as conn:
        team_id = _active_team(conn, team)
        done = conn.execute(
            members.update()
            .where(
                members.c.team_id == team_id,
                members.c.name == member,
                members.c.revoked_at.is_(None),
            )
            .values(revoked_at=time.time())
        )
        if done.rowcount == 0:
            names = (
                conn.execute(sa.select(members.c.name).where(members.c.team_id == team_id))
                .scalars()
                .all()
            )
            if member in names:
                raise SearchTomeError(f"member {member!r} of team {team!r} is already revoked")
            raise unknown_name(f"member of team {team!r}", member, names)


def list_members(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every team's members (name, created, revoked), by team name."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                teams.c.name.label("team"),
                members.c.name,
                members.c.created_at,
                members.c.revoked_at,
            )
            .join(teams, teams.c.id == members.c.team_id)
            .order_by(teams.c.name, members.c.name)
        ).mappings()
        out: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            out.setdefault(r["team"], []).append(dict(r))
        return out
