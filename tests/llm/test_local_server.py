"""The batched local OpenAI-compatible server, over real HTTP with a tiny random model."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from searchtome.llm.server import RequestError, parse_request
from tests.fixtures.llm_helpers import tiny_lm_fixture  # noqa: F401


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lively_lm_dir(tiny_lm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with large random weights, so that its replies depend on the prompt."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("lively")
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    torch.manual_seed(3)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.6)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_lm_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def server(lively_lm_dir: Path):
    tiny_lm_dir = lively_lm_dir
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "searchtome.commands.serve",
            "--model",
            str(tiny_lm_dir),
            "--port",
            str(port),
            "--max-batch",
            "8",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600  # a hang's limit: loading takes seconds, more when busy
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1) as resp:
                if resp.status == 200:
                    break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.2)
    yield base, str(tiny_lm_dir)
    proc.kill()
    proc.wait()


def _chat(base: str, model: str, content: str, **extra):
    from openai import OpenAI

    client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}], temperature=0, seed=1, **extra
    )
    return reply.choices[0].message.content, reply.choices[0].finish_reason, reply.usage


def test_batched_replies_equal_one_at_a_time(server) -> None:
    base, model = server
    prompts = [f"Question number {i} about {'cells ' * i}" for i in range(1, 9)]
    alone = [_chat(base, model, p, max_tokens=12)[0] for p in prompts]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda p: _chat(base, model, p, max_tokens=12)[0], prompts))
    assert together == alone
    assert len(set(alone)) > 1  # the prompts really differ


def test_length_and_stop(server) -> None:
    base, model = server
    text, finish, usage = _chat(base, model, "hello", max_tokens=7)
    assert finish == "length" and usage.completion_tokens == 7
    assert usage.total_tokens == usage.prompt_tokens + 7
    longer, _, _ = _chat(base, model, "hello", max_tokens=20)
    assert longer.startswith(text)  # greedy: a longer budget only extends the reply
    stop = longer[len(text) // 2 : len(text) // 2 + 2]
    if stop.strip():
        cut, finish, _ = _chat(base, model, "hello", max_tokens=20, stop=[stop])
        assert finish == "stop" and stop not in cut and longer.startswith(cut)


def test_routes_and_bad_requests(server) -> None:
    base, model = server
    with urllib.request.urlopen(f"{base}/v1/models") as resp:
        assert json.load(resp)["data"][0]["id"] == model
    request = urllib.request.Request(
        f"{base}/v1/chat/completions",
        data=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request)
    assert err.value.code == 400 and "error" in json.load(err.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "'messages' must be a non-empty list"),
        ({"messages": [{"role": "user"}]}, "string 'role' and 'content'"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": True}, "streaming"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n=1"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
    ],
)
def test_parse_request_refuses(body, message) -> None:
    with pytest.raises(RequestError, match=message):
        parse_request(body)


def test_a_shared_prompt_prefix_is_run_once_and_changes_no_reply(
    lively_lm_dir, monkeypatch
) -> None:
    """Two batches of prompts that share a long start: the prefix's keys/values are computed
    once, kept for the second batch, and every reply equals the one computed without them."""
    from searchtome.llm import server

    gen = server.Generator(str(lively_lm_dir), max_batch=8, threads=1)
    start = "Read this passage and then write one question about it, please: "
    batches = [
        [start + t for t in ("cells divide", "tissues grow and grow", "organs work", "bones")],
        [start + t for t in ("blood flows on", "lungs breathe", "skin protects the body")],
    ]

    def replies(batch: list[str]) -> list[str]:
        jobs = [
            server.Job(gen.prompt_ids([{"role": "user", "content": b}]), 10, 0.0, 1.0, 1, ())
            for b in batch
        ]
        gen._generate(jobs)
        return [j.text for j in jobs]

    runs: list = []
    real_model = gen.model
    monkeypatch.setattr(gen, "model", _Recording(real_model, runs), raising=True)
    shared = [replies(b) for b in batches]
    assert gen.prefix is not None and len(gen.prefix[0]) >= server.MIN_SHARED_PREFIX
    assert len(runs) == 1  # the prefix went through the model once, for both batches
    gen.prefix = None
    monkeypatch.setattr(server, "MIN_SHARED_PREFIX", 10**6)  # every prompt whole
    whole = [replies(b) for b in batches]
    assert gen.prefix is None and shared == whole
    assert len({r for b in whole for r in b}) > 1  # the replies do depend on the prompt


class _Recording:
    """The model, recording the inputs of its direct calls (``generate`` is passed through)."""

    def __init__(self, model, calls: list) -> None:
        self._model, self._calls = model, calls

    def __call__(self, *args, **kwargs):
        self._calls.append(kwargs["input_ids"])
        return self._model(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._model, name)
