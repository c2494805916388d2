"""A small OpenAI-compatible chat server that batches concurrent requests on the CPU.

:func:`serve` (run as ``python -m searchtome.commands.serve --model DIR --port PORT``) serves
one causal LM from a local Hugging Face folder (by default the converted SmolLM2-135M-Instruct)
with:

* ``GET /health`` — 200 once the model is loaded (the socket only opens after loading);
* ``GET /v1/models`` — the one model;
* ``POST /v1/chat/completions`` — non-streaming chat completions (``messages``, ``max_tokens`` /
  ``max_completion_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``; ``n`` must be 1).

Why not ``transformers serve``: it runs one ``generate`` at a time, and on a 2-core machine a
135M model spends most of each decoding step in per-step overhead rather than arithmetic, so
decoding 12 requests as one left-padded batch was 3x faster than one after another (measured
on the sample books, identical greedy outputs). Requests that arrive while a batch runs wait
for the next one; greedy requests are batched together, sampled ones run alone under their own
seed. ``SEARCHTOME_LOCAL_BATCH`` caps the batch (default 16) and ``SEARCHTOME_LOCAL_THREADS`` sets
torch's threads; unset, :mod:`searchtome.threads` chooses them once, when the server starts
(``SEARCHTOME_THREADS``, else one per usable CPU, never fewer for the load), and idle threads sleep instead
of spinning (the parent passes ``OMP_WAIT_POLICY=PASSIVE``).

A batch's shared prompt prefix (the system message and the worked example of the question
prompts: 174 of a reply's ~235 prompt tokens on the sample books) goes through the model once
and its keys and values are kept for the next batch that shares it, so each batch computes only
its prompts' own tails. On the sample books' 57 prompts this took the question build's
generation from 89.5 to 69.7 s of CPU at one thread, with every reply identical.

Greedy decoding of one request can differ in rare tokens between batch compositions, as it can
between CPUs; builds stay byte-identical because every reply is cached (``searchtome.llm.cache``).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import json
import logging
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("searchtome.llm.server")

DEFAULT_MAX_TOKENS = 256
COLLECT_WINDOW_S = 0.05  # how long the worker waits for more requests before starting a batch
# A shared prompt prefix shorter than this is recomputed with each batch: keeping and copying
# its keys and values would cost about what it saves.
MIN_SHARED_PREFIX = 32


class RequestError(ValueError):
    """A request the server refuses with HTTP 400 and an OpenAI-style error body."""


@dataclass
class Job:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]
    done: threading.Event = field(default_factory=threading.Event)
    text: str = ""
    finish_reason: str = "stop"
    completion_tokens: int = 0
    error: str | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


class Generator:
    """Owns the model; a single worker thread turns queued jobs into batched ``generate`` calls."""

    def __init__(self, model_dir: str, max_batch: int, threads: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        # transformers 5 names a model's key/value cache ``cache``; 4.x ``past_key_values``.
        params = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.eos_ids = self._eos_ids()
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_ids[0]
        self.max_batch = max(1, max_batch)
        # The last shared prefix run: its tokens and the model's cache after them (batch 1).
        self.prefix: tuple[tuple[int, ...], Any] | None = None
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.worker = threading.Thread(target=self._work, name="generate", daemon=True)
        self.worker.start()

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return list(ids) if isinstance(ids, list | tuple) else [int(ids)]

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True
        )
        if isinstance(encoded, dict) or hasattr(encoded, "input_ids"):
            encoded = encoded["input_ids"]
        return [int(i) for i in encoded]

    def submit(self, job: Job) -> Job:
        self.jobs.put(job)
        job.done.wait()
        return job

    # -- the worker ------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            batch = [self.jobs.get()]
            deadline = time.monotonic() + COLLECT_WINDOW_S
            while len(batch) < self.max_batch:
                timeout = deadline - time.monotonic()
                try:
                    batch.append(
                        self.jobs.get(timeout=max(timeout, 0.0))
                        if timeout > 0
                        else self.jobs.get_nowait()
                    )
                except queue.Empty:
                    break
            greedy = [j for j in batch if j.greedy]
            groups = [greedy] if greedy else []
            groups += [[j] for j in batch if not j.greedy]
            for group in groups:
                try:
                    self._generate(group)
                except Exception as exc:  # report to every waiting request, keep serving
                    log.exception("generation failed")
                    for job in group:
                        job.error = f"generation failed: {exc}"
                for job in group:
                    job.done.set()

    def _generate(self, jobs: list[Job]) -> None:
        torch = self.torch
        shared, cache = self._shared_prefix(jobs)
        tails = [j.prompt_ids[len(shared) :] for j in jobs]
        width = max(len(t) for t in tails)
        # Prompts are left-padded after the shared prefix: a row's padding sits between the
        # prefix and its own tokens, masked out, and positions count only unmasked tokens.
        ids = torch.full((len(jobs), len(shared) + width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        ids[:, : len(shared)] = torch.tensor(shared, dtype=torch.long)
        mask[:, : len(shared)] = 1
        for row, tail in enumerate(tails):
            ids[row, ids.shape[1] - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            mask[row, ids.shape[1] - len(tail) :] = 1
        kwargs: dict[str, Any] = {
            "max_new_tokens": max(j.max_tokens for j in jobs),
            "pad_token_id": self.pad_id,
            "eos_token_id": self.eos_ids,
        }
        if cache is not None:
            kwargs[self.cache_kw] = cache
        if len(jobs) == 1 and not jobs[0].greedy:
            job = jobs[0]
            if job.seed is not None:
                torch.manual_seed(job.seed)
            kwargs.update(do_sample=True, temperature=job.temperature, top_p=job.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        for row, job in enumerate(jobs):
            self._finish(job, out[row, ids.shape[1] :].tolist())

    def _shared_prefix(self, jobs: list[Job]) -> tuple[tuple[int, ...], Any]:
        """The prefix every prompt of a batch of two or more starts with (each keeps at least
        one token of its own), and a model cache after it copied for the batch; ``((), None)``
        when it is shorter than :data:`MIN_SHARED_PREFIX`. The last prefix's cache is kept and
        reused while later batches start with it too."""
        if len(jobs) < 2:
            return (), None
        prompts = [j.prompt_ids for j in jobs]
        n = common_prefix(prompts, min(len(p) for p in prompts) - 1)
        if n < MIN_SHARED_PREFIX:
            return (), None
        kept = self.prefix
        if kept is None or len(kept[0]) > n or list(kept[0]) != prompts[0][: len(kept[0])]:
            shared = tuple(prompts[0][:n])
            with self.torch.inference_mode():
                run = self.model(input_ids=self.torch.tensor([shared]), use_cache=True)
            self.prefix = kept = (shared, run[self.cache_kw])
        cache = copy.deepcopy(kept[1])  # generate appends to the cache it is given
        cache.batch_repeat_interleave(len(jobs))
        return kept[0], cache

    def _finish(self, job: Job, tokens: list[int]) -> None:
        finish = "length"
        for i, tok in enumerate(tokens):
            if tok in self.eos_ids:
                tokens, finish = tokens[:i], "stop"
                break
        if len(tokens) >= job.max_tokens:
            tokens, finish = tokens[: job.max_tokens], "length"
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        cut = [text.find(s) for s in job.stop if s and s in text]
        if cut:
            text, finish = text[: min(cut)], "stop"
        job.text, job.finish_reason, job.completion_tokens = text, finish, len(tokens)


def common_prefix(seqs: list[list[int]], limit: int) -> int:
    """How many leading tokens every sequence shares, at most ``limit``."""
    first = seqs[0]
    for i in range(max(limit, 0)):
        if any(s[i] != first[i] for s in seqs[1:]):
            return i
    return max(limit, 0)


def parse_request(body: dict[str, Any]) -> dict[str, Any]:
    """Check a chat-completions body; returns the generation parameters."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list")
    for m in messages:
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            raise RequestError("every message needs string 'role' and 'content'")
    if body.get("stream"):
        raise RequestError("streaming is not supported by this server")
    if body.get("n", 1) != 1:
        raise RequestError("only n=1 is supported")
    max_tokens = body.get("max_completion_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
    temperature = body.get("temperature")
    temperature = 1.0 if temperature is None else float(temperature)
    top_p = body.get("top_p")
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestError("'max_tokens' must be a positive integer")
    if temperature < 0:
        raise RequestError("'temperature' must be >= 0")
    return {
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": 1.0 if top_p is None else float(top_p),
        "seed": body.get("seed"),
        "stop": stop,
    }


def make_handler(generator: Generator, model_name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            log.debug("%s " + fmt, self.address_string(), *args)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": None}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/health":
                self._send(HTTPStatus.OK, {"status": "ok"})
            elif self.path.rstrip("/") == "/v1/models":
                self._send(
                    HTTPStatus.OK,
                    {
                        "object": "list",
                        "data": [{"id": model_name, "object": "model", "owned_by": "local"}],
                    },
                )
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise RequestError("the body must be a JSON object")
                params = parse_request(body)
            except (ValueError, RequestError) as exc:
                self._error(HTTPStatus.BAD_REQUEST, str(exc))
                return
            prompt = generator.prompt_ids(params.pop("messages"))
            job = generator.submit(Job(prompt_ids=prompt, **params))
            if job.error:
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, job.error, "server_error")
                return
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
            self._send(
                HTTPStatus.OK,
                {
                    "id": f"chatcmpl-{digest}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model") or model_name,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": job.text},
                            "finish_reason": job.finish_reason,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": len(prompt),
                        "completion_tokens": job.completion_tokens,
                        "total_tokens": len(prompt) + job.completion_tokens,
                    },
                },
            )

    return Handler


