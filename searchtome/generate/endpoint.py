"""The generate stage: which endpoint answers, and asking it only for what the cache lacks.

The SQLite reply cache (:mod:`searchtome.llm.cache`) is read first: only requests it lacks are
sent, and when it lacks none no endpoint is contacted (``--endpoint local`` does not even start
its server).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.generate.options import LOCAL_DEFAULTS, REMOTE_DEFAULTS, BuildOptions
from searchtome.generate.questions import (
    GenerationConfig,
    NotCachedError,
    QuestionGenerator,
    UnitOutcome,
)
from searchtome.generate.summary import BuildSummary
from searchtome.llm.cache import ResponseCache
from searchtome.llm.client import DEFAULT_MODEL, ChatClient, ClientConfig, SamplingParams
from searchtome.records import Unit
from searchtome.settings import progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """Who answers: an OpenAI-compatible server, the local model, or the reply cache alone."""

    kind: str  # "openai-compatible", "local" or "cache"
    base_url: str | None = None


def resolve_endpoint(opts: BuildOptions) -> Endpoint:
    """``--endpoint`` (or ``$OPENAI_BASE_URL``) read, with a one-line error when missing or bad."""
    value = opts.endpoint or os.environ.get("OPENAI_BASE_URL")
    if not value:
        raise SearchTomeError(
            "no endpoint: pass --endpoint URL (an OpenAI-compatible server such as vLLM, TGI or "
            "llama.cpp), --endpoint local (SmolLM2-135M on this machine; weak questions), "
            "--endpoint cache (replay an imported cache), or set OPENAI_BASE_URL"
        )
    if value == "local":
        return Endpoint("local")
    if value == "cache":
        return Endpoint("cache")
    if "://" not in value:
        raise SearchTomeError(
            f"--endpoint {value!r} is not a URL; write e.g. http://localhost:8000/v1, or use "
            "'local' or 'cache'"
        )
    return Endpoint("openai-compatible", value)


def _host_kind(host: str) -> str:
    from searchtome.llm.local import LOCAL_HOST_LABEL

    return "local" if host == LOCAL_HOST_LABEL else "openai-compatible"


def generate(
    opts: BuildOptions,
    endpoint: Endpoint,
    gen_cfg: GenerationConfig,
    sampling: SamplingParams,
    cache: ResponseCache,
    units: Sequence[Unit],
    summary: BuildSummary,
) -> tuple[list[UnitOutcome], dict[str, Any]]:
    """Outcomes for every unit, asking the endpoint only for what the cache lacks."""
    from searchtome.llm.local import LOCAL_HOST_LABEL, SMOLLM2_LABEL, SMOLLM2_NOTE

    defaults = LOCAL_DEFAULTS if endpoint.kind == "local" else REMOTE_DEFAULTS
    concurrency = opts.concurrency or defaults["concurrency"]
    if endpoint.kind == "local":
        if opts.model and opts.model != SMOLLM2_LABEL and not Path(opts.model).is_dir():
            raise SearchTomeError(
                f"--endpoint local serves SmolLM2 or a local model folder; {opts.model!r} is "
                "not a folder (use --endpoint URL for a model on a server)"
            )
        host, model_label = LOCAL_HOST_LABEL, opts.model or SMOLLM2_LABEL
    elif endpoint.kind == "cache":
        host, model_label = "", opts.model or DEFAULT_MODEL
    else:
        cfg = ClientConfig(base_url=endpoint.base_url, model=opts.model or DEFAULT_MODEL)
        host, model_label = cfg.host, cfg.label

    def generator(client: ChatClient | None, any_host: bool = False) -> QuestionGenerator:
        return QuestionGenerator(
            gen_cfg,
            cache,
            client,
            host=host,
            model=model_label,
            sampling=sampling,
            any_host=any_host,
        )

    # Pass 1: the cache alone. Nothing else is started when it has every reply.
    replay = generator(None, any_host=endpoint.kind == "cache")
    outcomes = replay.run(units)
    missing = [
        u
        for u, o in zip(units, outcomes, strict=True)
        if o.error and o.error.startswith("not in the cache")
    ]
    used_hosts = set(replay.used_hosts)  # where the cached replies came from
    if missing and endpoint.kind == "cache":
        raise NotCachedError(
            f"{len(missing)} of {len(units)} units have no reply in {cache.path} for model "
            f"{model_label!r} and these settings (first: {missing[0].unit_id}); import the cache "
            "the dataset was built with, pass the same --model/--prompt/--questions-per-unit/"
            "--seed, or use a live --endpoint"
        )
    if missing:
        fresh = _live_pass(opts, endpoint, missing, generator, concurrency, model_label)
        by_id = {o.unit_id: o for o in fresh}
        summary.requests = sum(o.requests for o in fresh)
        outcomes = [by_id.get(o.unit_id, o) for o in outcomes]
        used_hosts.add(host)
        summary.stages["generate"] = f"{len(missing)} unit(s) asked, {summary.requests} request(s)"
    else:
        summary.stages["generate"] = "skipped (all replies cached)"
    summary.cached_units = len(units) - len(missing)
    if endpoint.kind == "cache":
        hosts = sorted(used_hosts)
        host = hosts[0] if len(hosts) == 1 else ", ".join(hosts)
    kind = _host_kind(host) if endpoint.kind == "cache" else endpoint.kind
    note = None
    if model_label == SMOLLM2_LABEL:
        note = SMOLLM2_NOTE
    elif kind == "local":
        note = f"Questions were generated offline by the local model {model_label}."
    info = {"model": model_label, "endpoint_kind": kind, "endpoint_host": host, "note": note}
    return outcomes, info


def _live_pass(
    opts: BuildOptions,
    endpoint: Endpoint,
    missing: Sequence[Unit],
    generator: Any,
    concurrency: int,
    model_label: str,
) -> list[UnitOutcome]:
    from searchtome.llm.local import local_server

    def run(base_url: str, model: str, host_label: str | None) -> list[UnitOutcome]:
        cfg = ClientConfig(
            base_url=base_url,
            api_key=opts.api_key or os.environ.get("OPENAI_API_KEY") or None,
            model=model,
            model_label=model_label,
            concurrency=concurrency,
            timeout=opts.timeout,
            max_attempts=opts.max_attempts,
            host_label=host_label,
        )
        client = ChatClient(cfg)
        bar = progress(total=len(missing), desc="generate", unit="unit")
        try:
            return generator(client).run(missing, on_done=lambda _: bar.update(1))
        finally:
            bar.close()
            s = client.stats
            if s.retries or s.failures:
                log.warning(
                    "endpoint %s: %d requests, %d retries, %d gave up (%s)",
                    cfg.host,
                    s.requests,
                    s.retries,
                    s.failures,
                    ", ".join(f"{k}: {v}" for k, v in sorted(s.by_reason.items())),
                )

    if endpoint.kind == "local":
        model_dir = Path(opts.model) if opts.model and Path(opts.model).is_dir() else None
        with local_server(model_dir) as server:
            return run(server.base_url, server.model, server.host_label)
    return run(endpoint.base_url, opts.model or DEFAULT_MODEL, None)
