"""How one chat request reaches an endpoint: the lean path (aiohttp, the default) or the openai
SDK's (httpx).

Both send the same body bytes (the SDK's JSON encoding) to ``BASE_URL/chat/completions`` and
turn what comes back into the same outcomes, so :class:`searchtome.llm.client.ChatClient` does
not care which one carries a request:

* a reply: the response JSON parsed once into plain values (the client checks it is an object);
* :class:`StatusFailure`: a non-2xx answer, with the detail the SDK's error would carry and the
  ``Retry-After`` headers;
* :class:`SendFailure`: no usable answer (``"timeout"``, a connection error naming what failed, an
  unreadable body), with the reason :attr:`ChatResult.error` records.

Why a lean path: at 256 requests in flight the SDK's per-request work (an options model, header
and URL merging, httpx's request and response objects, httpcore's pure-Python HTTP/1.1 and its
connection-pool scans) cost ~1.3-1.8 ms of CPU per request, and on a busy 2-core machine the
client, not the servers, set the pace (``benchmarks/questions.py``). aiohttp's C HTTP parser and
keyed connection pool do the same exchange for ~0.3 ms. The SDK path stays for comparison
(``ClientConfig(transport=Transport.SDK)``) and as the reference the tests hold the lean one to.
"""

from __future__ import annotations

import enum
import json
import math
import os
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from searchtome import settings
from searchtome.errors import SearchTomeError, unknown_name

OPENAI_URL = "https://api.openai.com/v1"
# Requests an SDK client (one httpcore pool) carries at most; see SdkSender.
CONNECTIONS_PER_POOL = 16


class Transport(enum.Enum):
    """Which HTTP stack carries the requests."""

    AIOHTTP = "aiohttp"  # lean: one aiohttp session, raw JSON in and out
    SDK = "sdk"  # openai.AsyncOpenAI(...).post: the reference


def default_transport() -> Transport:
    """``SEARCHTOME_HTTP`` (``aiohttp`` or ``sdk``), else the lean path."""
    name = settings.http_stack()
    if not name:
        return Transport.AIOHTTP
    try:
        return Transport(name)
    except ValueError:
        raise unknown_name("SEARCHTOME_HTTP value", name, [t.value for t in Transport]) from None


class SendFailure(Exception):
    """No usable answer; ``reason`` is the short text a result records (always worth a retry)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StatusFailure(Exception):
    """The endpoint answered with a non-2xx status."""

    def __init__(self, status: int, detail: str, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.headers = headers


class Sender(Protocol):
    """Sends one request body to endpoint number ``index``; the reply's JSON (any JSON value:
    the caller judges its shape), or :class:`SendFailure` / :class:`StatusFailure`."""

    async def post(self, index: int, body: Mapping[str, Any]) -> Any: ...

    async def aclose(self) -> None: ...


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The request bytes exactly as the openai SDK writes them (``openapi_dumps``: httpx's
    JSON defaults)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def api_key_for(api_key: str | None, base_url: str | None) -> str:
    if api_key is not None:
        return api_key
    if not base_url:
        raise SearchTomeError(
            "no API key for api.openai.com: pass --api-key or set OPENAI_API_KEY "
            "(or point --endpoint at your own server)"
        )
    return "EMPTY"  # self-hosted servers (vLLM, TGI, llama.cpp) ignore the key


def completions_url(base_url: str | None) -> str:
    """``BASE/chat/completions`` joined as the SDK joins it (a trailing slash added to the
    base; no base: ``OPENAI_BASE_URL``, then OpenAI's)."""
    base = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
    return (base if base.endswith("/") else base + "/") + "chat/completions"


def error_detail(body: object, message: str) -> str:
    """What an error answer says, from its JSON body (the SDK's ``body``: the ``error`` member
    when there is one) or, failing that, the SDK's error message."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            msg = inner.get("message") or inner.get("detail")
            if msg:
                return str(msg)[:200]
        detail = body.get("detail")
        if detail:
            return str(detail)[:200]
    return message[:200]


def status_failure(status: int, text: str, headers: Mapping[str, str]) -> StatusFailure:
    """A non-2xx answer read as the SDK reads it (``_make_status_error_from_response``)."""
    text = text.strip()
    message = f"Error code: {status}"
    body: object = text
    try:
        body = json.loads(text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, Mapping) else None
        inner = error.get("message") if isinstance(error, Mapping) else None
        if isinstance(inner, str) and inner:
            message += f" - {inner}"
    data = body.get("error", body) if isinstance(body, Mapping) else body
    return StatusFailure(status, error_detail(data, message), headers)


def connection_error(host: str, exc: BaseException) -> str:
    """``connection error to HOST (ConnectError: [Errno 111] Connection refused)``.

    HTTP libraries often raise with an empty message, so the exception's type always names what
    failed.
    """
    causes = [c for c in (exc.__cause__, exc.__context__) if c is not None]
    cause = causes[0] if causes else exc
    while cause.__cause__ is not None and not str(cause).strip():
        cause = cause.__cause__  # an empty wrapper: its cause says more
    detail = str(cause).strip()
    kind = type(cause).__name__
    return (
        f"connection error to {host} ({kind}: {detail})"
        if detail
        else (f"connection error to {host} ({kind}, no detail from the HTTP library)")
    )


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``...), as httpx
    reads it; looked up once per endpoint, not per request."""
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


class AiohttpSender:
    """The lean path: one ``aiohttp.ClientSession`` for every endpoint.

    The body is encoded once with :func:`encode_body` and the reply parsed once with ``json``;
    nothing per request but aiohttp's own request and response. ``trust_env`` stays off because
    aiohttp would then read ``.netrc`` in a thread for every request; the environment's proxies
    are looked up once per endpoint instead (:func:`env_proxy`).
    """

    def __init__(
        self, urls: Sequence[str | None], hosts: Sequence[str], api_key: str, timeout: float
    ) -> None:
        try:
            import aiohttp
            import yarl
        except ImportError as exc:  # an environment installed before aiohttp was a dependency
            raise SearchTomeError(
                f"the question client needs aiohttp ({exc}); install it with "
                "`pip install 'aiohttp>=3.10'` (or reinstall searchtome)"
            ) from None

        self._aiohttp = aiohttp
        self._hosts = list(hosts)
        self._targets = [yarl.URL(completions_url(u)) for u in urls]
        self._proxies = [env_proxy(str(t)) for t in self._targets]
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {api_key}",
        }
        # The SDK sends these when the environment sets them (hosted OpenAI accounts).
        for header, var in (
            ("OpenAI-Organization", "OPENAI_ORG_ID"),
            ("OpenAI-Project", "OPENAI_PROJECT_ID"),
        ):
            if os.environ.get(var):
                headers[header] = os.environ[var]
        # As httpx's single figure: each of connecting and every read may take ``timeout``.
        limits = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=timeout, sock_read=timeout
        )
        self._session = aiohttp.ClientSession(
            # No limit of its own: the client's semaphore bounds the requests in flight.
            connector=aiohttp.TCPConnector(limit=0),
            headers=headers,
            timeout=limits,
        )

    async def post(self, index: int, body: Mapping[str, Any]) -> Any:
        aiohttp = self._aiohttp
        data = encode_body(body)
        try:
            async with self._session.post(
                self._targets[index], data=data, proxy=self._proxies[index]
            ) as response:
                raw = await response.read()
                status = response.status
                headers = response.headers
        except TimeoutError:  # aiohttp's connect and read timeouts are TimeoutErrors
            raise SendFailure("timeout") from None
        except aiohttp.ClientError as exc:
            raise SendFailure(connection_error(self._hosts[index], exc)) from None
        if not 200 <= status < 300:
            text = raw.decode(response.get_encoding(), errors="replace")
            raise status_failure(status, text, dict(headers))
        return parse_reply(raw, headers.get("Content-Type", "*"))

    async def aclose(self) -> None:
        await self._session.close()


