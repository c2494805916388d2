"""The participant's own view: its uploads back, and hiding a run (the list of a team's runs,
``GET /api/submissions``, is ``app.list_submissions``: the competition's view of each run).

Every route needs the team's token and answers about that team's own submissions only; another
team's id is a 404, as on ``GET /api/submissions/ID``. Refusals are ``HTTPException``s, which the
application turns into its one-line JSON errors (this module is imported by ``app``, not the
other way round).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from searchtome.errors import SearchTomeError
from searchtome.service import cache, store

MAX_TOGGLE_BYTES = 1000


def _upload(service: Any, team: store.Team, public_id: str) -> tuple[str, bytes]:
    with service.engine.connect() as conn:
        row = store.submission_row(conn, public_id)
        if row is None or row.team_id != team.id:
            raise HTTPException(404, f"no submission {public_id!r} of team {team.name!r}")
        return store.upload_of(conn, public_id)


async def get_predictions(request: Request) -> Response:
    """``GET /api/submissions/ID/predictions``: the predictions file as uploaded."""
    service: Any = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    public_id = request.path_params["public_id"]
    name, data = await run_in_threadpool(_upload, service, team, public_id)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"content-disposition": f'attachment; filename="{public_id}-{name}"'},
    )


async def post_hidden(request: Request) -> Response:
    """``POST /api/submissions/ID/hidden`` with ``{"hidden": true|false}``."""
    service: Any = request.app.state.service
    team = await run_in_threadpool(service.team_of, request)
    try:
        body = json.loads((await request.body())[:MAX_TOGGLE_BYTES] or b"{}")
        hidden = body.get("hidden", True)
        if not isinstance(hidden, bool):
            raise ValueError(hidden)
    except (ValueError, AttributeError):
        raise HTTPException(400, 'send a JSON object like {"hidden": true}') from None
    public_id = request.path_params["public_id"]
    try:
        await run_in_threadpool(store.set_hidden, service.engine, team, public_id, hidden)
    except LookupError:
        raise HTTPException(404, f"no submission {public_id!r} of team {team.name!r}") from None
    except SearchTomeError as exc:
        raise HTTPException(409, str(exc)) from None
    await run_in_threadpool(
        cache.refresh_after_change, service.engine, service.scopes, service.settings
    )
    return JSONResponse({"id": public_id, "hidden": hidden})


ROUTES = [
    Route("/api/submissions/{public_id:str}/predictions", get_predictions),
    Route("/api/submissions/{public_id:str}/hidden", post_hidden, methods=["POST"]),
]
