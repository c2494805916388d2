"""A request refused with a status and one line saying what is wrong and what to do."""

from __future__ import annotations

from starlette.responses import JSONResponse


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)
