"""Competition phases: dated windows in which uploads are accepted, and the deadline they set.

Phases live in the database (``server phase`` writes them), so a change applies to running
servers at once. With no phase defined the server is open, as before phases existed. The end of
the final phase is the deadline: the private board is frozen there (nothing uploaded later
reaches it, final marks stop changing). The organiser may let the final phase score late uploads
for a separate, marked "after the deadline" table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.errors import SearchTomeError
from searchtome.service.db import write
from searchtome.service.kinds import Visibility
from searchtome.service.tables import phases


@dataclass(frozen=True)
class Phase:
    name: str
    start: float  # UTC seconds
    end: float
    final: bool = False
    visibility: Visibility = Visibility.SHOWN
    daily_limit: int | None = None  # None: the server's --daily-limit
    phase_limit: int | None = None  # uploads per team in the whole phase; None: no cap
    late: bool = False  # final phase: score uploads after the deadline for a separate table

    def is_open(self, now: float) -> bool:
        return self.start <= now < self.end

    def shows_scores(self, now: float) -> bool:
        if self.visibility is Visibility.SHOWN_AT_END:
            return now >= self.end
        return self.visibility is Visibility.SHOWN


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def parse_time(text: str, option: str) -> float:
    """An ISO 8601 date or time; without an offset it is read as UTC."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SearchTomeError(
            f"{option} {text!r}: not an ISO 8601 time; write e.g. 2027-03-01T12:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def check(phase: Phase) -> None:
    if not phase.name or len(phase.name) > 64 or not phase.name.isprintable():
        raise SearchTomeError(f"phase name {phase.name!r}: use 1-64 printable characters")
    if phase.end <= phase.start:
        raise SearchTomeError(
            f"phase {phase.name!r}: --end {iso(phase.end)} is not after --start "
            f"{iso(phase.start)}; give an end later than the start"
        )
    for limit, option in ((phase.daily_limit, "--daily-limit"), (phase.phase_limit, "--limit")):
        if limit is not None and limit < 0:
            raise SearchTomeError(f"phase {phase.name!r}: {option} {limit}: must be 0 or more")
    if phase.late and not phase.final:
        raise SearchTomeError(
            f"phase {phase.name!r}: --allow-late needs --final (late means after the deadline)"
        )


def load_phases(conn: Connection) -> list[Phase]:
    rows = conn.execute(sa.select(phases).order_by(phases.c.start_at, phases.c.name))
    return [
        Phase(
            r.name,
            r.start_at,
            r.end_at,
            bool(r.final),
            Visibility(r.visibility),
            r.daily_limit,
            r.phase_limit,
            bool(r.late),
        )
        for r in rows
    ]


def save_phase(engine: Engine, phase: Phase) -> bool:
    """Add or replace one phase; ``True`` when it was new. One final phase at most."""
    check(phase)
    with write(engine) as conn:
        existing = load_phases(conn)
        other_final = [p.name for p in existing if p.final and p.name != phase.name]
        if phase.final and other_final:
            raise SearchTomeError(
                f"phase {other_final[0]!r} is already final; change it first (server phase "
                f"... {other_final[0]} without --final), then make {phase.name!r} final"
            )
        clash = [
            p.name
            for p in existing
            if p.name != phase.name and p.start < phase.end and phase.start < p.end
        ]
        if clash:
            raise SearchTomeError(
                f"phase {phase.name!r} overlaps phase {clash[0]!r}; phases may not overlap"
            )
        new = phase.name not in {p.name for p in existing}
        conn.execute(phases.delete().where(phases.c.name == phase.name))
        conn.execute(
            phases.insert().values(
                name=phase.name,
                start_at=phase.start,
                end_at=phase.end,
                final=phase.final,
                visibility=phase.visibility.value,
                daily_limit=phase.daily_limit,
                phase_limit=phase.phase_limit,
                late=phase.late,
                changed_at=time.time(),
            )
        )
    return new


@dataclass(frozen=True)
class Calendar:
    """The phases at one moment: what is open, what opens next, whether the deadline passed."""

    phases: tuple[Phase, ...]
    now: float

    @property
    def defined(self) -> bool:
        return bool(self.phases)

    @property
    def current(self) -> Phase | None:
        return next((p for p in self.phases if p.is_open(self.now)), None)

    @property
    def upcoming(self) -> Phase | None:
        return next((p for p in self.phases if p.start > self.now), None)

    @property
    def final(self) -> Phase | None:
        return next((p for p in self.phases if p.final), None)

    @property
    def deadline(self) -> float | None:
        final = self.final
        return final.end if final else None

    @property
    def past_deadline(self) -> bool:
        deadline = self.deadline
        return deadline is not None and self.now >= deadline

    def named(self, name: str | None) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def closed_message(self) -> str:
        """Why an upload is refused now, and when to come back."""
        nxt = self.upcoming
        if self.past_deadline and nxt is None:
            return (
                f"the competition ended at {iso(self.deadline or 0)} (UTC) and late uploads are "
                "not scored; nothing more can be uploaded"
            )
        if nxt is None:
            return "no phase is open and none is planned; ask the organisers"
        return (
            f"no phase is open now; the next, {nxt.name!r}, opens at {iso(nxt.start)} (UTC); "
            "upload then"
        )

    def summary(self) -> dict[str, object]:
        """The calendar as the API and the page show it."""
        current = self.current
        return {
            "current": None if current is None else current.name,
            "deadline": None if self.deadline is None else iso(self.deadline),
            "phases": [
                {
                    "name": p.name,
                    "start": iso(p.start),
                    "end": iso(p.end),
                    "final": p.final,
                    "public_scores": p.visibility.value,
                    "late_uploads_scored": p.late,
                }
                for p in self.phases
            ],
        }


def calendar(conn: Connection, now: float | None = None) -> Calendar:
    return Calendar(tuple(load_phases(conn)), time.time() if now is None else now)
