"""The competition's closed sets, light to import: the command line offers them as choices
without loading SQLAlchemy or numpy (the ``server`` extra may be missing)."""

from __future__ import annotations

from enum import StrEnum


class ScoreMode(StrEnum):
    """What an upload's public score reveals (:mod:`searchtome.service.public`)."""

    EXACT = "exact"
    ROUNDED = "rounded"
    LADDER = "ladder"


class Visibility(StrEnum):
    """When a phase's public scores are shown to the team and on the board."""

    HIDDEN = "hidden"
    SHOWN = "shown"
    SHOWN_AT_END = "shown-at-end"


class Event(StrEnum):
    """What the organiser's log records (:mod:`searchtome.service.events`)."""

    TEAM_ADDED = "team-added"
    TEAM_REVOKED = "team-revoked"
    MEMBER_ADDED = "member-added"
    MEMBER_REVOKED = "member-revoked"
    JOB_FAILED = "job-failed"
    REQUEUED = "requeued"
    RESCORED = "rescore"
    REVEALED = "reveal"
    HIDDEN = "reveal-undone"
    PHASE = "phase-changed"
