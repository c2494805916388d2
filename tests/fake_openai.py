"""A small, real OpenAI-compatible HTTP server for tests and benchmarks (standard library only).

It answers ``POST /v1/chat/completions`` with deterministic questions made from the words of the
last user message, ``GET /v1/models`` and ``GET /health``. Faults are injected per request:
``server.inject(Fault.status(429, retry_after=1), times=2, match="some text")`` makes the next two
requests whose body contains ``some text`` fail that way. Every request is recorded (time,
messages hash, fault applied), so tests can count what reached the server.

Run it alone (benchmarks use this): ``python -m tests.fake_openai --port 8123 --latency 0.2``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from searchtome.io import stable_hash

_WORD = re.compile(r"[A-Za-z][A-Za-z-]{3,}")
_STOP = {
    "about", "after", "also", "answer", "answerable", "based", "each", "from", "have", "into",
    "json", "must", "only", "other", "passage", "question", "questions", "reply", "that", "their",
    "them", "there", "these", "they", "this", "those", "text", "what", "when", "where", "which",
    "with", "without", "write", "your", "object", "list", "return", "returns", "form", "using",
}  # fmt: skip


def messages_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """The hash both this server and the response cache give a request's messages."""
    return stable_hash([dict(m) for m in messages])


def passage_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text the questions should be about: the last user message, or what follows a
    ``Passage:``/``Text:`` marker in it."""
    user = [m for m in messages if m.get("role") == "user"]
    text = str(user[-1].get("content", "")) if user else ""
    for marker in ("Passage:", "Text:", "PASSAGE:", "<passage>"):
        if marker in text:
            text = text.rsplit(marker, 1)[1]
    return text


def default_questions(messages: Sequence[Mapping[str, Any]], n: int | None = None) -> list[str]:
    """Deterministic, distinct questions built from the passage's own words."""
    if n is None:
        match = re.search(
            r"\b(\d+)\s+(?:distinct\s+|different\s+|short\s+)*questions", str(messages)
        )
        n = int(match.group(1)) if match else 6
    words: list[str] = []
    for w in _WORD.findall(passage_of(messages)):
        lw = w.lower()
        if lw not in _STOP and lw not in words:
            words.append(lw)
    if not words:
        words = ["subject"]
    out = []
    for i in range(n):
        a = words[i % len(words)]
        b = words[(i * 3 + 1) % len(words)]
        out.append(f"How are {a} and {b} related in point {i + 1}?")
    return out


@dataclass(frozen=True)
class Fault:
    """How to answer one request instead of normally."""

    status: int = 200
    content: str | None = None  # chat content to send instead of the normal questions
    finish_reason: str = "stop"
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    headers: Mapping[str, str] = field(default_factory=dict)
    raw_body: bytes | None = None  # exact body bytes (malformed JSON)
    name: str = "fault"

    @staticmethod
    def http(status: int, retry_after: float | str | None = None) -> Fault:
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return Fault(status=status, headers=headers, name=f"http-{status}")

    @staticmethod
    def timeout(delay: float) -> Fault:
        return Fault(delay=delay, name="timeout")

    @staticmethod
    def malformed_body() -> Fault:
        return Fault(raw_body=b'{"id": "x", "choices": [{"message": ', name="malformed-body")

    @staticmethod
    def reply(content: str, finish_reason: str = "stop") -> Fault:
        return Fault(content=content, finish_reason=finish_reason, name="reply")

    @staticmethod
    def truncated() -> Fault:
        return Fault(
            content='{"questions": ["What is the first point?", "What does the sec',
            finish_reason="length",
            name="truncated",
        )


@dataclass
class RequestRecord:
    path: str
    time: float
    messages_hash: str | None
    body: dict[str, Any] | None
    fault: str | None
    status: int
    authorization: str | None = None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 resets bursts of new connections

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        # Clients that time out or get killed drop their connection: expected here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class _Pending:
    fault: Fault
    times: int
    match: str | None


class FakeOpenAIServer:
    """Start with ``with FakeOpenAIServer() as server:``; ``server.base_url`` ends in ``/v1``."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        reply: Callable[[list[dict[str, Any]], dict[str, Any]], str] | None = None,
        model: str | None = None,
        port: int = 0,
        record_bodies: bool = True,
    ) -> None:
        self.latency = latency
        self.reply = reply
        self.model = model
        self.record_bodies = record_bodies
        self.records: list[RequestRecord] = []
        self._faults: list[_Pending] = []
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def inject(self, fault: Fault, times: int = 1, match: str | None = None) -> None:
        with self._lock:
            self._faults.append(_Pending(fault, times, match))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self.records.clear()
            self.max_in_flight = 0

    def chat_records(self) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.records if r.path.endswith("/chat/completions")]

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------------
    def _take_fault(self, raw: str) -> Fault | None:
        with self._lock:
            for pending in self._faults:
                if pending.match is None or pending.match in raw:
                    pending.times -= 1
                    if pending.times <= 0:
                        self._faults.remove(pending)
                    return pending.fault
        return None

    def _completion(self, body: dict[str, Any], content: str, finish_reason: str) -> bytes:
        payload = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": self.model or body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
        }
        return json.dumps(payload).encode("utf-8")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like real servers
            # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm
            # and the client's delayed ACK add ~40 ms to every response (uvicorn sets it too).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: Mapping[str, str] = {}) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with server._lock:
                    server.records.append(
                        RequestRecord(self.path, time.monotonic(), None, None, None, 200)
                    )
                if self.path.rstrip("/") in {"/health", "/v1/health"}:
                    self._send(200, b'{"status": "ok"}')
                elif self.path.rstrip("/") == "/v1/models":
                    name = server.model or "fake"
                    self._send(200, json.dumps({"object": "list", "data": [{"id": name}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8")
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._send(400, b'{"error": {"message": "request body is not JSON"}}')
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                messages = body.get("messages") or []
                fault = server._take_fault(raw)
                status = fault.status if fault else 200
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.records.append(
                        RequestRecord(
                            self.path,
                            time.monotonic(),
                            messages_hash(messages),
                            body if server.record_bodies else None,
                            fault.name if fault else None,
                            status,
                            self.headers.get("Authorization"),
                        )
                    )
                delay = server.latency + (fault.delay if fault else 0.0)
                if delay:
                    time.sleep(delay)
                try:
                    if fault and fault.raw_body is not None:
                        self._send(status, fault.raw_body, fault.headers)
                    elif status != 200:
                        err = {"error": {"message": f"injected {status}", "type": "fake"}}
                        self._send(status, json.dumps(err).encode(), fault.headers if fault else {})
                    else:
                        if fault and fault.content is not None:
                            content, finish = fault.content, fault.finish_reason
                        elif server.reply is not None:
                            content, finish = server.reply(messages, body), "stop"
                        else:
                            content = json.dumps({"questions": default_questions(messages)})
                            finish = "stop"
                        self._send(200, server._completion(body, content, finish))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    with server._lock:
                        server.in_flight -= 1

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeOpenAIServer(latency=args.latency, port=args.port, record_bodies=False)
    print(server.base_url, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server._httpd.serve_forever()


if __name__ == "__main__":
    main()
