"""Whether a team may upload now: the open phase, the daily and per-phase quotas, what is left.

Quota use is counted from the rows themselves (the team's uploads of the UTC day, of the phase),
inside the transaction that inserts the new upload, with the team's row locked (PostgreSQL; on
SQLite the write lock serialises every writer): of two uploads racing for the last slot exactly
one is accepted. Uploads that end ``rejected`` or ``failed`` give their slot back unless the
organiser counts them (``server init --count-refused``); then uploads the web validator refuses
count as well (a ``refusals`` row each).
"""

from __future__ import annotations

import calendar as cal_module
import functools
import time
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.errors import SearchTomeError
from searchtome.service.db import submissions, teams, write
from searchtome.service.phases import Calendar, calendar, iso
from searchtome.service.store import QuotaExceeded, Team, utc_day
from searchtome.service.tables import entries, refusals

UNCOUNTED = ("rejected", "failed")


class Closed(SearchTomeError):
    """No phase is open: the upload is refused (403) with the next opening."""

    def __init__(self, message: str, left: Remaining | None = None) -> None:
        super().__init__(message)
        self.left = left


class OutOfQuota(QuotaExceeded):
    """No upload left today or in the phase (429); ``left`` says which."""

    def __init__(self, message: str, left: Remaining) -> None:
        super().__init__(message)
        self.left = left


@dataclass(frozen=True)
class Policy:
    daily_limit: int
    count_refused: bool


@dataclass(frozen=True)
class Remaining:
    """What a team may still upload: today (UTC) and, inside a phase with a cap, in the phase."""

    today: int
    daily_limit: int
    resets: float
    phase: str | None = None
    in_phase: int | None = None
    phase_limit: int | None = None
    late: bool = False

    @property
    def left(self) -> int:
        return self.today if self.in_phase is None else min(self.today, self.in_phase)

    def to_dict(self) -> dict[str, Any]:
        return {
            "today": self.today,
            "daily_limit": self.daily_limit,
            "resets": iso(self.resets),
            "phase": self.phase,
            "in_phase": self.in_phase,
            "phase_limit": self.phase_limit,
            "after_deadline": self.late,
        }

    def exhausted(self, team: str) -> str:
        if self.in_phase is not None and self.in_phase <= 0:
            return (
                f"team {team!r} has used its {self.phase_limit} uploads of phase {self.phase!r}; "
                "no more in this phase"
            )
        return (
            f"team {team!r} has used its {self.daily_limit} submissions for "
            f"{utc_day(self.resets - 1)} (UTC); try again after {iso(self.resets)}"
        )


def _next_midnight(now: float) -> float:
    day = time.gmtime(now)
    return float(cal_module.timegm((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0)) + 86400)


def _counts(
    conn: Connection, team_id: int, policy: Policy, day: str, phase: str | None
) -> tuple[int, int]:
    """The team's uploads counted today and, when ``phase`` is given, in that phase: one
    aggregate over the team's rows (refusals in the same statement when they count), so a
    status read pays one round trip for its quota, not one per figure."""
    query, n_today = _counts_query(phase is not None, policy.count_refused)
    found = [
        int(n or 0)
        for n in conn.execute(query, {"team": team_id, "day": day, "phase": phase}).one()
    ]
    return sum(found[:n_today]), sum(found[n_today:])


@functools.cache
def _counts_query(in_phase: bool, count_refused: bool) -> tuple[sa.Select[Any], int]:
    """:func:`_counts`' statement for one shape, built once; how many of its figures are today's."""
    team, day, phase = sa.bindparam("team"), sa.bindparam("day"), sa.bindparam("phase")
    rows: Any = submissions
    if in_phase:  # an upload has one entry at most: the join never changes the count
        rows = submissions.outerjoin(entries, entries.c.submission_id == submissions.c.id)
    today = [_count_if(submissions.c.day == day)]
    phased = [_count_if(entries.c.phase == phase)] if in_phase else []
    if count_refused:
        today.append(_refused(team, refusals.c.day == day))
        phased += [_refused(team, refusals.c.phase == phase)] if in_phase else []
    query = sa.select(*today, *phased).select_from(rows).where(submissions.c.team_id == team)
    if not count_refused:
        query = query.where(submissions.c.state.not_in(UNCOUNTED))
    return query, len(today)


