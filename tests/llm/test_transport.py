"""The lean HTTP path (aiohttp) against the openai SDK's, over real HTTP to a local server: the
same request bytes, and every kind of answer read into the same result."""

from __future__ import annotations

import dataclasses

import pytest

from searchtome.errors import SearchTomeError
from searchtome.llm.client import (
    ChatClient,
    ChatRequest,
    ChatResult,
    ClientConfig,
    EndpointError,
    SamplingParams,
    Transport,
)
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault

BOTH = (Transport.SDK, Transport.AIOHTTP)

REQUESTS = [
    ChatRequest("plain", ({"role": "user", "content": "Passage: Glaciers carve valleys."},)),
    ChatRequest(
        "unicode",
        (
            {"role": "system", "content": 'Answer in JSON: {"questions": [...]}\n\ttabs "quotes"'},
            {"role": "user", "content": "Passage: Ærø, naïve café, 漢字, emoji 🧊, \\ \u2028."},
        ),
    ),
    ChatRequest(
        "sampling",
        ({"role": "user", "content": "Passage: every knob set."},),
        SamplingParams(
            temperature=0.7,
            top_p=0.95,
            max_tokens=64,
            seed=7,
            stop=("\n\n", "END"),
            presence_penalty=0.5,
            frequency_penalty=-0.25,
            extra={"top_k": 40, "repetition_penalty": 1.1, "guided_json": {"type": "object"}},
        ),
    ),
    ChatRequest(
        "unset",
        ({"role": "user", "content": "Passage: server defaults."},),
        SamplingParams(temperature=None, max_tokens=None, seed=None),
    ),
]


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def _client(server: FakeOpenAIServer, transport: Transport, **kw) -> ChatClient:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 5.0)
    cfg = ClientConfig(
        base_url=server.base_url, model="fake-model", api_key="sk-test", transport=transport, **kw
    )
    return ChatClient(cfg)


def _sent(server: FakeOpenAIServer, transport: Transport, requests=REQUESTS) -> dict[str, bytes]:
    """The raw body bytes each request reached the server with, by request key."""
    server.clear()
    results = _client(server, transport, concurrency=1).run_many(requests)
    assert all(r.ok for r in results), [r.error for r in results]
    records = server.chat_records()
    assert len(records) == len(requests)
    return {req.key: rec.raw_body for req, rec in zip(requests, records, strict=True)}


def test_request_bytes_are_identical():
    with FakeOpenAIServer() as srv:
        sdk, lean = _sent(srv, Transport.SDK), _sent(srv, Transport.AIOHTTP)
        headers = srv.chat_records()[0].headers
    assert lean == sdk
    assert b"\xc3\x86r\xc3\xb8" in lean["unicode"]  # UTF-8 as is, no \u escapes
    assert lean["unset"].startswith(b'{"model":"fake-model","messages":[{"role":"user"')
    assert headers is not None
    lower = {k.lower(): v for k, v in headers.items()}
    assert lower["content-type"] == "application/json"
    assert lower["authorization"] == "Bearer sk-test"


def _same_without_time(a: ChatResult, b: ChatResult) -> None:
    assert dataclasses.replace(a, elapsed=0.0) == dataclasses.replace(b, elapsed=0.0)


FAULTS = {
    "normal": None,
    "reply": Fault.reply("Just prose, no JSON.", finish_reason="length"),
    "truncated": Fault.truncated(),
    "malformed": Fault.malformed_body(),
    "json list": Fault(raw_body=b"[1, 2]", name="list"),
    "json null": Fault(raw_body=b"null", name="null"),
    "no choices": Fault(raw_body=b'{"id": "x", "model": "m", "choices": []}', name="empty"),
    "not utf-8": Fault(raw_body=b'{"choices": "\xff"}', name="latin"),
    "400 json": Fault.http(400),
    "400 text": Fault(status=400, raw_body=b"  prompt too long  ", name="text-400"),
    "422 detail": Fault(status=422, raw_body=b'{"detail": "bad field"}', name="detail"),
    "500": Fault.http(500),
    "503 html": Fault(status=503, raw_body=b"<html>busy</html>", name="html"),
    "429": Fault.http(429, retry_after=0),
}


