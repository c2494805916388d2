"""The OpenAI-compatible client over real HTTP against a local server the test starts."""

from __future__ import annotations

import asyncio
import json
import time
from email.utils import formatdate

import pytest

from searchtome.errors import SearchTomeError
from searchtome.llm.client import (
    ChatClient,
    ChatRequest,
    ClientConfig,
    EndpointError,
    SamplingParams,
    parse_retry_after,
)
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault

MSG = ({"role": "user", "content": "Passage: Glaciers carve valleys. Write 3 questions."},)


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def _client(server: FakeOpenAIServer, **kw) -> ChatClient:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 5.0)
    return ChatClient(ClientConfig(base_url=server.base_url, model="fake-model", **kw))


def test_many_requests_come_back_in_order(server):
    client = _client(server, concurrency=4)
    words = [
        "amber",
        "basalt",
        "cedar",
        "dolmen",
        "ember",
        "fjord",
        "garnet",
        "harbor",
        "iris",
        "juniper",
        "kelp",
        "lichen",
    ]
    requests = [
        ChatRequest(str(i), ({"role": "user", "content": f"Passage: {w} here."},))
        for i, w in enumerate(words)
    ]
    arrived = []
    results = client.run_many(requests, on_result=lambda r: arrived.append(r.key))
    assert [r.key for r in results] == [str(i) for i in range(12)]
    assert sorted(arrived, key=int) == [str(i) for i in range(12)]
    for i, r in enumerate(results):
        assert r.ok and r.attempts == 1 and r.finish_reason == "stop"
        assert words[i] in json.loads(r.content)["questions"][0]
    assert len(server.chat_records()) == 12
    assert client.stats.requests == 12 and client.stats.retries == 0


def test_default_sampling_is_greedy_and_seeded(server):
    _client(server).complete_sync(MSG)
    body = server.chat_records()[0].body
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 512
    assert "top_p" not in body  # unset fields are left to the server


def test_every_sampling_parameter_reaches_the_server(server):
    sampling = SamplingParams(
        temperature=0.7,
        top_p=0.9,
        max_tokens=64,
        seed=11,
        stop=("END",),
        presence_penalty=0.1,
        frequency_penalty=0.2,
        extra={"top_k": 5},
    )
    _client(server, sampling=sampling).complete_sync(MSG)
    body = server.chat_records()[0].body
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["max_tokens"] == 64
    assert body["seed"] == 11 and body["stop"] == ["END"] and body["top_k"] == 5
    assert body["presence_penalty"] == 0.1 and body["frequency_penalty"] == 0.2


def test_api_key_is_sent_but_never_shown(server):
    cfg = ClientConfig(base_url=server.base_url, api_key="sk-secret-123", model="m")
    ChatClient(cfg).complete_sync(MSG)
    assert server.chat_records()[0].authorization == "Bearer sk-secret-123"
    assert "sk-secret" not in repr(cfg) and "sk-secret" not in cfg.host


def test_429_waits_at_least_retry_after(server):
    server.inject(Fault.http(429, retry_after=1))
    result = _client(server).complete_sync(MSG)
    first, second = server.chat_records()
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 1.0
    assert result.ok and result.attempts == 2


def test_500_is_retried_with_growing_backoff(server):
    server.inject(Fault.http(500), times=2)
    client = _client(server, backoff_base=0.2)
    result = client.complete_sync(MSG)
    times = [r.time for r in server.chat_records()]
    assert result.ok and result.attempts == 3
    # Equal jitter: retry k waits between half and all of base * 2**(k-1).
    assert times[1] - times[0] >= 0.1
    assert times[2] - times[1] >= 0.2
    assert client.stats.by_reason == {"HTTP 500": 2}


def test_timeout_is_retried(server):
    server.inject(Fault.timeout(1.5))
    client = _client(server, timeout=0.3)
    result = client.complete_sync(MSG)
    assert result.ok and result.attempts == 2
    assert client.stats.by_reason == {"timeout": 1}


def test_unreadable_body_is_retried(server):
    server.inject(Fault.malformed_body())
    client = _client(server)
    result = client.complete_sync(MSG)
    assert result.ok and result.attempts == 2
    assert any(k.startswith("unreadable response") for k in client.stats.by_reason)


