"""``searchtome submit``: upload a run to a scoring service, and wait for its score.

Standard library only (``http.client``): the body is streamed in chunks with a progress bar,
and every refusal the server sends is its one-line JSON error, raised as one line here. Every
reply is read through its type in :mod:`searchtome.service.replies`.
"""

from __future__ import annotations

import http.client
import json
import random
import secrets
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.service.replies import (
    DONE,
    Accepted,
    JobState,
    OwnRuns,
    Refusal,
    ServiceBoard,
    SubmissionState,
    read_reply,
)
from searchtome.settings import progress
from searchtome.submissions.reader import find_predictions
from searchtome.submissions.schema import META_FILE

CHUNK = 1 << 16


class ServerBusy(SearchTomeError):
    """A 503 with ``Retry-After``: the server asks for the same request again later."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


def _files(submission: PathLike, meta: PathLike | None) -> tuple[Path, Path]:
    path = Path(submission)
    if path.is_dir():
        return find_predictions(path), Path(meta) if meta else path / META_FILE
    if not path.is_file():
        raise SearchTomeError(f"{path}: no such submission folder or predictions file")
    if meta is None:
        raise SearchTomeError(f"{path}: a bare predictions file needs --meta META.json")
    return path, Path(meta)


def _parts(preds: Path, meta: Path, boundary: str) -> list[bytes | Path]:
    def head(field: str, filename: str, kind: str) -> bytes:
        return (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
            f'filename="{filename}"\r\nContent-Type: {kind}\r\n\r\n'
        ).encode()

    return [
        head("meta", META_FILE, "application/json"),
        meta,
        b"\r\n" + head("predictions", preds.name, "application/octet-stream"),
        preds,
        f"\r\n--{boundary}--\r\n".encode(),
    ]


def _chunks(parts: list[bytes | Path]) -> Iterator[bytes]:
    for part in parts:
        if isinstance(part, bytes):
            yield part
            continue
        with open(part, "rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk


class Server:
    def __init__(self, url: str, token: str, timeout: float = 300.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SearchTomeError(f"--server {url!r}: give an http:// or https:// URL")
        self.url, self.parsed, self.token, self.timeout = url.rstrip("/"), parsed, token, timeout

    def _connection(self) -> http.client.HTTPConnection:
        cls = (
            http.client.HTTPSConnection
            if self.parsed.scheme == "https"
            else http.client.HTTPConnection
        )
        return cls(self.parsed.hostname, self.parsed.port, timeout=self.timeout)

    def _reply(self, conn: http.client.HTTPConnection, what: str) -> Any:
        response = conn.getresponse()
        raw = response.read(1 << 22)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"error": raw[:200].decode("utf-8", "replace")}
        if response.status >= 400:
            try:
                message = read_reply(Refusal, body, what).error
            except SearchTomeError:
                message = str(body)[:200]
            line = f"{self.url}: {what} refused ({response.status}): {message}"
            wait = response.getheader("Retry-After", "")
            if response.status == 503 and wait.isdigit():
                raise ServerBusy(line, float(wait))
            raise SearchTomeError(line)
        return body

    def request(self, method: str, path: str, body: bytes | None = None) -> Any:
        conn = self._connection()
        headers = {"Authorization": f"Bearer {self.token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=body, headers=headers)
            return self._reply(conn, f"{method} {path}")
        except OSError as exc:
            raise SearchTomeError(f"{self.url}: cannot reach the server ({exc})") from None
        finally:
            conn.close()

    def state(self, public_id: str) -> SubmissionState:
        """``GET /api/submissions/{id}``: one of the team's uploads."""
        path = f"/api/submissions/{public_id}"
        return read_reply(SubmissionState, self.request("GET", path), f"{self.url}{path}")

    def runs(self) -> OwnRuns:
        """``GET /api/submissions``: the team's uploads."""
        path = "/api/submissions"
        return read_reply(OwnRuns, self.request("GET", path), f"{self.url}{path}")

    def board(self) -> ServiceBoard:
        """``GET /api/leaderboard``."""
        path = "/api/leaderboard"
        return read_reply(ServiceBoard, self.request("GET", path), f"{self.url}{path}")

    def upload(self, preds: Path, meta: Path) -> Accepted:
        """Send the run; a server that kept all its body places full for its wait answers 503
        with ``Retry-After``, and the upload is sent again after that wait (a random 1-2 times it,
        so a crowd refused together does not come back together) for up to ``timeout``."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._upload(preds, meta)
            except ServerBusy as busy:
                pause = busy.seconds * random.uniform(1.0, 2.0)
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)

    def _upload(self, preds: Path, meta: Path) -> Accepted:
        boundary = secrets.token_hex(16)
        parts = _parts(preds, meta, boundary)
        size = sum(len(p) if isinstance(p, bytes) else p.stat().st_size for p in parts)
        conn = self._connection()
        try:
            conn.putrequest("POST", "/api/submissions")
            conn.putheader("Authorization", f"Bearer {self.token}")
            conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
            conn.putheader("Content-Length", str(size))
            conn.endheaders()
            with progress(total=size, desc="uploading", unit="B", unit_scale=True) as bar:
                for chunk in _chunks(parts):
                    conn.send(chunk)
                    bar.update(len(chunk))
            body = self._reply(conn, "upload")
        except (BrokenPipeError, ConnectionResetError):
            # The server stopped reading (a refused upload): its reply says why.
            body = self._reply(conn, "upload")
        except OSError as exc:
            raise SearchTomeError(f"{self.url}: cannot reach the server ({exc})") from None
        finally:
            conn.close()
        return read_reply(Accepted, body, f"{self.url}/api/submissions")


def submit(
    submission: PathLike,
    server: str,
    token: str,
    meta: PathLike | None = None,
    wait: bool = False,
    poll: float = 1.0,
) -> Accepted | SubmissionState:
    """Upload; with ``wait``, poll until scored and return the final state (raises if rejected)."""
    preds, meta_path = _files(submission, meta)
    if not meta_path.is_file():
        raise SearchTomeError(f"{meta_path}: no meta.json; write one (see docs/submissions.md)")
    client = Server(server, token)
    accepted = client.upload(preds, meta_path)
    if not wait:
        return accepted
    while True:
        state = client.state(accepted.id)
        if state.state in DONE:
            break
        time.sleep(poll)
    if state.state is not JobState.SCORED:
        raise SearchTomeError(f"{preds}: {state.state}: {state.error}")
    return state


def set_hidden(server: str, token: str, public_id: str, hidden: bool) -> dict[str, Any]:
    """Hide a run from the leaderboard or show it again."""
    body = json.dumps({"hidden": hidden}).encode()
    return Server(server, token).request("POST", f"/api/submissions/{public_id}/hidden", body)
