"""The scoring service's JSON replies, typed on the document kernel (:mod:`searchtome.document`).

What ``/api/...`` answers, as :class:`~searchtome.document.Record` types: the client
(:mod:`searchtome.service.client`) reads every reply through them, strictly (the server is
searchtome's), keeping keys a newer server adds. ``tests/service/test_replies.py`` reads the
live server's replies through the same types and checks that nothing is left over, so the
types and the app cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from searchtome.document import FieldError, Format, Record, document_error, read_record

R = TypeVar("R", bound=Record)
# /api/leaderboard carries "format": searchtome-service-leaderboard-v1.
BOARD = Format("searchtome-service-leaderboard", 1)
ADVICE = "is the server a searchtome of another version?"


class JobState(StrEnum):
    """Where an upload is: waiting, being scored, or done (one of the last three)."""

    QUEUED = "queued"
    SCORING = "scoring"
    SCORED = "scored"
    REJECTED = "rejected"
    FAILED = "failed"


DONE = (JobState.SCORED, JobState.REJECTED, JobState.FAILED)


@dataclass(frozen=True, kw_only=True)
class Remaining(Record):
    """What the team may still upload (the upload replies and refusals carry it)."""

    today: int
    daily_limit: int
    resets: str  # UTC, ISO 8601: when today's count starts again
    phase: str | None = None
    in_phase: int | None = None  # None: the phase has no cap of its own
    phase_limit: int | None = None
    after_deadline: bool = False


@dataclass(frozen=True, kw_only=True)
class Refusal(Record):
    """Every 4xx and 5xx reply: one line saying why (an upload's also says what is left)."""

    error: str
    remaining: Remaining | None = None


@dataclass(frozen=True, kw_only=True)
class Accepted(Record):
    """``POST /api/submissions`` (202): the upload is queued."""

    id: str
    state: JobState
    url: str  # where its state is: GET it
    phase: str | None = None  # the phase it came in; None while no phase is defined
    after_deadline: bool = False  # scored for the separate after-the-deadline table only
    remaining: Remaining | None = None


@dataclass(frozen=True, kw_only=True)
class ScopeScores(Record):
    """One scope's aggregates of one run."""

    n_queries: int
    aggregate: Mapping[str, float]


@dataclass(frozen=True, kw_only=True)
class Ladder(Record):
    """Ladder mode: whether the run beat the team's best shown run, and which run it shows."""

    improved: bool
    shows: str
    rule: str


@dataclass(frozen=True, kw_only=True)
class OwnRun(Record):
    """One upload of the asking team, under the competition's score mode."""

    id: str
    team: str
    system: str
    state: JobState
    final: bool
    submitted: str  # UTC, ISO 8601
    error: str | None = None  # why it was rejected or failed
    scores: Mapping[str, ScopeScores] | None = None  # scored: "public", and "private" once revealed
    phase: str | None = None
    public_hidden: str | None = None  # why its public scores are not shown (yet)
    private_note: str | None = None  # uploaded after the freeze: never on the private board
    ladder: Ladder | None = None
    hidden: bool = False  # hidden from the board by the team


@dataclass(frozen=True, kw_only=True)
class SubmissionState(OwnRun):
    """``GET /api/submissions/{id}``: one upload of the asking team, and the quota left."""

    remaining: Remaining | None = None


@dataclass(frozen=True, kw_only=True)
class OwnRuns(Record):
    """``GET /api/submissions``: the asking team, its uploads (newest first), the quota left."""

    team: str
    runs: tuple[OwnRun, ...]
    remaining: Remaining | None = None


@dataclass(frozen=True, kw_only=True)
class FinalMark(Record):
    """``POST /api/submissions/{id}/final``: the run's mark as the team's final run."""

    id: str
    final: bool


@dataclass(frozen=True, kw_only=True)
class Delta(Record):
    """A run against the top run on one measure: difference, interval, adjusted p."""

    diff: float
    ci_low: float
    ci_high: float
    p_adjusted: float
    significant: bool


@dataclass(frozen=True, kw_only=True)
class BoardRow(Record):
    rank: int | None  # None: a baseline (shown in place, outside the ranks)
    id: str
    team: str
    system: str
    submitted: str
    final: bool
    aggregate: Mapping[str, float]
    per_domain: Mapping[str, Mapping[str, float]]
    delta_to_top: Mapping[str, Delta]  # none for the top run itself
    meta: Mapping[str, Any]  # the meta.json fields a page shows
    baseline: bool = False  # the organisers' baseline (`server add-team --baseline`)


@dataclass(frozen=True, kw_only=True)
class ScopeBoard(Record):
    """One scope's table (public, or private once revealed)."""

    n_queries: int
    rows: tuple[BoardRow, ...]
    domains: tuple[str, ...] | None = None  # absent while the scope has no run


@dataclass(frozen=True, kw_only=True)
class LateBoard(ScopeBoard):
    """The runs uploaded after the deadline: public part only, outside the competition."""

    note: str


@dataclass(frozen=True, kw_only=True)
class PhaseInfo(Record):
    name: str
    start: str  # UTC, ISO 8601
    end: str
    final: bool
    public_scores: str  # shown | hidden | shown-at-end
    late_uploads_scored: bool


@dataclass(frozen=True, kw_only=True)
class Calendar(Record):
    """The competition's phases: the open one, the deadline (the final phase's end)."""

    current: str | None
    deadline: str | None
    phases: tuple[PhaseInfo, ...]


@dataclass(frozen=True, kw_only=True)
class ServiceBoard(Record):
    """``GET /api/leaderboard``."""

    split: str
    measures: tuple[str, ...]  # the rounded and ladder modes leave the count measures out
    aggregate: str  # how the measures are averaged, in words
    test: str  # the significance test, in words
    private_fraction: float
    revealed: bool
    public: ScopeBoard
    private: ScopeBoard | None = None
    one_row_per_team: bool = False
    public_scores: str = "exact"  # exact | rounded | ladder
    calendar: Calendar | None = None
    frozen_at: str | None = None  # UTC, ISO 8601: when the private board stopped taking runs
    after_deadline: LateBoard | None = None


def read_reply(cls: type[R], body: Any, where: str) -> R:
    """A reply typed as ``cls``; one error line naming the request and the field."""
    try:
        if cls is ServiceBoard:
            if not isinstance(body, Mapping):
                raise FieldError("", "expected a JSON object")
            body, _ = BOARD.upgrade(body)
        return read_record(cls, body, "")
    except FieldError as bad:
        raise document_error(f"{where}: reply", bad, ADVICE) from None
