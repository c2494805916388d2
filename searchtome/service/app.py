"""The HTTP side: a Starlette application (run under uvicorn by ``searchtome server run``).

Starlette rather than FastAPI: four routes need no schema generation or dependency injection,
and the upload must be counted while it streams (a wrapped ASGI ``receive``), which FastAPI's
``UploadFile`` parameters would read in full before our code runs.

Rules kept on every route: no cookies and no admin action (admin is the CLI on the server host);
every response carries a strict Content-Security-Policy; every error is one line of JSON
``{"error": "..."}``; tokens are compared as hashes in constant time; per-address request rate
limits; the upload is refused as soon as it passes the size cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy.engine import Connection
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from searchtome.leaderboard.html_assets import CSS as LEADERBOARD_CSS
from searchtome.leaderboard.text import points
from searchtome.service import admission, cache, memory, mine, page, standings, store
from searchtome.service.board import Run, Scopes, runs_from_rows
from searchtome.service.boardcsv import board_csv
from searchtome.service.checks import predictions_name, quick_check, system_name
from searchtome.service.db import (
    check_version,
    is_busy,
    is_full,
    make_engine,
    one_line,
    read,
    submissions,
)
from searchtome.service.guard import (
    BodyPlaces,
    Clock,
    RevokedTeams,
    SmallBodies,
    SpooledParts,
    TeamSlots,
    clocked,
)
from searchtome.service.health import health
from searchtome.service.home import Home, open_home
from searchtome.service.kinds import ScoreMode
from searchtome.service.phases import calendar, iso, load_phases
from searchtome.service.refusal import Refused, error
from searchtome.service.shown import visible
from searchtome.service.worker import limits_of

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
VIEWS_KEPT = 4096  # runs whose shown scores a web process keeps (a few KB each)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
BOARD_CSS = LEADERBOARD_CSS + (HERE / "static" / "app.css").read_text(encoding="utf-8")
MAX_META_BYTES = 1 << 20
CHUNK = 1 << 16


class SecurityHeaders:
    """ASGI middleware: the headers above on every response, and never a ``Set-Cookie``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"set-cookie"]
                message = {**message, "headers": headers + SECURITY_HEADERS}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class RateLimit:
    """At most ``per_minute`` requests per client address in any 60-second window."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.seen: dict[str, deque[float]] = {}

    def allow(self, who: str) -> bool:
        now = time.monotonic()
        times = self.seen.setdefault(who, deque())
        while times and times[0] < now - 60:
            times.popleft()
        if len(times) >= self.per_minute:
            return False
        times.append(now)
        if len(self.seen) > 100_000:  # forget idle addresses rather than grow without bound
            self.seen = {k: v for k, v in self.seen.items() if v and v[-1] > now - 60}
        return True


class Service:
    """The state one web process holds: engine, public half, query scopes, the cached board."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.settings = home.settings
        self.engine = make_engine(self.settings.db, self.settings.busy_timeout_ms)
        check_version(self.engine, str(home.root))
        self.public = load(home.public)
        self.scopes = Scopes.of(self.public, self.settings)
        self.limits = limits_of(home)
        self.policy = admission.Policy(self.settings.daily_limit, self.settings.count_refused)
        self.rate = RateLimit(self.settings.requests_per_minute)
        self.uploads = asyncio.Semaphore(self.settings.upload_slots)  # whole uploads in memory
        self.bodies = BodyPlaces(self.settings.upload_bodies, self.settings.upload_body_wait)
        self.team_slots = TeamSlots(self.settings.team_uploads)
        self.revoked = RevokedTeams(self.engine)
        self.board_lock = asyncio.Lock()
        self.board: tuple[str, str] | None = None  # (key, JSON) of the stored board
        self.page: tuple[Any, str] | None = None  # (board key and phase status, HTML)
        self.views: dict[tuple[Any, ...], dict[str, Any]] = {}  # runs' shown scores (_shown_view)
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True)
        )
        self.templates.filters.update(
            pct=page.pct, signed=points, ci_scale=page.ci_scale, ci_glyph=page.ci_glyph
        )

    # -- helpers --

    def team_of(self, request: Request, conn: Connection | None = None) -> store.Team:
        """The request's team, read on ``conn`` when given (a status read's one connection)."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "missing token; send the header 'Authorization: Bearer TOKEN'")
        if conn is None:
            with self.engine.connect() as conn:
                return self.team_of(request, conn)
        team = store.authenticate(conn, token.strip())
        if team is None:
            raise Refused(401, "unknown or revoked token; ask the organisers for a new one")
        return team

    def phases(self) -> list[page.PhaseView]:
        """The competition's phases as the page shows them; none defined means always open."""
        with self.engine.connect() as conn:
            defined = load_phases(conn)
        return [page.PhaseView(p.name, p.start, p.end, p.final) for p in defined]

    def _board(self) -> tuple[str, str]:
        """The stored board's key and JSON text; computed here only when none is stored yet."""
        with self.engine.connect() as conn:
            key = cache.stored_key(conn)
            if key is not None and self.board is not None and self.board[0] == key:
                return self.board
            found = cache.stored(conn)
        if found is None:
            found = cache.compute(self.engine, self.scopes, self.settings)
            try:
                cache.save(self.engine, found)
            except sa.exc.OperationalError as exc:  # a locked or full database: serve it anyway
                log.warning("could not store the leaderboard: %s", one_line(exc))
        self.board = (found.key, found.document)
        return self.board

    async def current_board(self) -> str:
        """The leaderboard JSON as stored (milliseconds: nothing is computed per request)."""
        async with self.board_lock:
            return (await run_in_threadpool(self._board))[1]

    def _page(self) -> str:
        """The page, rendered once per stored board and phase status (the phases' dates and
        the open/upcoming phase change the banner without changing the board)."""
        key, document = self._board()
        phases, now = self.phases(), time.time()
        status = page.phase_status(phases, now)
        view = (key, tuple(phases), status.current, status.upcoming, status.over)
        if self.page is None or self.page[0] != view:
            context = page.page_context(
                self.settings, self.public.manifest.name or "SearchTome", json.loads(document),
                phases=phases, now=now,
            )  # fmt: skip
            self.page = (view, self.templates.get_template("index.html").render(**context))
        return self.page[1]

    async def current_page(self) -> str:
        async with self.board_lock:
            return await run_in_threadpool(self._page)


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@contextlib.asynccontextmanager
async def _received(service: Service, request: Request) -> AsyncIterator[FormData]:
    """The multipart body, received in full (each file part in a temporary file past
    ``guard.SPOOL_BYTES``, closed on the way out); refused the moment it passes the cap."""
    cap = service.settings.upload_max_bytes
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > cap:
        raise Refused(413, f"upload of {int(length):,} bytes exceeds the {cap:,}-byte limit")
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise Refused(415, "send multipart/form-data with the fields 'predictions' and 'meta'")
    received = 0
    inner = request.receive

    async def counting_receive() -> Any:
        nonlocal received
        message = await inner()
        received += len(message.get("body", b""))
        if received > cap:
            raise Refused(
                413, f"upload exceeds the {cap:,}-byte limit; compress it or cut rankings"
            )
        return message

    counted = Request(request.scope, counting_receive)
    parts = SpooledParts(
        counted.headers, counted.stream(), max_files=2, max_fields=2, max_part_size=MAX_META_BYTES
    )
    try:
        form = await parts.parse()
    except Refused:
        raise
    except Exception as exc:
        raise Refused(400, f"unreadable multipart body ({exc})") from None
    try:
        yield form
    finally:
        await form.close()


