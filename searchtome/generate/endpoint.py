"""The generate stage: which endpoints answer, and asking them only for what the cache lacks.

The SQLite reply cache (:mod:`searchtome.llm.cache`) is read first: only requests it lacks are
sent, and when it lacks none no endpoint is contacted (``--endpoint local`` does not even start
its server). Several URLs are replicas of one model: the client routes over them
(:mod:`searchtome.llm.pool`), and since the cache key and the manifest leave the endpoint out,
the dataset is the same whichever replicas answered.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError, unknown_name
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


class EndpointKind(StrEnum):
    """Who answers; the value is what the manifest records as ``endpoint_kind``."""

    OPENAI = "openai-compatible"
    LOCAL = "local"
    CACHE = "cache"


@dataclass(frozen=True)
class Endpoint:
    """Who answers: OpenAI-compatible servers (one, or replicas of one model), the local model,
    or the reply cache alone."""

    kind: EndpointKind
    base_urls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Checked here, once: everything downstream compares members, never free text.
        try:
            kind = EndpointKind(self.kind)
        except ValueError:
            raise unknown_name(
                "endpoint kind", str(self.kind), [k.value for k in EndpointKind]
            ) from None
        object.__setattr__(self, "kind", kind)

    @property
    def base_url(self) -> str | None:
        return self.base_urls[0] if self.base_urls else None

    @property
    def defaults(self) -> Mapping[str, Any]:
        """What a build leaves open takes these: the local model's, or a server's (the cache
        replays a server's replies). The one place the two tables are chosen between."""
        return LOCAL_DEFAULTS if self.kind is EndpointKind.LOCAL else REMOTE_DEFAULTS

    def timeout(self, concurrency: int, temperature: float | None) -> float:
        """Seconds per request when ``--timeout`` is not given: the local server's wait grows
        with its batches (:func:`local_timeout`); a server's is the fixed default."""
        if self.kind is EndpointKind.LOCAL:
            return local_timeout(concurrency, temperature)
        return float(self.defaults["timeout"])


def endpoint_values(value: str | Sequence[str] | None) -> list[str]:
    """``--endpoint`` values (repeated, or comma-separated) as one list, in the order given."""
    items = [value] if isinstance(value, str) else list(value or ())
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def resolve_endpoint(opts: BuildOptions) -> Endpoint:
    """``--endpoint`` (or ``$OPENAI_BASE_URL``) read, with a one-line error when missing or bad.

    Several URLs are replicas of one model. ``local`` and ``cache`` stand alone: the local model
    is a different model (a different cache key and other defaults), and ``cache`` asks nobody.
    """
    values = endpoint_values(opts.endpoint) or endpoint_values(os.environ.get("OPENAI_BASE_URL"))
    if not values:
        raise SearchTomeError(
            "no endpoint: pass --endpoint URL (an OpenAI-compatible server such as vLLM, TGI or "
            "llama.cpp; repeat it for several replicas), --endpoint local (SmolLM2-135M on this "
            "machine; weak questions), --endpoint cache (replay an imported cache), or set "
            "OPENAI_BASE_URL"
        )
    special = [v for v in values if v in (EndpointKind.LOCAL, EndpointKind.CACHE)]
    if special and len(values) > 1:
        raise SearchTomeError(
            f"--endpoint {special[0]} cannot be combined with other endpoints "
            f"({', '.join(values)}); give either {special[0]} or URLs of replicas of one model"
        )
    if special:
        return Endpoint(EndpointKind(special[0]))
    for value in values:
        if "://" not in value:
            raise SearchTomeError(
                f"--endpoint {value!r} is not a URL; write e.g. http://localhost:8000/v1, or use "
                "'local' or 'cache'"
            )
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise SearchTomeError(f"--endpoint {twice[0]} is given twice; list each replica once")
    return Endpoint(EndpointKind.OPENAI, tuple(values))


def _host_kind(host: str) -> EndpointKind:
    from searchtome.llm.local import LOCAL_HOST_LABEL

    return EndpointKind.LOCAL if host == LOCAL_HOST_LABEL else EndpointKind.OPENAI


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

    concurrency = opts.concurrency or endpoint.defaults["concurrency"]
    if endpoint.kind is EndpointKind.LOCAL:
        if opts.model and opts.model != SMOLLM2_LABEL and not Path(opts.model).is_dir():
            raise SearchTomeError(
                f"--endpoint local serves SmolLM2 or a local model folder; {opts.model!r} is "
                "not a folder (use --endpoint URL for a model on a server)"
            )
        host, model_label = LOCAL_HOST_LABEL, opts.model or SMOLLM2_LABEL
        prefer: tuple[str, ...] = (host,)
    elif endpoint.kind is EndpointKind.CACHE:
        host, model_label, prefer = "", opts.model or DEFAULT_MODEL, ()
    else:
        cfg = ClientConfig(base_urls=endpoint.base_urls, model=opts.model or DEFAULT_MODEL)
        host, model_label, prefer = cfg.hosts[0], cfg.label, cfg.hosts

    def generator(client: ChatClient | None, refresh: Sequence[str] = ()) -> QuestionGenerator:
        # Replicas share replies; among an older cache's conflicting ones, ours win.
        return QuestionGenerator(
            gen_cfg,
            cache,
            client,
            host=host,
            model=model_label,
            sampling=sampling,
            prefer_hosts=prefer,
            refresh=refresh,
        )

    # Pass 1: the cache alone. Nothing else is started when it has every reply.
    replay = generator(None)
    outcomes = replay.run(units)
    missing = [u for u, o in zip(units, outcomes, strict=True) if o.not_cached]
    # A unit whose cached replies could not be used (a poisoned cache, a server that was
    # unwell) is asked again by a live build; `--endpoint cache` replays the failure as it is.
    # (`repaired` with no repair reply cached: the first reply was unusable, so it is asked again
    # rather than repaired.)
    stale = [
        u
        for u, o in zip(units, outcomes, strict=True)
        if o.error and endpoint.kind is not EndpointKind.CACHE and (o.repaired or not o.not_cached)
    ]
    used_hosts = set(replay.used_hosts)  # where the cached replies came from
    if missing and endpoint.kind is EndpointKind.CACHE:
        raise NotCachedError(
            f"{len(missing)} of {len(units)} units have no reply in {cache.path} for model "
            f"{model_label!r} and these settings (first: {missing[0].unit_id}); import the cache "
            "the dataset was built with, pass the same --model/--prompt/--questions-per-unit/"
            "--seed, or use a live --endpoint"
        )
    again = {u.unit_id for u in [*missing, *stale]}
    if again:
        if stale:
            log.info("%d unit(s) with unusable cached replies are asked again", len(stale))
        ask = [u for u in units if u.unit_id in again]  # in document order
        fresh, per_endpoint = _live_pass(
            opts,
            endpoint,
            ask,
            lambda client: generator(client, [u.unit_id for u in stale]),
            concurrency,
            model_label,
        )
        by_id = {o.unit_id: o for o in fresh}
        summary.requests = sum(o.requests for o in fresh)
        outcomes = [by_id.get(o.unit_id, o) for o in outcomes]
        summary.stages["generate"] = (
            f"{len(ask)} unit(s) asked, {summary.requests} request(s) ({per_endpoint})"
        )
    else:
        summary.stages["generate"] = "skipped (all replies cached)"
    summary.cached_units = len(units) - len(again)
    # Which endpoints answered is left out of the dataset: it is byte-identical whichever did.
    kind = endpoint.kind
    if kind is EndpointKind.CACHE:
        local = used_hosts and all(_host_kind(h) is EndpointKind.LOCAL for h in used_hosts)
        kind = EndpointKind.LOCAL if local else EndpointKind.OPENAI
    note = None
    if model_label == SMOLLM2_LABEL:
        note = SMOLLM2_NOTE
    elif kind is EndpointKind.LOCAL:
        note = f"Questions were generated offline by the local model {model_label}."
    info = {"model": model_label, "endpoint_kind": kind.value, "note": note}
    return outcomes, info


def _live_pass(
    opts: BuildOptions,
    endpoint: Endpoint,
    missing: Sequence[Unit],
    generator: Any,
    concurrency: int,
    model_label: str,
) -> tuple[list[UnitOutcome], str]:
    """Ask the endpoints for ``missing``; the outcomes and a per-endpoint count for the summary.
    The progress bar shows each endpoint's answers per second and errors."""
    from searchtome.llm.local import local_server

    def run(urls: Sequence[str], model: str, host_label: str | None) -> list[UnitOutcome]:
        timeout = opts.timeout
        if timeout is None:
            timeout = endpoint.timeout(concurrency, opts.temperature)
        cfg = ClientConfig(
            base_urls=tuple(urls),
            api_key=opts.api_key or os.environ.get("OPENAI_API_KEY") or None,
            model=model,
            model_label=model_label,
            concurrency=concurrency,
            timeout=timeout,
            max_attempts=opts.max_attempts,
            host_label=host_label,
        )
        client = ChatClient(cfg)
        # Replies come back in batches of `concurrency`: no time left before one batch is done.
        bar = progress(total=len(missing), desc="generate", unit="unit", eta_after=concurrency)

        def done(_: UnitOutcome) -> None:
            bar.set_postfix_str(client.pool.describe(), refresh=False)
            bar.update(1)

        try:
            with _RequestWarnings() as gave_up:
                outcomes = generator(client).run(missing, on_done=done)
        finally:
            bar.close()
        stats = client.endpoint_stats()
        if gave_up.count and not any(st.ok for st in stats.values()):
            reasons: Counter[str] = Counter()
            for st in stats.values():
                reasons.update(st.by_reason)
            top = reasons.most_common(1)[0][0] if reasons else gave_up.first
            raise NoAnswer(
                f"no request to {', '.join(stats)} succeeded ({gave_up.count:,} of "
                f"{len(missing):,} units tried, {top}); check that the server is running and "
                "--endpoint is right; nothing was written"
            )
        counts.append(_endpoint_counts(client))
        return outcomes

    counts: list[str] = []
    if endpoint.kind is EndpointKind.LOCAL:
        model_dir = Path(opts.model) if opts.model and Path(opts.model).is_dir() else None
        with local_server(model_dir) as server:
            return run([server.base_url], server.model, server.host_label), counts[0]
    return run(endpoint.base_urls, opts.model or DEFAULT_MODEL, None), counts[0]


def local_timeout(concurrency: int, temperature: float | None) -> float:
    """Seconds a request to the local server may take: it answers only when its whole batch is
    decoded, and a request arriving while a batch runs waits for that one first. Greedy
    requests share batches of up to ``SEARCHTOME_LOCAL_BATCH``; sampled ones run one at a time.
    So a request may wait ``ceil(concurrency / batch) + 1`` batches (greedy) or ``concurrency``
    single runs (sampled), each given ``LOCAL_DEFAULTS["timeout"]`` seconds."""
    import math

    from searchtome.llm.server import default_max_batch

    per_batch = float(LOCAL_DEFAULTS["timeout"])
    if temperature:
        return per_batch * max(1, concurrency)
    return per_batch * (math.ceil(concurrency / max(1, default_max_batch())) + 1)


class NoAnswer(SearchTomeError):
    """Not one request succeeded: the endpoint is down or wrong; nothing is written."""

    exit_code = 3


class _RequestWarnings(logging.Filter):
    """Holds back the client's warning per request that gave up (263 lines for an unreachable
    endpoint); the build reports them once: :class:`NoAnswer`, or one line in
    :func:`_endpoint_counts`."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.first = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith("request %s failed"):
            self.count += 1
            self.first = self.first or str(record.args[-1] if record.args else "")
            return False
        return True

    def __enter__(self) -> _RequestWarnings:
        logging.getLogger("searchtome.llm.client").addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("searchtome.llm.client").removeFilter(self)


def _endpoint_counts(client: ChatClient) -> str:
    """``host: N answered[, M failed]`` per endpoint; failures are logged as a warning too."""
    parts = []
    for host, st in client.endpoint_stats().items():
        parts.append(
            f"{host}: {st.ok} answered" + (f", {st.errors} failed attempts" if st.errors else "")
        )
        if st.errors:
            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(st.by_reason.items()))
            # Attempts, not questions: a failed attempt is retried; the warning below counts
            # the requests that gave up.
            log.warning(
                "endpoint %s: %d of %d attempts failed (%s); failed attempts are retried",
                host,
                st.errors,
                st.sent,
                reasons,
            )
    s = client.stats
    if s.failures:
        log.warning("%d request(s) gave up after retries", s.failures)
    return "; ".join(parts)
