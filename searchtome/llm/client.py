"""An async client for any OpenAI-compatible chat endpoint (vLLM, TGI, llama.cpp, transformers
serve, hosted APIs), built on the ``openai`` package.

* Bounded concurrency: at most ``concurrency`` requests in flight (an ``asyncio.Semaphore``).
* Retries are ours, not the SDK's (the SDK is built with ``max_retries=0``): the SDK caps its
  backoff at 8 s and refuses a ``Retry-After`` over two minutes, which is too short for hosted
  APIs that rate-limit a long build; we also want the attempt count in each result, a pause that
  every worker honours after a 429, and one policy for status errors, timeouts, dropped
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
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from searchtome.errors import SearchTomeError

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
    metadata record, for servers that want a local path as the model name.
    """

    base_url: str | None = None
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

    @classmethod
    def from_env(cls, **overrides: Any) -> ClientConfig:
        """``base_url`` / ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``."""
        values = {k: v for k, v in overrides.items() if v is not None}
        values.setdefault("base_url", os.environ.get("OPENAI_BASE_URL") or None)
        values.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or None)
        return cls(**values)

    @property
    def label(self) -> str:
        return self.model_label or self.model

    @property
    def host(self) -> str:
        """The endpoint's host (and port), never credentials or path: safe for manifests."""
        if self.host_label:
            return self.host_label
        if not self.base_url:
            return "api.openai.com"
        parts = urlsplit(self.base_url if "//" in self.base_url else f"//{self.base_url}")
        host = (parts.hostname or "").lower()
        return f"{host}:{parts.port}" if parts.port else host

    def validate(self) -> None:
        if self.concurrency < 1:
            raise SearchTomeError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.max_attempts < 1:
            raise SearchTomeError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.timeout <= 0:
            raise SearchTomeError(f"timeout must be positive, got {self.timeout}")


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
    """Runs chat completions against one endpoint with bounded concurrency and retries.

    Use it as ``async with ChatClient(cfg) as client`` or let :meth:`complete_many` open and
    close the underlying connection pool itself. The SDK client is bound to the event loop it
    was first used on, so each ``async with`` block gets its own.
    """

    def __init__(self, config: ClientConfig, *, rng: random.Random | None = None) -> None:
        config.validate()
        self.config = config
        self.stats = RetryState()
        self._rng = rng or random.Random()
        self._sdk: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._pause_until = 0.0
        self._depth = 0

    # -- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> ChatClient:
        if self._depth == 0:
            self._sdk = self._make_sdk()
            self._sem = asyncio.Semaphore(self.config.concurrency)
        self._depth += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._sdk is not None:
            sdk, self._sdk, self._sem = self._sdk, None, None
            await sdk.close()

    def _make_sdk(self) -> Any:
        import openai

        cfg = self.config
        api_key = cfg.api_key
        if api_key is None:
            if not cfg.base_url:
                raise SearchTomeError(
                    "no API key for api.openai.com: pass --api-key or set OPENAI_API_KEY "
                    "(or point --endpoint at your own server)"
                )
            api_key = "EMPTY"  # self-hosted servers (vLLM, TGI, llama.cpp) ignore the key
        return openai.AsyncOpenAI(
            base_url=cfg.base_url or None,
            api_key=api_key,
            timeout=cfg.timeout,
            max_retries=0,
        )

    # -- one request -----------------------------------------------------------------------------
    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Delay before retry number ``attempt`` (1-based)."""
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
        """Run one chat completion with retries; never raises for transient failures."""
        if self._sdk is None:
            async with self:
                return await self.complete(messages, sampling, key)
        assert self._sem is not None
        params = (sampling or self.config.sampling).to_request()
        start = time.monotonic()
        attempt = 0
        reason = "no attempt"
        while attempt < self.config.max_attempts:
            attempt += 1
            async with self._sem:
                wait = self._pause_until - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                self.stats.requests += 1
                try:
                    reply = await self._call(messages, params)
                except _Retryable as exc:
                    reason = exc.reason
                    retry_after = exc.retry_after
                except _Failed as exc:
                    reason = str(exc)
                    self.stats.note(reason)
                    break
                else:
                    return self._result(key, reply, attempt, time.monotonic() - start)
            # Sleep outside the semaphore so a backing-off request does not hold a slot.
            self.stats.note(reason)
            if attempt >= self.config.max_attempts:
                break
            delay = self.backoff(attempt, retry_after)
            if retry_after is not None:
                self._pause_until = max(self._pause_until, time.monotonic() + delay)
            self.stats.retries += 1
            log.info(
                "request %s failed (%s); retry %d/%d in %.2fs",
                key or "?",
                reason,
                attempt,
                self.config.max_attempts - 1,
                delay,
            )
            await asyncio.sleep(delay)
        self.stats.failures += 1
        log.warning("request %s failed after %d attempts: %s", key or "?", attempt, reason)
        return ChatResult(key, None, None, attempt, error=reason, elapsed=time.monotonic() - start)

    async def _call(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Any:
        import openai

        try:
            return await self._sdk.chat.completions.create(
                model=self.config.model, messages=[dict(m) for m in messages], **params
            )
        except openai.APITimeoutError:
            raise _Retryable("timeout") from None
        except openai.APIConnectionError as exc:
            raise _Retryable(f"connection error ({exc.__cause__ or exc})") from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            detail = _error_detail(exc)
            if status in FATAL_STATUSES:
                raise EndpointError(
                    f"{self.config.host} answered HTTP {status} for model "
                    f"{self.config.model!r}: {detail}; check --endpoint/--base-url, --model and "
                    "--api-key"
                ) from None
            if status in RETRY_STATUSES or status >= 500:
                raise _Retryable(
                    f"HTTP {status}", parse_retry_after(dict(exc.response.headers))
                ) from None
            # Other 4xx (e.g. 400: prompt too long) concern this request only: no retry.
            raise _Failed(f"HTTP {status}: {detail}") from None
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A body that is not valid JSON (a proxy hiccup, a half-written reply).
            raise _Retryable(f"unreadable response ({type(exc).__name__})") from None

    @staticmethod
    def _result(key: str, reply: Any, attempts: int, elapsed: float) -> ChatResult:
        choices = getattr(reply, "choices", None) or []
        if not choices:
            return ChatResult(key, None, None, attempts, error="no choices in response")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        usage = None
        if getattr(reply, "usage", None) is not None:
            usage = {
                "prompt_tokens": int(reply.usage.prompt_tokens or 0),
                "completion_tokens": int(reply.usage.completion_tokens or 0),
            }
        return ChatResult(
            key,
            content,
            getattr(choice, "finish_reason", None),
            attempts,
            served_model=getattr(reply, "model", None),
            usage=usage,
            elapsed=elapsed,
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


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            msg = inner.get("message") or inner.get("detail")
            if msg:
                return str(msg)[:200]
        detail = body.get("detail")
        if detail:
            return str(detail)[:200]
    return str(getattr(exc, "message", exc))[:200]