async def _read_upload(service: Service, form: FormData) -> tuple[bytes, bytes, str]:
    """The received body's predictions bytes, meta bytes and file name, read into memory."""
    preds, meta = form.get("predictions"), form.get("meta")
    if not isinstance(preds, UploadFile):
        raise Refused(400, "missing the file field 'predictions'")
    if meta is None:
        raise Refused(400, "missing the field 'meta' (the submission's meta.json)")
    meta_bytes = (
        await meta.read(MAX_META_BYTES + 1) if isinstance(meta, UploadFile) else meta.encode()
    )
    if len(meta_bytes) > MAX_META_BYTES:
        raise Refused(413, f"meta exceeds {MAX_META_BYTES:,} bytes")
    data = await preds.read(service.settings.upload_max_bytes + 1)
    return data, meta_bytes, predictions_name(preds.filename, data[:2])


def _clocked_body(service: Service, team: store.Team, receive: Any) -> Any:
    """The upload's ASGI receive, cut when too slow or when its team is revoked meanwhile."""
    s = service.settings
    clock = Clock(s.upload_timeout, s.upload_min_rate, s.upload_grace)

    async def revoked() -> str | None:
        if await service.revoked.contains(team.id):
            return f"team {team.name!r} was revoked during the upload; nothing was accepted"
        return None

    return clocked(receive, clock, revoked)


