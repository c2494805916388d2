"""A request refused with a status and one line saying what is wrong and what to do."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class Refused(Exception):
    def __init__(
        self, status: int, message: str, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}  # e.g. Retry-After on a 503
        self.extra = extra  # e.g. the team's remaining quota


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split()), **extra}, status_code=status)
