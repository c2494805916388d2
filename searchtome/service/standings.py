"""The competition's view of the stored runs: phases, the frozen private board, late runs, the
Ladder's releases and the public-score mode (:mod:`searchtome.service.public`).

The private board is frozen at the end of the final phase, or at the first ``server reveal``
if that comes first: a run uploaded later never reaches it, and final marks stop changing.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from searchtome.service import store
from searchtome.service.board import (
    Run,
    Scopes,
    TestMemo,
    final_runs,
    leaderboard,
    run_scores,
    scope_board,
)
from searchtome.service.checks import unpack_scores
from searchtome.service.db import flags, submissions, teams, write
from searchtome.service.home import ServerSettings
from searchtome.service.kinds import ScoreMode, Visibility
from searchtome.service.phases import Calendar, calendar, iso
from searchtome.service.public import LADDER_MEASURE, ladder_improves, macro_weights, public_view
from searchtome.service.tables import entries, phases, releases

FROZEN_AT = "frozen_at"  # flag: when the first `server reveal` ran
SHOWN = submissions.alias("shown")  # the run the Ladder shows (built once: an alias costs 0.5 ms)


@dataclass(frozen=True)
class Entry:
    phase: str | None = None
    late: bool = False
    shown: str | None = None  # ladder: the public id of the run this one shows
    released_at: float = 0.0


@dataclass(frozen=True)
class Context:
    """What the views need from the database, read at one moment."""

    cal: Calendar
    frozen: float | None
    entries: dict[str, Entry]

    def entry(self, key: str) -> Entry:
        return self.entries.get(key, Entry())

    def in_time(self, run: Run) -> bool:
        """Part of the competition: not late, uploaded before the freeze."""
        return not self.entry(run.key).late and (
            self.frozen is None or run.created_at < self.frozen
        )

    def visible(self, run: Run) -> bool:
        phase = self.cal.named(self.entry(run.key).phase)
        return phase is None or phase.shows_scores(self.cal.now)

    def hidden_note(self, run: Run) -> str | None:
        phase = self.cal.named(self.entry(run.key).phase)
        if phase is None or phase.shows_scores(self.cal.now):
            return None
        if phase.visibility is Visibility.HIDDEN:
            return f"public scores of phase {phase.name!r} are not shown"
        return f"public scores of phase {phase.name!r} are shown at its end, {iso(phase.end)}"


def frozen_at(conn: Connection, cal: Calendar) -> float | None:
    return _frozen(cal, store.get_flag(conn, FROZEN_AT))


def _frozen(cal: Calendar, revealed: str | None) -> float | None:
    times = [t for t in (cal.deadline, float(revealed) if revealed else None) if t is not None]
    return min(times) if times else None


# A run's phase entry, its Ladder release and the run that release shows (read_context and
# read_status read them alike).
_ENTRY_COLUMNS = (
    entries.c.phase,
    entries.c.late,
    SHOWN.c.public_id.label("shown"),
    releases.c.released_at,
)


def _with_entries(rows: Any) -> Any:
    """``rows`` (``submissions``, or a join from it) with the tables :data:`_ENTRY_COLUMNS` read."""
    return (
        rows.outerjoin(entries, entries.c.submission_id == submissions.c.id)
        .outerjoin(releases, releases.c.submission_id == submissions.c.id)
        .outerjoin(SHOWN, SHOWN.c.id == releases.c.shown_id)
    )


def _entry(row: Any) -> Entry:
    return Entry(row.phase, bool(row.late), row.shown, row.released_at or 0.0)


def read_context(
    conn: Connection, now: float | None = None, only: sa.ColumnElement[bool] | None = None
) -> Context:
    """The entries of every scored run, or of those ``only`` selects (a team's, one run's: a
    status read then costs the same with a thousand runs stored as with ten)."""
    cal = calendar(conn, now)
    rows = conn.execute(
        sa.select(submissions.c.public_id, *_ENTRY_COLUMNS)
        .select_from(_with_entries(submissions))
        .where(submissions.c.state == "scored", *(() if only is None else (only,)))
    )
    found = {r.public_id: _entry(r) for r in rows}
    return Context(cal, frozen_at(conn, cal), found)


@dataclass(frozen=True)
class Status:
    """One run as a status read shows it: its row without the scores (``shown_scored_at``: of
    the run the Ladder shows), its context and whether the results are revealed."""

    row: Any
    ctx: Context
    revealed: bool


def _flag(name: str) -> sa.ScalarSelect[Any]:
    return sa.select(flags.c.value).where(flags.c.name == name).scalar_subquery()


@functools.cache
def _status_query() -> sa.Select[Any]:
    """Built once, bound per call (building it took a third of a status read's CPU)."""
    return (
        sa.select(
            *store.STATUS_COLUMNS,
            *_ENTRY_COLUMNS,
            SHOWN.c.scored_at.label("shown_scored_at"),
            _flag(store.REVEALED).label("revealed"),
            _flag(FROZEN_AT).label("frozen"),
        )
        .select_from(_with_entries(submissions.join(teams, teams.c.id == submissions.c.team_id)))
        .where(submissions.c.public_id == sa.bindparam("public_id"))
    )


def read_status(conn: Connection, public_id: str, now: float | None = None) -> Status | None:
    """:func:`read_context` of one run with its row and the flags it needs, in two statements
    (the run joined with its entry, release and flags; the phases), where reading them apart
    took six; ``None`` when no run has that id."""
    row = conn.execute(_status_query(), {"public_id": public_id}).first()
    if row is None:
        return None
    cal = calendar(conn, now)
    found = {}
    if row.state == "scored":  # as read_context: only scored runs have an entry to show
        found[row.public_id] = _entry(row)
    return Status(row, Context(cal, _frozen(cal, row.frozen), found), row.revealed == "yes")


def state_key(conn: Connection, now: float) -> tuple[Any, ...]:
    """Changes whenever the competition's view would: phases (which is open, which show scores
    now), the freeze, new Ladder releases."""
    cal = calendar(conn, now)
    changed = conn.execute(sa.select(sa.func.max(phases.c.changed_at))).scalar()
    released = conn.execute(sa.select(sa.func.count(), sa.func.max(releases.c.released_at))).first()
    shows = tuple((p.is_open(now), p.shows_scores(now)) for p in cal.phases)
    return (changed, shows, cal.past_deadline, frozen_at(conn, cal), *tuple(released or ()))


# -- the Ladder ----------------------------------------------------------------------------------


def _values(conn: Connection, submission_id: int, mask: np.ndarray) -> np.ndarray:
    blob = conn.execute(sa.select(submissions.c.scores).where(submissions.c.id == submission_id))
    return np.asarray(unpack_scores(blob.scalar_one())[LADDER_MEASURE], dtype=np.float64)[mask]


def _current_best(conn: Connection, team_id: int) -> int | None:
    return conn.execute(
        sa.select(releases.c.shown_id)
        .where(releases.c.team_id == team_id)
        .order_by(releases.c.released_at.desc(), releases.c.submission_id.desc())
        .limit(1)
    ).scalar()


def settle(engine: Engine, scopes: Scopes, margin: float) -> int:
    """Decide, in upload order, what every scored but unreleased run shows; how many."""
    pending = (
        sa.select(submissions.c.id, submissions.c.team_id)
        .outerjoin(releases, releases.c.submission_id == submissions.c.id)
        .where(submissions.c.state == "scored", releases.c.submission_id.is_(None))
        .order_by(submissions.c.id)
    )
    with engine.connect() as conn:
        if conn.execute(pending.limit(1)).first() is None:
            return 0
    mask = ~scopes.private
    weights = macro_weights(scopes.domains[mask])
    now = time.time()
    try:
        with write(engine) as conn:
            rows = list(conn.execute(pending))
            for i, row in enumerate(rows):
                best = _current_best(conn, row.team_id)
                new = _values(conn, row.id, mask)
                old = None if best is None else _values(conn, best, mask)
                shown = row.id if ladder_improves(old, new, weights, margin) else best
                conn.execute(
                    releases.insert().values(
                        submission_id=row.id,
                        team_id=row.team_id,
                        shown_id=shown,
                        released_at=now + i * 1e-6,
                    )
                )
    except sa.exc.IntegrityError:  # another web process released them first: theirs stand
        return 0
    return len(rows)


def forget_releases(conn: Connection, team_ids: set[int]) -> None:
    """After a rescore: the teams' runs are released again, in upload order, on the new scores."""
    conn.execute(releases.delete().where(releases.c.team_id.in_(sorted(team_ids))))


def _ladder_best(runs: Sequence[Run], ctx: Context) -> list[Run]:
    latest: dict[str, tuple[float, str]] = {}
    for r in runs:
        e = ctx.entry(r.key)
        if e.shown and e.released_at >= latest.get(r.team, (-1.0, ""))[0]:
            latest[r.team] = (e.released_at, e.shown)
    keep = {shown for _, shown in latest.values()}
    return [r for r in runs if r.key in keep]


# -- views ---------------------------------------------------------------------------------------


def competition_board(
    runs: Sequence[Run],
    ctx: Context,
    scopes: Scopes,
    settings: ServerSettings,
    revealed: bool,
    memo: TestMemo | None = None,
) -> dict[str, Any]:
    """``/api/leaderboard``: public scope (visible runs; each team's best in ladder mode), the
    frozen private scope once revealed, and the runs uploaded after the deadline apart.
    ``memo``: the tests of the board before, reused where still valid (:class:`TestMemo`)."""
    memo = memo if memo is not None else TestMemo()
    mode = ScoreMode(settings.public_scores)
    timely = [r for r in runs if ctx.in_time(r)]
    late = [r for r in runs if not ctx.in_time(r) and ctx.visible(r)]
    public = [r for r in timely if ctx.visible(r)]
    if mode is ScoreMode.LADDER:
        public = _ladder_best(public, ctx)
    out = leaderboard(public, scopes, settings, revealed=False, memo=memo)
    out["revealed"] = revealed
    out["public_scores"] = mode.value
    out["calendar"] = ctx.cal.summary()
    out["frozen_at"] = None if ctx.frozen is None else iso(ctx.frozen)
    if revealed and scopes.private.any():
        finals = final_runs(timely, scopes)
        out["private"] = scope_board(finals, scopes, scopes.private, settings, memo, "private")
    if late:
        out["after_deadline"] = {
            "note": "uploaded after the deadline: scored on the public part only, outside the "
            "competition",
            **scope_board(late, scopes, ~scopes.private, settings, memo, "after_deadline"),
        }
    return public_view(out, mode)


def run_view(
    run: Run,
    shown: Run | None,
    ctx: Context,
    scopes: Scopes,
    settings: ServerSettings,
    revealed: bool,
) -> dict[str, Any]:
    """A run's ``scores`` in ``GET /api/submissions/{id}`` (``shown``: the Ladder's choice)."""
    mode = ScoreMode(settings.public_scores)
    private_ok = revealed and ctx.in_time(run)
    scores = run_scores(run, scopes, private_ok)
    out: dict[str, Any] = {}
    note = ctx.hidden_note(run)
    if note:
        scores.pop("public", None)
        out["public_hidden"] = note
    elif mode is ScoreMode.LADDER and shown is not None and "public" in scores:
        scores["public"] = run_scores(shown, scopes, False)["public"]
        out["ladder"] = {
            "improved": shown.key == run.key,
            "shows": shown.key,
            "rule": f"a run shows its own public scores only when its R@1 beats the team's best "
            f"shown run by {settings.ladder_margin:g} standard errors",
        }
    if revealed and not private_ok:
        out["private_note"] = "uploaded after the private board was frozen: never scored on it"
    out["scores"] = public_view(scores, mode)
    return out
