"""Several endpoints behind one client, over real HTTP against local servers the test starts:
routing to the least busy, taking a failing one out, taking it back, never asking twice."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest

from searchtome.errors import SearchTomeError
from searchtome.llm.client import ChatClient, ChatRequest, ClientConfig
from searchtome.llm.pool import EndpointPool, Replica
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault


@pytest.fixture
def servers():
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(FakeOpenAIServer()) for _ in range(3)]


def _client(servers, **kw) -> ChatClient:
    kw.setdefault("backoff_base", 0.05)
    kw.setdefault("timeout", 5.0)
    urls = tuple(s.base_url for s in servers)
    return ChatClient(ClientConfig(base_urls=urls, model="m", **kw))


def _requests(n: int, tag: str = "") -> list[ChatRequest]:
    return [
        ChatRequest(str(i), ({"role": "user", "content": f"Passage: item {tag}{i} text"},))
        for i in range(n)
    ]


def _answered(servers) -> Counter:
    """How often each distinct request got a 200, over every server."""
    return Counter(r.messages_hash for s in servers for r in s.chat_records() if r.status == 200)


def test_requests_spread_over_the_endpoints(servers):
    for s in servers:
        s.latency = 0.05
    client = _client(servers, concurrency=6)
    results = client.run_many(_requests(30))
    assert all(r.ok for r in results) and [r.key for r in results] == [str(i) for i in range(30)]
    per_server = [len(s.chat_records()) for s in servers]
    assert sum(per_server) == 30 and min(per_server) >= 6  # nobody left idle
    assert max(s.max_in_flight for s in servers) <= 3  # 6 in flight, least busy first
    assert {r.host for r in results} == {f"127.0.0.1:{s.port}" for s in servers}
    assert set(_answered(servers).values()) == {1}


def test_the_least_busy_endpoint_gets_more(servers):
    slow, fast, _ = servers
    slow.latency, fast.latency = 0.3, 0.02
    client = _client(servers[:2], concurrency=4)
    client.run_many(_requests(40))
    assert len(fast.chat_records()) > 2 * len(slow.chat_records())


def test_a_dying_endpoint_is_taken_out_and_its_requests_go_elsewhere(servers):
    for s in servers:
        s.latency = 0.02
    servers[1].go_down(Fault.http(503), after=2)
    client = _client(servers, concurrency=6, backoff_base=5.0)
    results = client.run_many(_requests(60))
    assert all(r.ok for r in results)
    failed = [r for r in servers[1].chat_records() if r.status == 503]
    # Taken out at its first failure; only the requests already in flight failed with it.
    assert 1 <= len(failed) <= 6
    assert set(_answered(servers).values()) == {1} and sum(_answered(servers).values()) == 60
    stats = client.endpoint_stats()[f"127.0.0.1:{servers[1].port}"]
    assert stats.errors == len(failed) and stats.ok == 2
    assert client.pool.replicas[1].out_until > 0


def test_a_recovered_endpoint_is_taken_back(servers):
    a, b, _ = servers
    b.go_down(Fault.http(503))
    client = _client([a, b], concurrency=2, backoff_base=0.2, backoff_max=0.2)

    async def scenario() -> list:
        async with client:
            first = await asyncio.gather(*(client.complete(r.messages) for r in _requests(6)))
            b.come_back()
            await asyncio.sleep(0.3)  # its back-off is over: on probation
            second = await asyncio.gather(
                *(client.complete(r.messages) for r in _requests(20, "later"))
            )
            return [*first, *second]

    results = asyncio.run(scenario())
    assert all(r.ok for r in results)
    back = [r for r in b.chat_records() if r.status == 200]
    assert len(back) >= 5  # taken back fully, not just one probe
    assert client.pool.replicas[1].failures == 0


def test_when_every_endpoint_is_down_requests_fail_after_the_attempts(servers):
    for s in servers[:2]:
        s.go_down(Fault.http(503))
    client = _client(servers[:2], concurrency=4, backoff_base=0.01, max_attempts=3)
    results = client.run_many(_requests(8))
    assert not any(r.ok for r in results)
    assert {r.error for r in results} <= {"HTTP 503", "every endpoint failing (HTTP 503)"}
    # Waiters did not each retry on their own: each endpoint was tried a few times, no more.
    assert all(len(s.chat_records()) <= 8 + 3 for s in servers[:2])


def test_one_request_that_always_fails_does_not_end_the_others(servers):
    # A prompt that makes the server answer 500 uses up its own attempts only: the endpoint
    # answers everyone else, so nobody else may give up with "every endpoint failing".
    server = servers[0]
    server.inject(Fault.http(500), times=1000, match="item poison")
    client = _client([server], concurrency=4, backoff_base=0.01, max_attempts=2)
    requests = [
        ChatRequest("bad", ({"role": "user", "content": "Passage: item poison"},)),
        *_requests(6),
    ]
    results = client.run_many(requests)
    assert [r.ok for r in results] == [False] + [True] * 6
    assert results[0].error == "HTTP 500" and results[0].attempts == 2


def test_a_retry_after_keeps_one_endpoint_out_while_others_serve(servers):
    a, b, _ = servers
    a.latency = b.latency = 0.02
    a.inject(Fault.http(429, retry_after=1))
    client = _client([a, b], concurrency=2)
    results = client.run_many(_requests(20))
    assert all(r.ok for r in results)
    limited = next(r for r in a.chat_records() if r.status == 429)
    # a is out for the server's second; meanwhile b answers everything.
    assert all(r.time >= limited.time + 1 or r.time < limited.time + 0.1 for r in a.chat_records())
    assert len(b.chat_records()) >= 15


def test_the_pool_rules_without_a_network():
    """Routing ties go to the endpoint given first; stale outcomes do not move the state."""
    now = [0.0]
    replicas = [Replica(0, "http://a/v1", "a"), Replica(1, "http://b/v1", "b")]
    pool = EndpointPool(replicas, lambda k, _ra: 10.0 * k, give_up_after=3, clock=lambda: now[0])

    async def run() -> None:
        first, second = await pool.acquire(), await pool.acquire()
        assert (first.replica.host, second.replica.host) == ("a", "b")
        third = await pool.acquire()  # a and b have one each: the first given wins
        assert third.replica.host == "a"
        pool.failed(first, "HTTP 500")
        assert replicas[0].failures == 1 and replicas[0].out_until == 10.0
        pool.failed(third, "HTTP 500")  # in flight before a was taken out: same outage
        assert replicas[0].failures == 1
        assert (await pool.acquire()).replica.host == "b"
        now[0] = 11.0  # back-off over: a is on probation, one request at a time
        probe = await pool.acquire()
        assert probe.replica.host == "a" and probe.probe
        assert (await pool.acquire()).replica.host == "b"
        pool.succeeded(probe)
        assert replicas[0].failures == 0
        assert "a 0.1/s" in pool.describe() and "2 err" in pool.describe()

    asyncio.run(run())


def test_endpoint_lists(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://a:8000/v1, http://b:8000/v1")
    cfg = ClientConfig.from_env(model="m")
    assert cfg.urls == ("http://a:8000/v1", "http://b:8000/v1")
    assert cfg.hosts == ("a:8000", "b:8000")
    with pytest.raises(SearchTomeError, match="listed twice"):
        ClientConfig(base_urls=("http://a/v1", "http://a/v1")).validate()