def _count_if(condition: Any) -> Any:
    return sa.func.sum(sa.case((condition, 1), else_=0))  # portable; FILTER needs SQLite 3.30


def _refused(team: Any, *where: Any) -> sa.ScalarSelect[Any]:
    query = sa.select(sa.func.count()).where(refusals.c.team_id == team, *where)
    return query.scalar_subquery()


def remaining(conn: Connection, team_id: int, policy: Policy, cal: Calendar) -> Remaining:
    day = utc_day(cal.now)
    current = cal.current
    daily = policy.daily_limit
    if current is not None and current.daily_limit is not None:
        daily = current.daily_limit
    capped = current is not None and current.phase_limit is not None
    used, in_phase = _counts(conn, team_id, policy, day, current.name if capped else None)
    out = Remaining(
        max(0, daily - used),
        daily,
        _next_midnight(cal.now),
        late=cal.past_deadline and current is None,
    )
    if current is None or current.phase_limit is None:
        return replace(out, phase=None if current is None else current.name)
    left = max(0, current.phase_limit - in_phase)
    return replace(out, phase=current.name, in_phase=left, phase_limit=current.phase_limit)


def open_for(cal: Calendar) -> tuple[str | None, bool]:
    """``(phase, late)`` of an upload made now; raises :class:`Closed` when none is accepted."""
    if not cal.defined:
        return None, False
    current = cal.current
    if current is not None:
        return current.name, False
    final = cal.final
    if cal.past_deadline and final is not None and final.late and cal.upcoming is None:
        return None, True
    raise Closed(cal.closed_message())


@dataclass
class Admission:
    """Passed to :func:`searchtome.service.store.enqueue`: checks and records in its transaction."""

    team: Team
    policy: Policy
    phase: str | None = None
    late: bool = False
    left: Remaining | None = None

    def take(self, conn: Connection) -> None:
        conn.execute(sa.select(teams.c.id).where(teams.c.id == self.team.id).with_for_update())
        cal = calendar(conn)
        left = remaining(conn, self.team.id, self.policy, cal)
        try:
            self.phase, self.late = open_for(cal)
        except Closed as exc:
            raise Closed(str(exc), left) from None
        if left.left <= 0:
            raise OutOfQuota(left.exhausted(self.team.name), left)
        self.left = _one_less(left)

    def record(self, conn: Connection, submission_id: int) -> None:
        conn.execute(
            entries.insert().values(submission_id=submission_id, phase=self.phase, late=self.late)
        )


def _one_less(left: Remaining) -> Remaining:
    in_phase = None if left.in_phase is None else left.in_phase - 1
    return replace(left, today=left.today - 1, in_phase=in_phase)


def check_now(engine: Engine, team: Team, policy: Policy) -> Remaining:
    """Before reading an upload: refuse at once when closed or out of quota (not atomic;
    :meth:`Admission.take` decides)."""
    with engine.connect() as conn:
        cal = calendar(conn)
        left = remaining(conn, team.id, policy, cal)
        try:
            open_for(cal)
        except Closed as exc:
            raise Closed(str(exc), left) from None
    if left.left <= 0:
        raise OutOfQuota(left.exhausted(team.name), left)
    return left


def count_refusal(engine: Engine, team: Team, policy: Policy) -> Remaining:
    """An upload the validator refused: counted when the organiser says so; what is left."""
    with write(engine) as conn:
        cal = calendar(conn)
        if policy.count_refused:
            current = cal.current
            conn.execute(
                refusals.insert().values(
                    team_id=team.id,
                    day=utc_day(cal.now),
                    phase=None if current is None else current.name,
                    at=cal.now,
                )
            )
        return remaining(conn, team.id, policy, cal)


def team_remaining(engine: Engine, team: Team, policy: Policy) -> Remaining:
    with engine.connect() as conn:
        return remaining(conn, team.id, policy, calendar(conn))