@pytest.mark.parametrize("name", FAULTS)
def test_every_answer_reads_the_same(server, name):
    fault = FAULTS[name]
    results, reasons = [], []
    for transport in BOTH:
        if fault is not None:
            server.inject(fault, times=2)  # two tries at most: see max_attempts
        client = _client(server, transport, max_attempts=2)
        results.append(client.complete_sync(REQUESTS[0].messages))
        reasons.append(client.stats.by_reason)
        server.clear()
    _same_without_time(*results)
    assert reasons[0] == reasons[1]


def test_timeouts_and_fatal_statuses_read_the_same(server):
    errors = []
    for transport in BOTH:
        server.inject(Fault.timeout(1.5))
        client = _client(server, transport, timeout=0.3, max_attempts=1)
        result = client.complete_sync(REQUESTS[0].messages)
        assert result.error == "timeout"
        server.inject(Fault.http(401))
        with pytest.raises(EndpointError) as caught:
            _client(server, transport).complete_sync(REQUESTS[0].messages)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "answered HTTP 401 for model 'fake-model': injected 401;" in errors[0]


@pytest.mark.parametrize("transport", BOTH)
def test_unreachable_endpoint_names_the_failure(transport):
    cfg = ClientConfig(
        base_url="http://127.0.0.1:9/v1", max_attempts=1, transport=transport, timeout=5.0
    )
    result = ChatClient(cfg).complete_sync(REQUESTS[0].messages)
    assert result.error is not None
    assert result.error.startswith("connection error to 127.0.0.1:9 (")
    assert "()" not in result.error and "Error" in result.error


@pytest.mark.parametrize("transport", BOTH)
def test_many_in_flight_over_two_endpoints(transport):
    with FakeOpenAIServer(latency=0.05) as a, FakeOpenAIServer(latency=0.05) as b:
        cfg = ClientConfig(
            base_urls=(a.base_url, b.base_url), model="m", concurrency=32, transport=transport
        )
        requests = [
            ChatRequest(str(i), ({"role": "user", "content": f"Passage: item{i} words"},))
            for i in range(96)
        ]
        results = ChatClient(cfg).run_many(requests)
        assert [r.key for r in results] == [str(i) for i in range(96)]
        assert all(r.ok and r.content and "item" in r.content for r in results)
        assert len(a.chat_records()) + len(b.chat_records()) == 96
        assert a.chat_records() and b.chat_records()


@pytest.mark.parametrize("transport", BOTH)
def test_proxy_from_the_environment(monkeypatch, transport):
    """``HTTP_PROXY`` carries the requests (an HTTP proxy gets the absolute URL), ``NO_PROXY``
    exempts a host: on both paths, as httpx reads the environment."""
    with FakeOpenAIServer() as proxy, FakeOpenAIServer() as direct:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        for var in ("http_proxy", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        urls = ("http://searchtome-upstream.invalid/v1", direct.base_url)
        cfg = ClientConfig(base_urls=urls, model="m", transport=transport, max_attempts=1)
        requests = [ChatRequest(str(i), REQUESTS[0].messages) for i in range(4)]
        results = ChatClient(cfg).run_many(requests)
        assert all(r.ok for r in results), [r.error for r in results]
        proxied = proxy.chat_records()
        assert proxied and direct.chat_records()  # both endpoints answered
        assert len(proxied) + len(direct.chat_records()) == 4
        assert {r.path for r in proxied} == {
            "http://searchtome-upstream.invalid/v1/chat/completions"
        }


def test_the_environment_picks_the_default_path(monkeypatch):
    monkeypatch.delenv("SEARCHTOME_HTTP", raising=False)
    assert ClientConfig(base_url="http://x/v1").transport is Transport.AIOHTTP
    monkeypatch.setenv("SEARCHTOME_HTTP", " SDK ")
    assert ClientConfig(base_url="http://x/v1").transport is Transport.SDK
    cfg = ClientConfig(base_url="http://x/v1", transport=Transport.AIOHTTP)
    assert cfg.transport is Transport.AIOHTTP  # an explicit choice wins
    monkeypatch.setenv("SEARCHTOME_HTTP", "aiohtp")
    with pytest.raises(SearchTomeError, match=r"unknown SEARCHTOME_HTTP value 'aiohtp' \(did you"):
        ClientConfig(base_url="http://x/v1")