def _left(left: admission.Remaining | None) -> dict[str, Any] | None:
    return None if left is None else left.to_dict()


def _precheck(service: Service, team: store.Team) -> None:
    """Refuse before reading the body: no phase open, or no quota left."""
    try:
        admission.check_now(service.engine, team, service.policy)
    except admission.Closed as exc:
        raise Refused(403, str(exc), remaining=_left(exc.left)) from None
    except admission.OutOfQuota as exc:
        raise Refused(429, str(exc), remaining=_left(exc.left)) from None


def _check_and_enqueue(
    service: Service, team: store.Team, data: bytes, meta: bytes, name: str
) -> tuple[str, admission.Admission]:
    """The cheap checks, then the queue; the scoring worker validates the whole upload (a run
    it refuses is ``rejected``, and its quota slot counted as the organiser chose)."""
    problem = quick_check(meta, name, data, service.limits)
    if problem:
        left = admission.count_refusal(service.engine, team, service.policy)
        raise Refused(422, problem, remaining=left.to_dict())
    admit = admission.Admission(team, service.policy)
    try:
        public_id = store.enqueue(
            service.engine,
            team,
            system=system_name(meta),
            meta=meta.decode("utf-8"),
            predictions_name=name,
            predictions=data,
            admission=admit,
        )
        return public_id, admit
    except admission.Closed as exc:
        raise Refused(403, str(exc), remaining=_left(exc.left)) from None
    except admission.OutOfQuota as exc:
        raise Refused(429, str(exc), remaining=_left(exc.left)) from None
    except store.QuotaExceeded as exc:
        raise Refused(429, str(exc)) from None
    except store.Revoked as exc:
        raise Refused(403, str(exc)) from None
    except sa.exc.OperationalError as exc:
        if is_full(exc):
            raise Refused(
                507,
                f"the server's database is full ({one_line(exc)}); the upload was "
                "not accepted and nothing was counted; tell the organisers",
            ) from None
        if is_busy(exc):
            raise Refused(
                503,
                f"the server's database is busy ({one_line(exc)}); the upload was "
                "not accepted and nothing was counted; retry in a minute",
            ) from None
        raise


