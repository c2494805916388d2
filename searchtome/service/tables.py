"""The competition's live tables: phases, each upload's phase, refusals, releases, events, history.

Created by :func:`searchtome.service.db._v4_competition` (frozen DDL there); these objects are
what the code queries, on the same metadata as :mod:`searchtome.service.db`'s tables.
"""

from __future__ import annotations

import sqlalchemy as sa

from searchtome.service.db import metadata

phases = sa.Table(
    "phases",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("start_at", sa.Float, nullable=False),
    sa.Column("end_at", sa.Float, nullable=False),
    sa.Column("final", sa.Boolean, nullable=False),
    sa.Column("visibility", sa.String(16), nullable=False),
    sa.Column("daily_limit", sa.Integer, nullable=True),
    sa.Column("phase_limit", sa.Integer, nullable=True),
    sa.Column("late", sa.Boolean, nullable=False),  # final phase only: score late uploads apart
    sa.Column("changed_at", sa.Float, nullable=False),
)
# The phase an upload came in (NULL while no phase is defined) and whether it was late.
entries = sa.Table(
    "entries",
    metadata,
    sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("phase", sa.String(64), nullable=True, index=True),
    sa.Column("late", sa.Boolean, nullable=False),
)
# Uploads the validator refused, kept only when the organiser counts them against the quota.
refusals = sa.Table(
    "refusals",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("phase", sa.String(64), nullable=True),
    sa.Column("at", sa.Float, nullable=False),
)
# Ladder mode: which of the team's runs a scored run shows (itself when it beat the best).
releases = sa.Table(
    "releases",
    metadata,
    sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
    sa.Column("shown_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
    sa.Column("released_at", sa.Float, nullable=False),
)
events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("subject", sa.String(64), nullable=True),
    sa.Column("message", sa.Text, nullable=False),
)
score_history = sa.Table(
    "score_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("scores", sa.LargeBinary, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("scored_at", sa.Float, nullable=True),
    sa.Column("archived_at", sa.Float, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
)
# A team's members, each with a token of their own (created by db._v5_members).
members = sa.Table(
    "members",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False, index=True),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
    sa.UniqueConstraint("team_id", "name", name="uq_members_team_name"),
)
