"""Zero-shot LLM: the model reads the ToC and the query and names three leaves, no training.

The paper's "Mistral out of the box" and "Claude Haiku" rows. Two backends:

* ``local`` (default, offline) — a causal LM in-process (SmolLM2-135M-Instruct unless
  ``model`` says otherwise); greedy decoding, the book's prompt prefix cached once per book;
  every reply is stored as its batch finishes, so a killed run resumes.
* ``openai`` — any OpenAI-compatible chat endpoint (vLLM, TGI, llama.cpp, hosted APIs) through
  ``searchtome.llm.client``; ``base_url`` (or ``OPENAI_BASE_URL``), key from ``OPENAI_API_KEY``.
  Replies are cached in SQLite, so an interrupted run resumes without asking again.

The prompt follows ``prompt_layout`` (:mod:`.layouts`): by default the paper's (numbered ToC
lines, ``leaf`` lines to name), as one chat message; ``v1`` is the earlier layout. The reply is
parsed leniently: one candidate per line (bullets, numbering and quotes stripped,
a leaf title alone or a path suffix accepted when exactly one leaf has it), up to
``num_candidates`` of them. A candidate naming a non-leaf ToC node becomes that node's id, one
naming nothing becomes an invalid id, so the scorer counts both (nothing is dropped). Lines that
only introduce the list ("Here are the three sections:") are skipped.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from searchtome.baselines.generative.common import IdentifierIndex, model_fingerprint
from searchtome.baselines.generative.layouts import PROMPT_LAYOUTS, Layout, Task, get_layout
from searchtome.baselines.registry import RunContext, register

from searchtome.config import setting
from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import stable_hash
from searchtome.records import Run
from searchtome.settings import progress
from searchtome.titles import clean_title

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset

log = logging.getLogger(__name__)

BACKENDS: tuple[str, ...] = ("local", "openai")
PROMPT_VERSION = "zeroshot-v1"
_SPLIT_INLINE = re.compile(r"\s+(?=(?:\d{1,2}[.)]|[-*•])\s)")
_INTRO = re.compile(r"^(here|the|these|sure|answer|answers|top|best)\b.*:\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ZeroShotConfig:
    """The zero-shot LLM: which model, where it runs, and how its replies are read."""

    backend: str = setting("local", "local: the model in-process; openai: a chat endpoint")
    model: str = setting(
        "smollm2", "local: a model name or folder; openai: the model name requests carry"
    )
    base_url: str = setting("", "openai backend: the endpoint; empty = OPENAI_BASE_URL")
    concurrency: int = setting(8, "openai backend: requests in flight")
    max_attempts: int = setting(
        6, "openai backend: tries per request; failed tries back off 1, 2, 4, ... s"
    )
    dtype: str = setting("auto", "local backend: auto (bfloat16 where native, else float32)")
    device: str = setting("auto", "local backend: auto, cpu, cuda, cuda:N")
    threads: int = setting(
        0, "local backend: torch threads; 0 = one per usable CPU, whatever the load"
    )
    num_candidates: int = setting(3, "leaves named per query")
    max_new_tokens: int = setting(96, "the longest reply in tokens")
    temperature: float = setting(0.0, "sampling temperature (0: greedy)")
    query_batch: int = setting(16, "local backend: queries decoded together")
    max_input_tokens: int = setting(14000, "local backend: prompt budget in tokens")
    prompt_layout: str = setting("paper", "paper (the paper's Table 2) or v1 (see layouts.py)")

    @property
    def free_form(self) -> bool:
        """Replies are free text: ids naming non-leaf nodes or nothing are kept and counted."""
        return True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise unknown_name("backend", self.backend, BACKENDS)
        if self.num_candidates < 1:
            raise SearchTomeError("num_candidates must be at least 1")
        if self.prompt_layout not in PROMPT_LAYOUTS:
            raise unknown_name("prompt_layout", self.prompt_layout, PROMPT_LAYOUTS)


def parse_reply(text: str, index: IdentifierIndex, n: int) -> tuple[list[str], list[str]]:
    """``(ids, kinds)`` from a reply: up to ``n`` candidates, best first, duplicates merged."""
    lines: list[str] = []
    for raw in (text or "").splitlines():
        lines.extend(p for p in _SPLIT_INLINE.split(raw) if p.strip())
    ids: list[str] = []
    kinds: list[str] = []
    for line in lines:
        line = line.strip()
        if not line or _INTRO.match(line) or (line.endswith(":") and len(line) < 60):
            continue
        item, kind = index.match(line, lenient=True)
        if item not in ids:
            ids.append(item)
            kinds.append(kind)
        if len(ids) >= n:
            break
    return ids, kinds


def _prompt_user_text(layout: Layout, title: str, toc_text: str, query: str) -> str:
    return layout.template(Task.ZEROSHOT).user_text(
        title, toc_text, f"{layout.query_label}: {clean_title(query)}"
    )


def _messages(
    dataset: Dataset, queries: Sequence[Any], layout: Layout
) -> dict[str, tuple[dict[str, str], ...]]:
    """The one-message chat of every query (the book's ToC serialized once per book)."""
    tocs = {b: layout.toc_text(dataset.toc(b)) for b in {q.book_id for q in queries}}
    return {
        q.query_id: (
            {
                "role": "user",
                "content": _prompt_user_text(
                    layout, dataset.books[q.book_id].book.title, tocs[q.book_id], q.text
                ),
            },
        )
        for q in queries
    }


def _split_cached(cache: Any, keys: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """``(stored replies by query id, query ids still to ask)``, in ``keys`` order."""
    out: dict[str, str] = {}
    todo: list[str] = []
    for qid, key in keys.items():
        hit = cache.get(key)
        if hit is None:
            todo.append(qid)
        else:
            out[qid] = hit.content or ""
    return out, todo


def _replies_local(
    dataset: Dataset, queries: Sequence[Any], cfg: ZeroShotConfig, ctx: RunContext
) -> tuple[dict[str, str], dict[str, Any]]:
    """Greedy replies from the in-process model, each batch stored as it finishes.

    The replies go to the same SQLite cache as the endpoint backend's, keyed by the model's
    fingerprint, the prompt and the decoding settings, so a killed run resumes where it stopped.
    """
    from searchtome.baselines.generative.beam import beam_search
    from searchtome.baselines.generative.engine import decode_text, load_lm, pick_device, pick_dtype

    from searchtome.llm.cache import CacheKey, ResponseCache
    from searchtome.threads import require_applied, use_torch_threads

    model_id = stable_hash(model_fingerprint(cfg.model))[:20]
    device = pick_device(cfg.device)
    sampling = {
        "decode": "greedy",
        "max_new_tokens": cfg.max_new_tokens,
        "max_input_tokens": cfg.max_input_tokens,
        # What "auto" resolves to here: a reply written in float32 is not one in bfloat16.
        "dtype": str(pick_dtype(cfg.dtype, device)).removeprefix("torch."),
        "device": device.type,
    }
    layout = get_layout(cfg.prompt_layout)
    template = layout.template(Task.ZEROSHOT)
    keys = {
        qid: CacheKey("in-process", model_id, PROMPT_VERSION, sampling, messages)
        for qid, messages in _messages(dataset, queries, layout).items()
    }
    with ResponseCache(ctx.cache_dir / "responses.sqlite") as cache:
        out, todo_ids = _split_cached(cache, keys)
        facts = {"replies_cached": len(out), "replies_generated": len(todo_ids)}
        if not todo_ids:
            return out, facts
        if out:
            log.info("resuming: %d of %d replies cached", len(out), len(queries))
        waiting = set(todo_ids)
        todo = [q for q in queries if q.query_id in waiting]
        use_torch_threads(cfg.threads)
        lm = load_lm(cfg.model, dtype=cfg.dtype, device=cfg.device)
        require_applied("zero-shot generation")
        facts["dtype"] = str(lm.dtype).removeprefix("torch.")  # what dtype=auto resolved to
        by_book: dict[str, list[Any]] = {}
        for q in todo:
            by_book.setdefault(q.book_id, []).append(q)
        bar = progress(total=len(todo), desc="zero-shot", unit="query")
        for book_id in sorted(by_book):
            prefix, pattern = template.split(
                lm.tokenizer,
                dataset.books[book_id].book.title,
                layout.toc_text(dataset.toc(book_id)),
            )
            prefix_ids = lm.encode(prefix)
            tail = lm.encode(pattern.split("{text}", 1)[1].replace("{{", "{").replace("}}", "}"))
            room = cfg.max_input_tokens - len(prefix_ids) - len(tail)
            if room < 8:
                raise SearchTomeError(
                    f"book {book_id}: the prompt takes {len(prefix_ids)} tokens; "
                    "raise max_input_tokens"
                )
            prefix_cache = lm.prefix_cache(prefix_ids)
            items = by_book[book_id]
            for lo in range(0, len(items), cfg.query_batch):
                part = items[lo : lo + cfg.query_batch]
                suffixes = [
                    lm.encode(f"{layout.query_label}: {clean_title(q.text)}")[:room] + tail
                    for q in part
                ]
                results = beam_search(
                    lm,
                    prefix_cache,
                    suffixes,
                    trie=None,
                    num_beams=1,
                    max_new_tokens=cfg.max_new_tokens,
                )
                for q, hyps in zip(part, results, strict=True):
                    out[q.query_id] = decode_text(lm, hyps[0][0]) if hyps else ""
                    cache.put(keys[q.query_id], out[q.query_id], "stop", cfg.model)
                bar.update(len(part))
        bar.close()
    return out, facts


def _replies_endpoint(
    dataset: Dataset, queries: Sequence[Any], cfg: ZeroShotConfig, ctx: RunContext
) -> tuple[dict[str, str], dict[str, Any]]:
    from searchtome.llm.cache import CacheKey, ResponseCache
    from searchtome.llm.client import ChatClient, ChatRequest, ClientConfig, SamplingParams

    client_cfg = ClientConfig.from_env(
        base_url=cfg.base_url or None,
        model=cfg.model,
        concurrency=cfg.concurrency,
        max_attempts=cfg.max_attempts,
        sampling=SamplingParams(temperature=cfg.temperature, max_tokens=cfg.max_new_tokens),
    )
    client_cfg.validate()
    messages = _messages(dataset, queries, get_layout(cfg.prompt_layout))
    keys = {
        qid: CacheKey(
            client_cfg.host,
            client_cfg.label,
            PROMPT_VERSION,
            client_cfg.sampling.fingerprint(),
            chat,
        )
        for qid, chat in messages.items()
    }
    failures: dict[str, str] = {}
    with ResponseCache(ctx.cache_dir / "responses.sqlite") as cache:
        out, todo = _split_cached(cache, keys)
        requests = [ChatRequest(qid, messages[qid]) for qid in todo]

        def store(result: Any) -> None:
            if result.ok:
                cache.put(
                    keys[result.key], result.content, result.finish_reason, result.served_model
                )

        if requests:
            log.info(
                "asking %s for %d replies (%d cached)", client_cfg.host, len(requests), len(out)
            )
            for result in ChatClient(client_cfg).run_many(requests, on_result=store):
                if result.ok:
                    out[result.key] = result.content or ""
                else:
                    failures[result.key] = result.error or "error"
    if failures:
        example = next(iter(failures.items()))
        raise SearchTomeError(
            f"{len(failures)} of {len(queries)} requests to {client_cfg.host} failed (e.g. "
            f"{example[0]}: {example[1]}); the {len(out)} answered are cached, rerun to retry"
        )
    return out, {"endpoint": client_cfg.host}


@register(
    "zeroshot-llm",
    summary="Zero-shot LLM: reads the ToC and the query, names three leaves (no training); "
    "local model or any OpenAI-compatible endpoint",
    config=ZeroShotConfig,
    needs=("ml",),
    trains_on=(),
    doc="llm-baselines.md",
)
def run_zeroshot(dataset: Dataset, split: str, config: ZeroShotConfig, ctx: RunContext) -> Run:
    queries = dataset.queries(split)
    start = time.perf_counter()
    notes: dict[str, Any] = {"models": (config.model,), "backend": config.backend}
    if config.backend == "local":
        replies, extra = _replies_local(dataset, queries, config, ctx)
    else:
        replies, extra = _replies_endpoint(dataset, queries, config, ctx)
    notes.update(extra)
    layout = get_layout(config.prompt_layout)
    indexes = {b: layout.index(dataset.toc(b)) for b in {q.book_id for q in queries}}
    rankings: dict[str, tuple[str, ...]] = {}
    counts = {"leaf": 0, "non-leaf": 0, "invalid": 0, "empty": 0}
    for q in queries:
        ids, kinds = parse_reply(
            replies.get(q.query_id, ""), indexes[q.book_id], config.num_candidates
        )
        rankings[q.query_id] = tuple(ids)
        if kinds:
            counts[kinds[0]] += 1
        else:
            counts["empty"] += 1
    notes.update({f"rank1_{k.replace('-', '_')}": v for k, v in counts.items()})
    notes["predict_seconds"] = round(time.perf_counter() - start, 1)
    ctx.record(**notes)
    return Run(name="zeroshot-llm", rankings=rankings)