def parse_reply(raw: bytes, content_type: str) -> Any:
    """A 2xx body as the SDK's ``cast_to=dict`` reads it: JSON when the content type says so
    (any JSON value), otherwise the text."""
    if not content_type.split(";")[0].endswith("json"):
        return raw.decode("utf-8", errors="replace")
    try:
        return json.loads(raw)
    except ValueError as exc:  # half a body, or not UTF-8
        raise SendFailure(f"unreadable response ({type(exc).__name__})") from None


class SdkSender:
    """The reference path: ``openai.AsyncOpenAI.post`` (the SDK's transport, retries-free, with
    its errors, but without its typed request transform and reply models).

    httpcore's connection pool scans all its connections on every request and reply, so its cost
    per request grows with the connections it holds: one SDK client (one pool) per
    :data:`CONNECTIONS_PER_POOL` requests an endpoint is likely to carry keeps it flat.
    """

    def __init__(
        self,
        urls: Sequence[str | None],
        hosts: Sequence[str],
        api_key: str,
        timeout: float,
        concurrency: int,
    ) -> None:
        import openai

        self._openai = openai
        self._hosts = list(hosts)
        per_url = max(1, math.ceil(concurrency / len(urls) / CONNECTIONS_PER_POOL))
        self._clients = [
            [
                openai.AsyncOpenAI(
                    base_url=u or None, api_key=api_key, timeout=timeout, max_retries=0
                )
                for _ in range(per_url)
            ]
            for u in urls
        ]
        self._sent = [0] * len(urls)

    async def post(self, index: int, body: Mapping[str, Any]) -> Any:
        openai = self._openai
        clients = self._clients[index]
        self._sent[index] += 1
        sdk = clients[self._sent[index] % len(clients)]
        try:
            return await sdk.post("/chat/completions", body=body, cast_to=dict)
        except openai.APITimeoutError:
            raise SendFailure("timeout") from None
        except openai.APIConnectionError as exc:
            raise SendFailure(connection_error(self._hosts[index], exc)) from None
        except openai.APIStatusError as exc:
            detail = error_detail(exc.body, str(exc.message))
            raise StatusFailure(exc.status_code, detail, dict(exc.response.headers)) from None
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A body that is not valid JSON (a proxy hiccup, a half-written reply).
            raise SendFailure(f"unreadable response ({type(exc).__name__})") from None

    async def aclose(self) -> None:
        for clients in self._clients:
            for sdk in clients:
                await sdk.close()


def open_sender(
    transport: Transport,
    urls: Sequence[str | None],
    hosts: Sequence[str],
    api_key: str | None,
    timeout: float,
    concurrency: int,
) -> Sender:
    """A sender for these endpoints; call inside the event loop that will use it (both HTTP
    stacks bind their connections to it)."""
    keys = [api_key_for(api_key, u) for u in urls]
    key = keys[0]
    if transport is Transport.SDK:
        return SdkSender(urls, hosts, key, timeout, concurrency)
    return AiohttpSender(urls, hosts, key, timeout)