def test_gives_up_after_max_attempts_without_raising(server):
    server.inject(Fault.http(503), times=10)
    result = _client(server, max_attempts=3).complete_sync(MSG)
    assert not result.ok and result.error == "HTTP 503" and result.attempts == 3
    assert len(server.chat_records()) == 3


def test_client_errors_are_not_retried(server):
    server.inject(Fault.http(400))
    result = _client(server).complete_sync(MSG)
    assert not result.ok and result.error.startswith("HTTP 400") and result.attempts == 1
    assert len(server.chat_records()) == 1


@pytest.mark.parametrize("status", [401, 404])
def test_configuration_errors_stop_the_batch(server, status):
    server.inject(Fault.http(status))
    client = _client(server, concurrency=1)
    requests = [ChatRequest(str(i), MSG) for i in range(20)]
    with pytest.raises(EndpointError, match=f"HTTP {status}"):
        client.run_many(requests)
    assert len(server.chat_records()) < 20


def test_concurrency_is_bounded(server):
    server.latency = 0.2
    client = _client(server, concurrency=3)
    start = time.monotonic()
    client.run_many([ChatRequest(str(i), MSG) for i in range(9)])
    elapsed = time.monotonic() - start
    assert server.max_in_flight == 3
    assert elapsed >= 0.55  # three waves of 0.2 s


def test_a_429_pauses_every_worker(server):
    server.latency = 0.05
    server.inject(Fault.http(429, retry_after=0.5))
    client = _client(server, concurrency=2)
    client.run_many([ChatRequest(str(i), MSG) for i in range(6)])
    records = server.chat_records()
    limited = next(r for r in records if r.status == 429)
    # A request sent before the 429 reached the client (one latency later) cannot know of it.
    later = [r for r in records if r.time > limited.time + 0.15]
    assert later and all(r.time >= limited.time + 0.5 for r in later)


def test_retry_after_forms():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    now = time.time()
    date = formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"Retry-After": date}, now=now) <= 31
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_is_capped_and_honours_retry_after():
    client = ChatClient(ClientConfig(base_url="http://x/v1", backoff_base=1, backoff_max=4))
    for attempt in range(1, 10):
        assert client.backoff(attempt) <= 4
    assert client.backoff(1) >= 0.5
    assert 10 <= client.backoff(1, retry_after=10) <= 11
    capped = ChatClient(ClientConfig(base_url="http://x/v1", retry_after_max=5))
    assert capped.backoff(1, retry_after=3600) <= 5.5


def test_configuration_checks(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(SearchTomeError, match="no API key"):
        ChatClient(ClientConfig(base_url=None)).complete_sync(MSG)
    with pytest.raises(SearchTomeError, match="concurrency"):
        ChatClient(ClientConfig(base_url="http://x/v1", concurrency=0))
    monkeypatch.setenv("OPENAI_BASE_URL", "https://user:pw@Gpu.Example.org:8443/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    cfg = ClientConfig.from_env(model="m")
    assert cfg.host == "gpu.example.org:8443" and cfg.api_key == "k"
    assert ClientConfig.from_env(base_url="http://other/v1").host == "other"


def test_unreachable_endpoint_fails_cleanly():
    cfg = ClientConfig(base_url="http://127.0.0.1:9/v1", max_attempts=2, backoff_base=0.01)
    result = ChatClient(cfg).complete_sync(MSG)
    assert not result.ok and result.error.startswith("connection error to 127.0.0.1:9 (")
    assert "()" not in result.error and "Error" in result.error  # says what failed


def test_connection_error_never_has_empty_parentheses():
    from searchtome.llm.client import connection_error

    class ConnectError(Exception):
        pass

    wrapper = RuntimeError("")
    wrapper.__cause__ = ConnectError("")
    assert connection_error("h:1", wrapper) == (
        "connection error to h:1 (ConnectError, no detail from the HTTP library)"
    )
    wrapper.__cause__ = ConnectError("[Errno 111] Connection refused")
    assert connection_error("h:1", wrapper).endswith(
        "(ConnectError: [Errno 111] Connection refused)"
    )


def test_client_reusable_across_event_loops(server):
    client = _client(server)
    assert client.complete_sync(MSG).ok
    assert asyncio.run(client.complete(MSG)).ok
