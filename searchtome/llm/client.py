"""An async client for any OpenAI-compatible chat endpoint (vLLM, TGI, llama.cpp, transformers
serve, hosted APIs), or several replicas of one model.

* HTTP: a lean aiohttp path by default, the ``openai`` SDK's on request (``transport``); both
  send the same bytes and read replies and errors the same way (:mod:`searchtome.llm.transport`).
* Bounded concurrency: at most ``concurrency`` requests in flight in all (an
  ``asyncio.Semaphore``).
* Several endpoints (``base_urls``, or a comma-separated ``base_url``/``OPENAI_BASE_URL``): each
  request goes to the one with the fewest in flight; a failing one is taken out with back-off
  and its requests go elsewhere (:mod:`searchtome.llm.pool`). One endpoint is a pool of one.
* Retries are ours, not the SDK's (its path is built with ``max_retries=0``): the SDK caps its
  backoff at 8 s and refuses a ``Retry-After`` over two minutes, which is too short for hosted
  APIs that rate-limit a long build; we also want the attempt count in each result, a pause that
  every worker honours after a 429 (the endpoint is out until then), and one policy for status errors, timeouts, dropped
  connections and unparseable bodies. Backoff is exponential with "equal jitter" (half fixed,
  half random) and capped; ``Retry-After`` / ``retry-after-ms`` (seconds or an HTTP date) is
  honoured as a lower bound, up to ``retry_after_max``.
* Errors that no retry can fix (401, 403, 404: wrong key, model or URL) raise
  :class:`EndpointError` at once; other failures end up in :attr:`ChatResult.error` so a batch
  goes on.

``ChatClient(config).complete_many(requests)`` is the async entry point; ``run_many`` wraps it
for synchronous callers.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from searchtome.errors import SearchTomeError
from searchtome.llm.pool import EndpointPool, Lease, PoolDown, Replica, ReplicaStats
from searchtome.llm.transport import (
    Sender,
    SendFailure,
    StatusFailure,
    Transport,
    default_transport,
    open_sender,
)
from searchtome.llm.transport import connection_error as connection_error  # callers' old home

log = logging.getLogger(__name__)

DEFAULT_MODEL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
DEFAULT_CONCURRENCY = 16
# Statuses worth retrying: request timeout, lock conflict, rate limit, every server error.
RETRY_STATUSES = frozenset({408, 409, 429})
# Statuses that mean the configuration is wrong: retrying every unit would only repeat them.
FATAL_STATUSES = frozenset({401, 403, 404})

Message = Mapping[str, str]


class EndpointError(SearchTomeError):
    """The endpoint refused us in a way no retry fixes (bad key, unknown model, wrong URL)."""


@dataclass(frozen=True)
class SamplingParams:
    """Generation settings sent with every request; ``None`` leaves a field to the server.

    ``extra`` goes into the request body as is (``extra_body``), for server-specific knobs such
    as vLLM's ``top_k`` or ``repetition_penalty``.
    """

    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = 512
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_request(self) -> dict[str, Any]:
        """Keyword arguments for ``chat.completions.create`` (unset fields omitted)."""
        kwargs: dict[str, Any] = {}
        for name in (
            "temperature",
            "top_p",
            "max_tokens",
            "seed",
            "presence_penalty",
            "frequency_penalty",
        ):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        if self.stop:
            kwargs["stop"] = list(self.stop)
        if self.extra:
            kwargs["extra_body"] = dict(self.extra)
        return kwargs

    def to_body(self) -> dict[str, Any]:
        """The request body's sampling fields, ``extra`` merged in as the server sees them."""
        body = self.to_request()
        body.update(body.pop("extra_body", {}))
        return body

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes a reply, as plain JSON (part of cache keys and manifests)."""
        out = self.to_request()
        out.pop("extra_body", None)
        if self.extra:
            out["extra"] = dict(sorted(self.extra.items()))
        return out


@dataclass(frozen=True)
class ClientConfig:
    """Where to send requests and how hard to try.

    ``model`` is what requests name; ``model_label`` (default: the same) is what caches and
    metadata record, for servers that want a local path as the model name. ``base_urls`` lists
    replicas that serve the same model; when empty, ``base_url`` (which may be comma-separated)
    is the list. ``concurrency`` is the total over all of them. ``transport`` picks the HTTP
    stack (default: ``SEARCHTOME_HTTP``, else the lean aiohttp one).
    """

    base_url: str | None = None
    base_urls: tuple[str, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    model: str = DEFAULT_MODEL
    model_label: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float = 120.0
    max_attempts: int = 6
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    retry_after_max: float = 300.0
    sampling: SamplingParams = field(default_factory=SamplingParams)
    host_label: str | None = None
    transport: Transport = field(default_factory=default_transport)

    @classmethod
    def from_env(cls, **overrides: Any) -> ClientConfig:
        """``base_url`` / ``api_key`` default to ``OPENAI_BASE_URL`` (one URL or several,
        comma-separated) / ``OPENAI_API_KEY``."""
        values = {k: v for k, v in overrides.items() if v is not None}
        values.setdefault("base_url", os.environ.get("OPENAI_BASE_URL") or None)
        values.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or None)
        return cls(**values)

    @property
    def label(self) -> str:
        return self.model_label or self.model

    @property
    def urls(self) -> tuple[str | None, ...]:
        """Every endpoint, in the order given (``(None,)``: the SDK's default, OpenAI)."""
        if self.base_urls:
            return tuple(self.base_urls)
        parts = tuple(u.strip() for u in (self.base_url or "").split(",") if u.strip())
        return parts or (None,)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Each endpoint's host (and port), never credentials or path: safe for logs."""
        if self.host_label:
            return (self.host_label,)
        return tuple(host_of(u) for u in self.urls)

    @property
    def host(self) -> str:
        """The hosts, comma-separated (one host for one endpoint)."""
        return ", ".join(self.hosts)

    def validate(self) -> None:
        if self.concurrency < 1:
            raise SearchTomeError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.max_attempts < 1:
            raise SearchTomeError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.timeout <= 0:
            raise SearchTomeError(f"timeout must be positive, got {self.timeout}")
        if self.host_label and len(self.urls) > 1:
            raise SearchTomeError("host_label names one endpoint; several were given")
        if len(set(self.urls)) != len(self.urls):
            raise SearchTomeError(f"an endpoint is listed twice: {', '.join(map(str, self.urls))}")


def host_of(url: str | None) -> str:
    """``host[:port]`` of a base URL (``api.openai.com`` for none)."""
    if not url:
        return "api.openai.com"
    parts = urlsplit(url if "//" in url else f"//{url}")
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to run; ``key`` is the caller's handle for the result."""

    key: str
    messages: tuple[Message, ...]
    sampling: SamplingParams | None = None


@dataclass(frozen=True)
class ChatResult:
    """What came back for one request, after retries.

    ``error`` is ``None`` on success (even when the reply itself is useless: judging the content
    is the caller's business); otherwise a short reason such as ``"HTTP 500"`` or ``"timeout"``.
    """

    key: str
    content: str | None
    finish_reason: str | None
    attempts: int
    error: str | None = None
    served_model: str | None = None
    usage: Mapping[str, int] | None = None
    elapsed: float = 0.0
    host: str | None = None  # the endpoint that answered

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class RetryState:
    """Counters shared by the workers of one client (exposed for logs, summaries and tests)."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)

    def note(self, reason: str) -> None:
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, ``retry-after`` as seconds or as
    an HTTP date. ``None`` when absent or unreadable."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lower.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if seconds == seconds and seconds >= 0:  # not NaN
            return seconds
    value = lower.get("retry-after")
    if value:
        parsed = email.utils.parsedate_tz(value)
        if parsed is not None:
            when = email.utils.mktime_tz(parsed)
            return max(0.0, when - (time.time() if now is None else now))
    return None


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _Failed(Exception):
    """This request cannot succeed (e.g. HTTP 400: prompt too long); others may."""


class ChatClient:
    """Runs chat completions against one endpoint, or a pool of replicas, with bounded
    concurrency and retries.

    Use it as ``async with ChatClient(cfg) as client`` or let :meth:`complete_many` open and
    close the underlying connection pools itself. Connections are bound to the event loop they
    were opened on, so each ``async with`` block gets its own. Per-endpoint counters
    (:meth:`endpoint_stats`) and the routing state survive from one block to the next.
    """

    def __init__(self, config: ClientConfig, *, rng: random.Random | None = None) -> None:
        config.validate()
        self.config = config
        self.stats = RetryState()
        self._rng = rng or random.Random()
        self.pool = EndpointPool(
            [
                Replica(i, u, h)
                for i, (u, h) in enumerate(zip(config.urls, config.hosts, strict=True))
            ],
            self.backoff,
            config.max_attempts,
        )
        self._sem: asyncio.Semaphore | None = None
        self._sender: Sender | None = None
        self._depth = 0
        self._requests = itertools.count(1)  # one id per request, shared by its attempts

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def _open(self) -> bool:
        return self._sem is not None

    async def __aenter__(self) -> ChatClient:
        if self._depth == 0:
            cfg = self.config
            urls = [r.base_url for r in self.pool.replicas]
            hosts = [r.host for r in self.pool.replicas]
            self._sender = open_sender(
                cfg.transport, urls, hosts, cfg.api_key, cfg.timeout, cfg.concurrency
            )
            self._sem = asyncio.Semaphore(cfg.concurrency)
        self._depth += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._sem is not None:
            sender, self._sem, self._sender = self._sender, None, None
            if sender is not None:
                await sender.aclose()

    def endpoint_stats(self) -> dict[str, ReplicaStats]:
        """Requests sent, answered and failed per endpoint host, in the order given."""
        return {r.host: r.stats for r in self.pool.replicas}

    # -- one request -----------------------------------------------------------------------------
    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Delay before retry number ``attempt`` (1-based); also how long an endpoint that
        failed ``attempt`` times in a row stays out."""
        cfg = self.config
        ceiling = min(cfg.backoff_base * 2 ** (attempt - 1), cfg.backoff_max)
        delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)
        if retry_after is not None:
            # The server's figure is a floor; a little jitter keeps workers from returning in step.
            floor = min(retry_after, cfg.retry_after_max)
            delay = max(delay, floor * (1 + self._rng.uniform(0, 0.1)))
        return delay

    async def complete(
        self, messages: Sequence[Message], sampling: SamplingParams | None = None, key: str = ""
    ) -> ChatResult:
        """Run one chat completion with retries (on whichever endpoint is free); never raises
        for transient failures. A request is sent again only after its last try failed."""
        if not self._open:
            async with self:
                return await self.complete(messages, sampling, key)
        assert self._sem is not None
        params = (sampling or self.config.sampling).to_body()
        start = time.monotonic()
        attempt = 0
        reason = "no attempt"
        requester = next(self._requests)
        async with self._sem:
            while attempt < self.config.max_attempts:
                try:
                    lease = await self.pool.acquire(requester)
                except PoolDown as exc:
                    reason = f"every endpoint failing ({exc.reason})"
                    break
                attempt += 1
                self.stats.requests += 1
                reply, error, retry = await self._try(lease, messages, params)
                if error is None:
                    host = lease.replica.host
                    return self._result(key, reply, attempt, time.monotonic() - start, host)
                reason = error
                self.stats.note(reason)
                if not retry:
                    break
                if attempt < self.config.max_attempts:
                    self.stats.retries += 1
                    log.info(
                        "request %s failed on %s (%s); retry %d/%d",
                        key or "?",
                        lease.replica.host,
                        reason,
                        attempt,
                        self.config.max_attempts - 1,
                    )
        self.stats.failures += 1
        log.warning("request %s failed after %d attempts: %s", key or "?", attempt, reason)
        return ChatResult(key, None, None, attempt, error=reason, elapsed=time.monotonic() - start)

    async def _try(
        self, lease: Lease, messages: Sequence[Message], params: Mapping[str, Any]
    ) -> tuple[Any, str | None, bool]:
        """One send on a leased endpoint: ``(reply, error, worth retrying)``."""
        done = False
        try:
            reply = await self._call(lease.replica, messages, params)
            done = True
        except _Retryable as exc:
            done = True
            self.pool.failed(lease, exc.reason, exc.retry_after)
            return None, exc.reason, True
        except _Failed as exc:
            done = True
            self.pool.succeeded(lease)  # the endpoint is fine; this request is not
            return None, str(exc), False
        finally:
            if not done:  # cancelled, or a configuration error that stops the batch
                self.pool.cancelled(lease)
        self.pool.succeeded(lease)
        return reply, None, False

    async def _call(
        self, replica: Replica, messages: Sequence[Message], params: Mapping[str, Any]
    ) -> Any:
        assert self._sender is not None
        body = {"model": self.config.model, "messages": [dict(m) for m in messages], **params}
        try:
            reply = await self._sender.post(replica.index, body)
        except SendFailure as exc:
            raise _Retryable(exc.reason) from None
        except StatusFailure as exc:
            status = exc.status
            if status in FATAL_STATUSES:
                raise EndpointError(
                    f"{replica.host} answered HTTP {status} for model "
                    f"{self.config.model!r}: {exc.detail}; check --endpoint/--base-url, --model "
                    "and --api-key"
                ) from None
            if status in RETRY_STATUSES or status >= 500:
                raise _Retryable(f"HTTP {status}", parse_retry_after(exc.headers)) from None
            # Other 4xx (e.g. 400: prompt too long) concern this request only: no retry.
            raise _Failed(f"HTTP {status}: {exc.detail}") from None
        if not isinstance(reply, Mapping):  # not JSON at all (the text, or a JSON list)
            raise _Retryable("unreadable response (not JSON)")
        return reply

    @staticmethod
    def _result(
        key: str, reply: Mapping[str, Any], attempts: int, elapsed: float, host: str | None = None
    ) -> ChatResult:
        choices = reply.get("choices") or []
        # An empty list is "no choices" too, not an IndexError that would end the whole batch.
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, Mapping):
            return ChatResult(key, None, None, attempts, error="no choices in response", host=host)
        message = choice.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        usage = None
        if isinstance(reply.get("usage"), Mapping):
            usage = {
                "prompt_tokens": int(reply["usage"].get("prompt_tokens") or 0),
                "completion_tokens": int(reply["usage"].get("completion_tokens") or 0),
            }
        return ChatResult(
            key,
            content if isinstance(content, str) else None,
            choice.get("finish_reason"),
            attempts,
            served_model=reply.get("model"),
            usage=usage,
            elapsed=elapsed,
            host=host,
        )

    # -- many requests ---------------------------------------------------------------------------
    async def complete_many(
        self,
        requests: Iterable[ChatRequest],
        on_result: Callable[[ChatResult], Awaitable[None] | None] | None = None,
    ) -> list[ChatResult]:
        """Run every request (at most ``concurrency`` at once); results in request order.

        ``on_result`` is called as each result arrives (e.g. to write it to a cache at once).
        An :class:`EndpointError` cancels the remaining requests and propagates.
        """
        requests = list(requests)
        async with self:

            async def one(req: ChatRequest) -> ChatResult:
                result = await self.complete(req.messages, req.sampling, req.key)
                if on_result is not None:
                    maybe = on_result(result)
                    if asyncio.iscoroutine(maybe):
                        await maybe
                return result

            return await gather_or_cancel(one(r) for r in requests)

    def run_many(
        self,
        requests: Iterable[ChatRequest],
        on_result: Callable[[ChatResult], Awaitable[None] | None] | None = None,
    ) -> list[ChatResult]:
        """Synchronous :meth:`complete_many` (runs its own event loop)."""
        return asyncio.run(self.complete_many(requests, on_result))

    def complete_sync(
        self, messages: Sequence[Message], sampling: SamplingParams | None = None
    ) -> ChatResult:
        """One request, synchronously."""
        return self.run_many([ChatRequest("0", tuple(messages), sampling)])[0]


async def gather_or_cancel(coros: Iterable[Awaitable[Any]]) -> list[Any]:
    """``asyncio.gather`` that cancels the siblings when one raises (gather alone leaves them
    running until the loop closes)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
