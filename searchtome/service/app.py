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
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from searchtome.service import cache, mine, store
from searchtome.service.board import Scopes, describe
from searchtome.service.checks import predictions_name, quick_check, system_name
from searchtome.service.db import check_version, is_busy, is_full, make_engine, one_line
from searchtome.service.home import Home, open_home
from searchtome.service.worker import limits_of

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
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
MAX_META_BYTES = 1 << 20
CHUNK = 1 << 16


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)


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
        self.rate = RateLimit(self.settings.requests_per_minute)
        self.uploads = asyncio.Semaphore(4)  # upload bodies held at once: bounds memory
        self.board_lock = asyncio.Lock()
        self.board: tuple[str, str] | None = None  # (key, JSON) of the stored board
        self.page: tuple[str, str] | None = None  # (key, HTML) rendered from it
        self.shown: dict[Any, Any] = {}  # scored runs' shown scores (board.describe)
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True)
        )

    # -- helpers --

    def team_of(self, request: Request) -> store.Team:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "missing token; send the header 'Authorization: Bearer TOKEN'")
        with self.engine.connect() as conn:
            team = store.authenticate(conn, token.strip())
        if team is None:
            raise Refused(401, "unknown or revoked token; ask the organisers for a new one")
        return team

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
        self.page = None
        return self.board

    async def current_board(self) -> str:
        """The leaderboard JSON as stored (milliseconds: nothing is computed per request)."""
        async with self.board_lock:
            return (await run_in_threadpool(self._board))[1]

    async def current_page(self) -> str:
        async with self.board_lock:
            key, document = await run_in_threadpool(self._board)
            if self.page is None or self.page[0] != key:
                html = self.templates.get_template("index.html").render(
                    board=json.loads(document),
                    name=self.public.manifest.name or "SearchTome",
                    settings=self.settings,
                )
                self.page = (key, html)
            return self.page[1]


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def _read_upload(service: Service, request: Request) -> tuple[bytes, bytes, str]:
    """The multipart body's predictions bytes, meta bytes and file name; refused the moment the
    body passes the cap."""
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
    try:
        form = await counted.form(max_files=2, max_fields=2, max_part_size=MAX_META_BYTES)
    except Refused:
        raise
    except Exception as exc:
        raise Refused(400, f"unreadable multipart body ({exc})") from None
    try:
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
        data = await preds.read(cap + 1)
        return data, meta_bytes, predictions_name(preds.filename, data[:2])
    finally:
        await form.close()


def _check_and_enqueue(
    service: Service, team: store.Team, data: bytes, meta: bytes, name: str
) -> str:
    """The cheap checks, then the queue; the scoring worker validates the whole upload."""
    problem = quick_check(meta, name, data, service.limits)
    if problem:
        raise Refused(422, problem)
    try:
        return store.enqueue(
            service.engine,
            team,
            system=system_name(meta),
            meta=meta.decode("utf-8"),
            predictions_name=name,
            predictions=data,
            daily_limit=service.settings.daily_limit,
        )
    except store.QuotaExceeded as exc:
        raise Refused(429, str(exc)) from None
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
    async with service.uploads:
        data, meta, name = await _read_upload(service, request)
        public_id = await run_in_threadpool(_check_and_enqueue, service, team, data, meta, name)
    log.info("accepted %s from team %s", public_id, team.name)
    return JSONResponse(
        {"id": public_id, "state": "queued", "url": f"/api/submissions/{public_id}"},
        status_code=202,
    )


def _describe(service: Service, team: store.Team, public_id: str) -> dict[str, Any]:
    with service.engine.connect() as conn:
        row = store.submission_row(conn, public_id)
        revealed = store.get_flag(conn, store.REVEALED) == "yes"
    if row is None or row.team_id != team.id:
        raise Refused(404, f"no submission {public_id!r} of team {team.name!r}")
    return describe(row, service.scopes, revealed, service.shown)


async def get_submission(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    body = await run_in_threadpool(_describe, service, team, request.path_params["public_id"])
    return JSONResponse(body)


async def post_final(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    try:
        body = json.loads((await request.body())[:1000] or b"{}")
        final = bool(body.get("final", True))
    except (ValueError, AttributeError):
        raise Refused(400, 'send a JSON object like {"final": true}') from None
    public_id = request.path_params["public_id"]
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


async def get_leaderboard(request: Request) -> Response:
    document = await request.app.state.service.current_board()
    return Response(document, media_type="application/json")


async def index(request: Request) -> Response:
    return HTMLResponse(await request.app.state.service.current_page())


async def health(request: Request) -> Response:
    return JSONResponse({"ok": True})


def _static(name: str, media: str) -> Any:
    async def serve(request: Request) -> Response:
        return FileResponse(HERE / "static" / name, media_type=media)

    return serve


async def on_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return error(exc.status, str(exc))


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
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/api/health", health),
            Route("/api/leaderboard", get_leaderboard),
            Route("/api/submissions", post_submission, methods=["POST"]),
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
    app.add_middleware(RateLimited, service=service)
    app.add_middleware(SecurityHeaders)
    return app