async def post_submission(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    await run_in_threadpool(_precheck, service, team)
    # The body arrives (at the client's pace, on disk past the spool) before an upload slot is
    # taken: a slot bounds only what holds the whole upload in memory and spends CPU.
    with service.team_slots.hold(team.id, team.name):
        async with service.bodies.hold():
            body = Request(request.scope, _clocked_body(service, team, request.receive))
            async with _received(service, body) as form, service.uploads:
                data, meta, name = await _read_upload(service, form)
                public_id, admit = await run_in_threadpool(
                    _check_and_enqueue, service, team, data, meta, name
                )
    log.info("upload %s accepted from team %s", public_id, team.name)
    reply = {"id": public_id, "state": "queued", "url": f"/api/submissions/{public_id}"}
    reply.update(phase=admit.phase, after_deadline=admit.late, remaining=_left(admit.left))
    return JSONResponse(reply, status_code=202)


def _run_json(
    service: Service,
    row: Any,
    shown: Any,
    ctx: standings.Context,
    revealed: bool,
    full: Callable[[], tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """One of the team's own runs as the API shows it, under the competition's score mode
    (``full``: see :func:`_shown_view`)."""
    out: dict[str, Any] = {
        "id": row.public_id,
        "team": row.team,
        "system": visible(row.system),
        "state": row.state,
        "final": bool(row.final),
        "submitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row.created_at)),
    }
    if row.error:
        out["error"] = row.error
    if row.state == "scored":
        out.update(_shown_view(service, row, shown, ctx, revealed, full))
    out["phase"] = ctx.entry(row.public_id).phase
    out["hidden"] = bool(row.hidden)  # the team hid it from the board (POST .../hidden)
    return out


def _shown_view(
    service: Service,
    row: Any,
    shown: Any,
    ctx: standings.Context,
    revealed: bool,
    full: Callable[[], tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """:func:`standings.run_view` of a scored run, kept per process: unpacking its scores costs
    more than the rest of a status poll. Kept under everything the view reads besides this
    process's settings: the run and the run the Ladder shows (each with its ``scored_at``, so a
    rescore is a new key), whether the run counts for the private board, its phase's note, and
    the reveal. ``full`` reads both rows with their scores when the view is not kept (a status
    read then fetches the scores only on a miss); without it ``row`` and ``shown`` carry them."""
    stub = Run(row.public_id, "", "", row.created_at, False, {}, {})
    key = (
        row.public_id,
        row.scored_at,
        None if shown is None else (shown.public_id, shown.scored_at),
        ctx.in_time(stub),
        ctx.hidden_note(stub),
        revealed,
    )
    view = service.views.get(key)
    if view is None:
        if full is not None:
            row, shown = full()
        run = runs_from_rows([row])[0]
        best = runs_from_rows([shown])[0] if shown is not None else None
        view = standings.run_view(run, best, ctx, service.scopes, service.settings, revealed)
        if len(service.views) >= VIEWS_KEPT:
            service.views.clear()
        service.views[key] = view
    return copy.deepcopy(view)


def _settle(service: Service) -> None:
    if service.settings.public_scores == ScoreMode.LADDER:
        standings.settle(service.engine, service.scopes, service.settings.ladder_margin)


class _Shown(NamedTuple):
    """The run the Ladder shows, as far as the kept view's key needs it."""

    public_id: str
    scored_at: float | None


def _describe(service: Service, request: Request, public_id: str) -> dict[str, Any]:
    """A status read on one connection (:func:`searchtome.service.db.read`): the token, the run
    with its entry and flags, the phases, the quota counts (four statements; the scores only
    when this process does not keep the run's view)."""
    with read(service.engine) as conn:
        team = service.team_of(request, conn)
        if service.settings.public_scores == ScoreMode.LADDER:
            conn.rollback()  # the read below must see the releases settle makes
            _settle(service)
        status = standings.read_status(conn, public_id)
        if status is None or status.row.team_id != team.id:
            raise Refused(404, f"no submission {public_id!r} of team {team.name!r}")
        row, ctx = status.row, status.ctx
        shown_id = ctx.entry(public_id).shown
        shown = _Shown(shown_id, row.shown_scored_at) if shown_id else None

        def full() -> tuple[Any, Any]:
            scored = store.submission_row(conn, public_id)
            if shown_id is None or shown_id == public_id:
                return scored, scored if shown_id else None
            return scored, store.submission_row(conn, shown_id)

        out = _run_json(service, row, shown, ctx, status.revealed, full)
        left = admission.remaining(conn, team.id, service.policy, ctx.cal)
    out["remaining"] = left.to_dict()
    return out


async def get_submission(request: Request) -> Response:
    service: Service = request.app.state.service
    body = await run_in_threadpool(_describe, service, request, request.path_params["public_id"])
    return JSONResponse(body)


def _final_flag(raw: bytes) -> bool:
    """``{"final": true}`` or ``{"final": false}``, nothing else (no default, no coercion)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict) or set(body) != {"final"} or not isinstance(body["final"], bool):
        raise Refused(400, 'send the JSON object {"final": true} or {"final": false}')
    return body["final"]


async def post_final(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    final = _final_flag(await request.body())
    public_id = request.path_params["public_id"]
    frozen = await run_in_threadpool(_frozen, service)
    if frozen is not None:
        raise Refused(
            403,
            f"final runs were frozen at {frozen} (UTC), at the deadline or the results' reveal; "
            "they can no longer change",
        )
    try:
        await run_in_threadpool(
            store.mark_final, service.engine, team, public_id, final, service.settings.max_final
        )
    except LookupError:
        raise Refused(404, f"no submission {public_id!r} of team {team.name!r}") from None
    except store.QuotaExceeded as exc:
        raise Refused(409, str(exc)) from None
    except SearchTomeError as exc:
        raise Refused(409, str(exc)) from None
    # The mark changes the board: refreshed now, so readers never compute it.
    await run_in_threadpool(
        cache.refresh_after_change, service.engine, service.scopes, service.settings
    )
    return JSONResponse({"id": public_id, "final": final})


def _frozen(service: Service) -> str | None:
    with service.engine.connect() as conn:
        frozen = standings.frozen_at(conn, calendar(conn))
    return None if frozen is None or time.time() < frozen else iso(frozen)


async def get_leaderboard(request: Request) -> Response:
    document = await request.app.state.service.current_board()
    return Response(document, media_type="application/json")


async def get_leaderboard_csv(request: Request) -> Response:
    document = await request.app.state.service.current_board()
    return Response(
        board_csv(document),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": 'attachment; filename="leaderboard.csv"'},
    )


async def index(request: Request) -> Response:
    return HTMLResponse(await request.app.state.service.current_page())


def _own_runs(service: Service, team: store.Team) -> dict[str, Any]:
    _settle(service)
    with service.engine.connect() as conn:
        rows = store.team_rows(conn, team.id)[::-1]  # newest first
        revealed = store.get_flag(conn, store.REVEALED) == "yes"
        ctx = standings.read_context(conn, only=submissions.c.team_id == team.id)
        shown_ids = {ctx.entry(r.public_id).shown for r in rows} - {None}
        shown = {i: store.submission_row(conn, i) for i in sorted(shown_ids)}
    runs = [
        _run_json(service, r, shown.get(ctx.entry(r.public_id).shown), ctx, revealed) for r in rows
    ]
    left = admission.team_remaining(service.engine, team, service.policy).to_dict()
    return {"team": team.name, "runs": runs, "remaining": left}


async def list_submissions(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    return JSONResponse(await run_in_threadpool(_own_runs, service, team))


def _static(name: str, media: str) -> Any:
    async def serve(request: Request) -> Response:
        return FileResponse(HERE / "static" / name, media_type=media)

    return serve


async def board_css(request: Request) -> Response:
    """The static leaderboard's style sheet and the page's own rules after it: one look."""
    return Response(BOARD_CSS, media_type="text/css")


async def on_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    who = _client(request)
    log.info(
        "refused %s %s from %s (%d): %s", request.method, request.url.path, who, exc.status, exc
    )
    response = error(exc.status, str(exc), **exc.extra)
    response.headers.update(exc.headers)
    return response


async def on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, exc.detail or "error")


async def on_database(request: Request, exc: Exception) -> Response:
    log.error("database error on %s: %s", request.url.path, one_line(exc))
    if is_full(exc):
        return error(507, f"the server's database is full ({one_line(exc)}); tell the organisers")
    what = "busy" if is_busy(exc) else "unavailable"
    return error(503, f"the server's database is {what} ({one_line(exc)}); retry in a minute")


async def on_crash(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s", request.url.path)
    return error(500, "internal error; the organisers can see it in the server log")


class RateLimited:
    """ASGI middleware: one JSON line with 429 past the per-address rate."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            who = (scope.get("client") or ("unknown",))[0]
            if not self.service.rate.allow(who):
                response = error(429, "too many requests from this address; wait a minute")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(home: Home | None = None) -> Starlette:
    memory.give_back()
    service = Service(home or open_home())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.engine.dispose()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/", index),
            Route("/static/app.js", _static("app.js", "text/javascript")),
            Route("/static/app.css", _static("app.css", "text/css")),
            Route("/static/board.css", board_css),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/api/health", health),
            Route("/api/leaderboard", get_leaderboard),
            Route("/api/leaderboard.csv", get_leaderboard_csv),
            Route("/api/submissions", post_submission, methods=["POST"]),
            Route("/api/submissions", list_submissions, methods=["GET"]),
            Route("/api/submissions/{public_id:str}", get_submission),
            Route("/api/submissions/{public_id:str}/final", post_final, methods=["POST"]),
            *mine.ROUTES,
        ],
        exception_handlers={
            Refused: on_refused,
            HTTPException: on_http,
            sa.exc.OperationalError: on_database,
            Exception: on_crash,
        },
    )
    app.state.service = service
    app.add_middleware(SmallBodies)
    app.add_middleware(RateLimited, service=service)
    app.add_middleware(SecurityHeaders)
    return app