def default_max_batch() -> int:
    """The largest batch, from ``SEARCHTOME_LOCAL_BATCH`` (default 16)."""
    return int(os.environ.get("SEARCHTOME_LOCAL_BATCH", "16"))


def local_threads() -> int:
    """``SEARCHTOME_LOCAL_THREADS`` checked (0 when unset: one per usable CPU, see :mod:`searchtome.threads`)."""
    from searchtome.errors import SearchTomeError

    raw = os.environ.get("SEARCHTOME_LOCAL_THREADS", "").strip()
    if raw and not raw.isdigit():
        raise SearchTomeError(
            f"SEARCHTOME_LOCAL_THREADS={raw!r}: expected a whole number of threads "
            "(0 or unset: one per usable CPU)"
        )
    return int(raw or 0)


def default_threads() -> int:
    """torch's CPU threads: ``SEARCHTOME_LOCAL_THREADS``, else the policy of :mod:`searchtome.threads`."""
    from searchtome.threads import choose_threads

    return choose_threads(local_threads())


def serve(model_dir: str, *, host: str, port: int, max_batch: int, threads: int) -> None:
    """Load the model, then answer requests on ``host:port`` until interrupted.

    The socket opens only once the model is loaded, so a ``/health`` answer means ready.
    """
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    log.info("loading %s", model_dir)
    generator = Generator(model_dir, max_batch, threads)
    server = ThreadingHTTPServer((host, port), make_handler(generator, model_dir))
    server.daemon_threads = True
    log.info(
        "serving %s on http://%s:%d (batch <= %d, %d thread(s))",
        model_dir,
        host,
        port,
        max_batch,
        threads,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
