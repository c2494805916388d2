"""``searchtome build``: catalog (or a folder of PDFs) → fetch → extract → generate → filter →
split → write. Also ``searchtome cache export/import/info`` for the LLM reply cache.

Stages and what makes them skip:

* **fetch** — the fetch module's content-addressed download cache (a verified PDF is never
  downloaded twice).
* **extract** — ``$SEARCHTOME_HOME/builds/extract/<book>-<key>/``, keyed by the PDF's SHA-256,
  the book id, the ToC options and the searchtome/PyMuPDF versions.
* **generate** — the SQLite reply cache (:mod:`searchtome.llm.cache`): only requests it lacks
  are sent; when it lacks none, no endpoint is contacted (``--endpoint local`` does not even
  start its server).
* **filter / split** — cheap and deterministic: always recomputed.
* **write** — skipped when ``--out`` already holds a dataset whose manifest records the same
  build fingerprint (a hash of every input, setting and generated reply) and whose files still
  match their recorded SHA-256.

Output is built in a temporary sibling folder and moved into place at the end, so ``--out``
holds either the previous dataset or the new one. Nothing in the output depends on the clock,
the machine or the paths used: the same catalog, cache and settings give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.generate.questions import (
    DEFAULT_PROMPT,
    FEWSHOT_PROMPT,
    STRICTNESS,
    Candidate,
    FilterConfig,
    GenerationConfig,
    QuestionGenerator,
    UnitOutcome,
    filter_questions,
    load_prompt,
)
from searchtome.generate.splits import (
    RULES,
    SplitConfig,
    SplitItem,
    assign_splits,
    parse_ratios,
    split_file_hashes,
)
from searchtome.generate.units import DEFAULT_DROP_BELOW, DEFAULT_MIN_CHARS, UnitConfig, make_units
from searchtome.io import atomic_dir, commit_dir, read_json, sha256_file, stable_hash, write_json
from searchtome.llm.cache import ResponseCache, default_cache_path
from searchtome.llm.client import DEFAULT_MODEL, ChatClient, ClientConfig, SamplingParams
from searchtome.records import SPLITS, Book, Leaf, Paragraph, Query, TocNode, Unit
from searchtome.settings import cache_dir, progress
from searchtome.version import __version__

log = logging.getLogger(__name__)

BUILD_FORMAT = "searchtome-build-v1"
REPORT_FILE = "build-report.json"
SPLITS_FILE = "splits.json"
DEFAULT_SEED = 42
# Defaults that differ for --endpoint local: a 135M model on a CPU needs a worked example,
# tolerant parsing, few parallel requests and a short reply budget.
# The local server batches concurrent requests (searchtome.llm.server), so it is fed as many
# as it batches. SmolLM2 rarely stops by itself (it repeats its last question), so the token
# budget, not the question count, sets the cost of a unit.
LOCAL_DEFAULTS = {
    "prompt": FEWSHOT_PROMPT,
    "strictness": "lenient",
    "concurrency": 16,
    "max_tokens": 160,
}
REMOTE_DEFAULTS = {
    "prompt": DEFAULT_PROMPT,
    "strictness": "json",
    "concurrency": 16,
    "max_tokens": 512,
}


@dataclass(frozen=True)
class BuildOptions:
    """Everything ``searchtome build`` accepts; ``None`` means "the endpoint's default"."""

    out: Path
    catalog: Path | None = None
    books: tuple[str, ...] | None = None
    source_dir: Path | None = None
    pdf_dir: Path | None = None
    endpoint: str | None = None  # URL, "local" or "cache"
    api_key: str | None = None
    model: str | None = None
    seed: int = DEFAULT_SEED
    split_seed: int | None = None
    questions_per_unit: int | str = 6
    concurrency: int | None = None
    prompt: str | None = None
    strictness: str | None = None
    repair: bool = True
    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop: tuple[str, ...] = ()
    sampling_extra: dict[str, Any] = field(default_factory=dict)
    timeout: float = 120.0
    max_attempts: int = 6
    cache: Path | None = None
    unit_min_chars: int = DEFAULT_MIN_CHARS
    unit_drop_below: int = DEFAULT_DROP_BELOW
    filters: FilterConfig = field(default_factory=FilterConfig)
    split_rule: str = "by-unit"
    split_ratios: dict[str, float] | None = None
    leaves_in_train: bool = True
    infer_toc: bool = False
    name: str | None = None
    description: str | None = None
    card: bool = True


@dataclass
class BuildSummary:
    out: Path
    books: int = 0
    leaves: int = 0
    units: int = 0
    units_dropped: int = 0
    questions: dict[str, int] = field(default_factory=dict)
    generated: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    cached_units: int = 0
    stages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    up_to_date: bool = False

    @property
    def transient_failures(self) -> list[tuple[str, str]]:
        """Failures a rerun may fix (the endpoint did not answer), as opposed to unusable replies."""
        return [f for f in self.failures if f[1].startswith("request failed")]

    def render(self) -> str:
        total = sum(self.questions.values())
        split_text = " / ".join(f"{self.questions.get(s, 0):,} {s}" for s in SPLITS)
        lines = [
            f"built {self.out}" + (" (already up to date)" if self.up_to_date else ""),
            f"  books {self.books}, leaves {self.leaves:,}, units {self.units:,}"
            + (f" (+{self.units_dropped} too short, left out)" if self.units_dropped else ""),
            f"  questions {total:,} ({split_text}); {self.generated:,} generated, "
            f"{sum(self.removed.values()):,} removed by filters",
            f"  requests sent {self.requests:,}; units answered from the cache {self.cached_units:,}",
        ]
        if self.removed:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.removed.items()))
            lines.append(f"  removed: {reasons}")
        lines.append("  stages: " + ", ".join(f"{k} {v}" for k, v in self.stages.items()))
        if self.failures:
            lines.append(f"  FAILED units {len(self.failures)} (details in {REPORT_FILE}):")
            lines += [f"    {uid}: {why}" for uid, why in self.failures[:10]]
            if len(self.failures) > 10:
                lines.append(f"    ... and {len(self.failures) - 10} more")
        lines.append(f"  time {self.seconds:.1f} s")
        return "\n".join(lines)


@dataclass(frozen=True)
class _BookSource:
    book: Book
    pdf: Path
    sha256: str


# ----------------------------------------------------------------------------------------------
# Books


def _pdf_dir_metadata(path: Path) -> dict[str, dict[str, Any]]:
    """A small TOML file of ``[[books]]`` entries (catalog field names, any domain) for
    ``--pdf-dir`` builds; a full catalog file also works."""
    from searchtome.ingest.catalog import RESTRICTIONS

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: catalog file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SearchTomeError(f"{path}: not valid TOML ({exc})") from None
    entries = data.get("books", [])
    if not isinstance(entries, list):
        raise SearchTomeError(f"{path}: 'books' must be a list of [[books]] tables")
    fields = set(Book.__dataclass_fields__)
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("book_id"), str):
            raise SearchTomeError(f"{path}: books entry {i} needs a book_id string")
        unknown = set(entry) - fields
        if unknown:
            raise SearchTomeError(
                f"{path}: books entry {i} ({entry['book_id']!r}) has unknown field(s) "
                f"{', '.join(sorted(unknown))}; known: {', '.join(sorted(fields))}"
            )
        for r in entry.get("restrictions", []):
            if r not in RESTRICTIONS:
                from searchtome.errors import unknown_name

                raise SearchTomeError(
                    f"{path}: books entry {i}: {unknown_name('restriction', r, RESTRICTIONS)}"
                )
        out[entry["book_id"]] = entry
    return out


def _books_from_pdf_dir(opts: BuildOptions) -> tuple[list[_BookSource], dict[str, Any]]:
    from searchtome.ingest.toc import default_book_id

    folder = opts.pdf_dir
    assert folder is not None
    if not folder.is_dir():
        raise SearchTomeError(f"{folder}: --pdf-dir must be an existing folder of PDF files")
    pdfs = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
    if not pdfs:
        raise SearchTomeError(f"{folder}: no .pdf files in this folder")
    meta = _pdf_dir_metadata(opts.catalog) if opts.catalog else {}
    seen: dict[str, Path] = {}
    sources = []
    for pdf in pdfs:
        book_id = default_book_id(pdf)
        if book_id in seen:
            raise SearchTomeError(
                f"{pdf}: gives book id {book_id!r}, like {seen[book_id].name}; rename one of them"
            )
        seen[book_id] = pdf
        entry = dict(meta.get(book_id, {}))
        entry.setdefault("domain", "unknown")
        entry.setdefault("title", pdf.stem)
        entry["book_id"] = book_id
        digest = sha256_file(pdf)
        entry["sha256"] = digest
        entry["size"] = pdf.stat().st_size
        book = Book.from_dict(entry)
        sources.append(_BookSource(book, pdf, digest))
    stray = sorted(set(meta) - set(seen))
    if stray:
        raise SearchTomeError(
            f"{opts.catalog}: entries {', '.join(stray)} match no PDF in {folder} "
            f"(book ids come from file names: {', '.join(sorted(seen))})"
        )
    if opts.books:
        missing = [b for b in opts.books if b not in seen]
        if missing:
            from searchtome.errors import unknown_name

            raise unknown_name("book", missing[0], seen)
        sources = [s for s in sources if s.book.book_id in opts.books]
    info = {
        "name": opts.name or f"searchtome-{folder.resolve().name}",
        "collection": {
            "kind": "pdf-dir",
            "files": {s.pdf.name: s.sha256 for s in sources},
            "metadata_sha256": stable_hash(meta) if meta else None,
        },
    }
    return sources, info


def _books_from_catalog(opts: BuildOptions) -> tuple[list[_BookSource], dict[str, Any]]:
    from searchtome.ingest.catalog import catalog_hash, load_catalog
    from searchtome.ingest.fetch import fetch_books

    catalog = load_catalog(opts.catalog)
    ids = list(opts.books) if opts.books else None
    result = fetch_books(catalog, ids, opts.source_dir)
    result.raise_for_failures()
    sources = []
    for book_id, path in result.paths.items():
        book = catalog.get(book_id)
        sources.append(_BookSource(book, Path(path), sha256_file(path)))
    sources.sort(key=lambda s: s.book.book_id)
    info = {
        "name": opts.name or catalog.name,
        "description": catalog.description or None,
        "collection": {
            "kind": "catalog",
            "catalog": catalog.name,
            "catalog_version": catalog.version,
            "catalog_sha256": catalog_hash(catalog),
            "books": sorted(s.book.book_id for s in sources),
        },
    }
    fetched = Counter(result.sources.values())
    info["_fetch"] = ", ".join(f"{n} from {k}" for k, n in sorted(fetched.items()))
    return sources, info


# ----------------------------------------------------------------------------------------------
# Extraction (content-addressed stage cache)


def _extract_key(src: _BookSource, infer_toc: bool) -> str:
    import pymupdf

    from searchtome.ingest.extract import FORMAT

    return stable_hash(
        {
            "pdf": src.sha256,
            "book_id": src.book.book_id,
            "infer_toc": infer_toc,
            "format": FORMAT,
            "searchtome": __version__,
            "pymupdf": pymupdf.VersionBind,
        }
    )


def _extract_all(sources: Sequence[_BookSource], infer_toc: bool) -> tuple[dict[str, Any], int]:
    from searchtome.ingest.extract import extract_book, read_extraction, write_extraction

    root = cache_dir("builds", "extract")
    out: dict[str, Any] = {}
    reused = 0
    for src in progress(sources, desc="extract", unit="book"):
        folder = root / f"{src.book.book_id}-{_extract_key(src, infer_toc)[:16]}"
        if folder.is_dir():
            try:
                out[src.book.book_id] = read_extraction(folder)
                reused += 1
                continue
            except SearchTomeError as exc:
                log.warning("cached extraction %s unusable (%s); extracting again", folder, exc)
        log.info("extracting %s from %s", src.book.book_id, src.pdf)
        extraction = extract_book(src.pdf, book_id=src.book.book_id, infer_toc=infer_toc)
        if not extraction.leaves:
            raise SearchTomeError(
                f"{src.pdf}: no ToC leaves found (the PDF has no usable outline); "
                "pass --infer-toc to infer headings from the page layout"
            )
        tmp = atomic_dir(folder)
        write_extraction(extraction, tmp)
        commit_dir(tmp, folder)
        out[src.book.book_id] = extraction
    return out, reused


# ----------------------------------------------------------------------------------------------
# Endpoint


@dataclass(frozen=True)
class _Endpoint:
    kind: str  # "openai-compatible", "local" or "cache"
    base_url: str | None = None


def _resolve_endpoint(opts: BuildOptions) -> _Endpoint:
    value = opts.endpoint or os.environ.get("OPENAI_BASE_URL")
    if not value:
        raise SearchTomeError(
            "no endpoint: pass --endpoint URL (an OpenAI-compatible server such as vLLM, TGI or "
            "llama.cpp), --endpoint local (SmolLM2-135M on this machine; weak questions), "
            "--endpoint cache (replay an imported cache), or set OPENAI_BASE_URL"
        )
    if value == "local":
        return _Endpoint("local")
    if value == "cache":
        return _Endpoint("cache")
    if "://" not in value:
        raise SearchTomeError(
            f"--endpoint {value!r} is not a URL; write e.g. http://localhost:8000/v1, or use "
            "'local' or 'cache'"
        )
    return _Endpoint("openai-compatible", value)


def _host_kind(host: str) -> str:
    from searchtome.llm.local import LOCAL_HOST_LABEL

    return "local" if host == LOCAL_HOST_LABEL else "openai-compatible"


# ----------------------------------------------------------------------------------------------
# The build


def _query_id(unit_id: str, position: int) -> str:
    leaf_id, _, unit = unit_id.partition("#")
    book_id, _, ordinal = leaf_id.partition("/")
    return f"{book_id}-{ordinal}-{unit}-q{position:02d}"


def build(opts: BuildOptions) -> BuildSummary:
    """Run every stage; returns what happened. Raises :class:`SearchTomeError` on bad input."""
    start = time.monotonic()
    summary = BuildSummary(out=opts.out)
    endpoint = _resolve_endpoint(opts)
    local = endpoint.kind == "local"
    defaults = LOCAL_DEFAULTS if local else REMOTE_DEFAULTS
    if opts.strictness is not None and opts.strictness not in STRICTNESS:
        from searchtome.errors import unknown_name

        raise unknown_name("strictness", opts.strictness, STRICTNESS)
    if opts.split_rule not in RULES:
        from searchtome.errors import unknown_name

        raise unknown_name("split rule", opts.split_rule, RULES)
    prompt = load_prompt(opts.prompt or defaults["prompt"])
    gen_cfg = GenerationConfig(
        prompt=prompt,
        n_questions=opts.questions_per_unit,
        strictness=opts.strictness or defaults["strictness"],
        repair=opts.repair,
    )
    sampling = SamplingParams(
        temperature=opts.temperature,
        top_p=opts.top_p,
        max_tokens=opts.max_tokens if opts.max_tokens is not None else defaults["max_tokens"],
        seed=opts.seed,
        stop=tuple(opts.stop),
        presence_penalty=opts.presence_penalty,
        frequency_penalty=opts.frequency_penalty,
        extra=dict(opts.sampling_extra),
    )
    unit_cfg = UnitConfig(min_chars=opts.unit_min_chars, drop_below=opts.unit_drop_below)
    unit_cfg.validate()
    split_cfg = SplitConfig(
        seed=opts.split_seed if opts.split_seed is not None else opts.seed,
        rule=opts.split_rule,
        ratios=opts.split_ratios or SplitConfig().ratios,
        leaves_in_train=opts.leaves_in_train,
    )
    split_cfg.validate()

    # -- books ----------------------------------------------------------------------------------
    if opts.pdf_dir is not None:
        if opts.source_dir is not None:
            raise SearchTomeError("--source-dir belongs to catalog builds; drop it with --pdf-dir")
        sources, collection = _books_from_pdf_dir(opts)
        summary.stages["fetch"] = f"{len(sources)} local PDF(s)"
    else:
        sources, collection = _books_from_catalog(opts)
        summary.stages["fetch"] = collection.pop("_fetch", "done")
    summary.books = len(sources)

    # -- extract --------------------------------------------------------------------------------
    extractions, reused = _extract_all(sources, opts.infer_toc)
    summary.stages["extract"] = (
        "skipped (cached)" if reused == len(sources) else f"{len(sources) - reused} extracted"
    )

    # -- units ----------------------------------------------------------------------------------
    units: list[Unit] = []
    dropped_units: list[Unit] = []
    leaves: list[Leaf] = []
    paragraphs: list[Paragraph] = []
    toc: list[TocNode] = []
    for src in sources:
        ex = extractions[src.book.book_id]
        got, lost = make_units(ex.leaves, ex.paragraphs, unit_cfg)
        units.extend(got)
        dropped_units.extend(lost)
        leaves.extend(ex.leaves)
        paragraphs.extend(ex.paragraphs)
        toc.extend(ex.toc.nodes)
    summary.leaves, summary.units, summary.units_dropped = (
        len(leaves),
        len(units),
        len(dropped_units),
    )
    if not units:
        raise SearchTomeError("the books have no text to ask questions about (no generation units)")

    # -- generate -------------------------------------------------------------------------------
    cache_path = opts.cache or default_cache_path()
    with ResponseCache(cache_path) as cache:
        outcomes, gen_info = _generate(opts, endpoint, gen_cfg, sampling, cache, units, summary)

    # -- filter ---------------------------------------------------------------------------------
    by_unit = {u.unit_id: u for u in units}
    titles = {leaf.leaf_id: leaf.title for leaf in leaves}
    candidates: list[Candidate] = []
    limits: dict[str, int] = {}
    for outcome in outcomes:
        limits[outcome.unit_id] = outcome.n_asked
        if outcome.ok:
            candidates += [
                Candidate(outcome.unit_id, i, q) for i, q in enumerate(outcome.questions, 1)
            ]
        else:
            summary.failures.append((outcome.unit_id, outcome.error or "unknown"))
    kept, removed = filter_questions(candidates, by_unit, opts.filters, titles=titles, limit=limits)
    summary.generated = len(candidates)
    summary.removed = dict(sorted(Counter(r for _, r in removed).items()))

    # -- split ----------------------------------------------------------------------------------
    items = [
        SplitItem(
            _query_id(c.unit_id, c.position),
            by_unit[c.unit_id].book_id,
            by_unit[c.unit_id].leaf_id,
            c.unit_id,
        )
        for c in kept
    ]
    split = assign_splits(items, split_cfg)
    queries = [
        Query(
            query_id=item.query_id,
            book_id=item.book_id,
            text=c.text,
            leaf_id=item.leaf_id,
            split=split.assignment[item.query_id],
            unit_id=c.unit_id,
        )
        for item, c in zip(items, kept, strict=True)
    ]
    summary.questions = dict(Counter(q.split for q in queries))

    # -- write ----------------------------------------------------------------------------------
    info = _manifest_info(
        opts, collection, sources, gen_cfg, sampling, unit_cfg, gen_info, split, summary
    )
    report = {
        "format": BUILD_FORMAT,
        "failed_units": [{"unit_id": u, "reason": r} for u, r in sorted(summary.failures)],
        "removed_questions": sorted(
            (
                {
                    "query_id": _query_id(c.unit_id, c.position),
                    "unit_id": c.unit_id,
                    "text": c.text,
                    "reason": r,
                }
                for c, r in removed
            ),
            key=lambda r: r["query_id"],
        ),
        "dropped_units": [
            {"unit_id": u.unit_id, "paragraph_ids": list(u.paragraph_ids), "chars": len(u.text)}
            for u in dropped_units
        ],
    }
    fingerprint = stable_hash(
        {
            "info": info,
            "report": report,
            "queries": [q.to_dict() for q in queries],
            "extractions": {s.book.book_id: _extract_key(s, opts.infer_toc) for s in sources},
            "books": [s.book.to_dict() for s in sources],
            "card": opts.card,
        }
    )
    info["build"] = {"format": BUILD_FORMAT, "fingerprint": fingerprint}
    if _up_to_date(opts.out, fingerprint):
        summary.up_to_date = True
        summary.stages["write"] = "skipped (up to date)"
    else:
        _write(
            opts, sources, extractions, toc, leaves, paragraphs, units, queries, info, report, split
        )
        summary.stages["write"] = "done"
    summary.seconds = time.monotonic() - start
    return summary


def _generate(
    opts: BuildOptions,
    endpoint: _Endpoint,
    gen_cfg: GenerationConfig,
    sampling: SamplingParams,
    cache: ResponseCache,
    units: Sequence[Unit],
    summary: BuildSummary,
) -> tuple[list[UnitOutcome], dict[str, Any]]:
    """Outcomes for every unit, asking the endpoint only for what the cache lacks."""
    from searchtome.generate.questions import NotCachedError
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
    endpoint: _Endpoint,
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


def _manifest_info(
    opts: BuildOptions,
    collection: dict[str, Any],
    sources: Sequence[_BookSource],
    gen_cfg: GenerationConfig,
    sampling: SamplingParams,
    unit_cfg: UnitConfig,
    gen_info: dict[str, Any],
    split: Any,
    summary: BuildSummary,
) -> dict[str, Any]:
    import pyarrow
    import pymupdf

    split_m = split.manifest
    counts = split_m["counts"]
    generation = {
        **gen_info,
        "prompt_version": gen_cfg.prompt.version,
        "prompt_sha256": gen_cfg.prompt.sha256,
        "seed": opts.seed,
        "sampling": sampling.fingerprint(),
        "questions_per_unit": gen_cfg.n_questions,
        "strictness": gen_cfg.strictness,
        "repair": gen_cfg.repair,
        "filters": opts.filters.to_dict(),
        "units": {"min_chars": unit_cfg.min_chars, "drop_below": unit_cfg.drop_below},
        "counts": {
            "units": summary.units,
            "units_failed": len(summary.failures),
            "units_too_short": summary.units_dropped,
            "questions_generated": summary.generated,
            "questions_kept": sum(counts[s]["questions"] for s in SPLITS),
            "removed": summary.removed,
        },
    }
    generation = {k: v for k, v in generation.items() if v is not None}
    info: dict[str, Any] = {
        "name": collection.get("name"),
        "description": opts.description or collection.get("description"),
        "collection": collection["collection"],
        "versions": {
            "searchtome": __version__,
            "pymupdf": pymupdf.VersionBind,
            "pyarrow": pyarrow.__version__,
        },
        "extraction": {"infer_toc": opts.infer_toc},
        "generation": generation,
        "split": {
            "rule": split_m["rule"],
            "algorithm": split_m["algorithm"],
            "seed": split_m["seed"],
            "ratios": split_m["ratios"],
            "leaves_in_train": split_m["leaves_in_train"],
            "questions": {s: counts[s]["questions"] for s in SPLITS},
            "units": {s: counts[s]["units"] for s in SPLITS},
            "leaf_coverage": {s: counts[s]["leaves"] for s in SPLITS},
            "leaves_missing_from_train": counts["leaves_missing_from_train"],
            "manifest": SPLITS_FILE,
        },
        "restrictions": {
            s.book.book_id: list(s.book.restrictions) for s in sources if s.book.restrictions
        },
    }
    return {k: v for k, v in info.items() if v is not None}


def _up_to_date(out: Path, fingerprint: str) -> bool:
    from searchtome.dataset.layout import MANIFEST_FILE, verify_manifest

    manifest = out / MANIFEST_FILE
    if not manifest.is_file():
        return False
    try:
        recorded = read_json(manifest).get("build", {}).get("fingerprint")
        return recorded == fingerprint and not verify_manifest(out)
    except (SearchTomeError, AttributeError):
        return False


def _write(
    opts: BuildOptions,
    sources: Sequence[_BookSource],
    extractions: dict[str, Any],
    toc: list[TocNode],
    leaves: list[Leaf],
    paragraphs: list[Paragraph],
    units: list[Unit],
    queries: list[Query],
    info: dict[str, Any],
    report: dict[str, Any],
    split: Any,
) -> None:
    from searchtome.dataset.layout import (
        BookInfo,
        qrels_file,
        queries_file,
        write_dataset,
        write_manifest,
    )

    out = opts.out
    if out.exists() and not out.is_dir():
        raise SearchTomeError(f"{out}: exists and is not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise SearchTomeError(
            f"{out}: folder exists and is not a SearchTome dataset; choose an empty or new --out"
        )
    books = [
        BookInfo(
            s.book,
            n_pages=extractions[s.book.book_id].toc.n_pages,
            toc_source=extractions[s.book.book_id].toc.source,
        )
        for s in sources
    ]
    tmp = atomic_dir(out)
    try:
        for _ in progress(range(1), desc="write", unit="dataset"):
            write_dataset(
                tmp,
                books=books,
                toc=toc,
                leaves=leaves,
                queries=queries,
                paragraphs=paragraphs,
                units=units,
            )
            files = {s: [queries_file(s), qrels_file(s)] for s in SPLITS}
            write_json(
                tmp / SPLITS_FILE, {**split.manifest, "sha256": split_file_hashes(tmp, files)}
            )
            write_json(tmp / REPORT_FILE, report)
            write_manifest(tmp, info)
            if opts.card:
                _write_card(tmp)
        commit_dir(tmp, out)
    except BaseException:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_card(folder: Path) -> None:
    try:
        from searchtome.dataset.card import write_card
    except ImportError:  # the card module is optional while the project grows
        log.info("no dataset card writer available; skipping README.md")
        return
    write_card(folder)


# ----------------------------------------------------------------------------------------------
# Rebuilding someone else's dataset


def settings_from_manifest(
    opts: BuildOptions, manifest_path: Path, keep: frozenset[str] | set[str] = frozenset()
) -> BuildOptions:
    """``opts`` with every setting that shapes the data taken from a dataset's manifest
    (model, prompt, sampling, questions per unit, units, filters, splits, ToC options); the
    books, endpoint, cache and output stay as given, and so do the fields named in ``keep``
    (options the user gave explicitly; ``filters.<name>`` for one filter setting)."""
    path = manifest_path / "manifest.json" if manifest_path.is_dir() else manifest_path
    m = read_json(path)
    gen, split = m.get("generation"), m.get("split")
    if not isinstance(gen, dict) or not isinstance(split, dict) or "sampling" not in gen:
        raise SearchTomeError(f"{path}: not the manifest of a `searchtome build` dataset")
    sampling = gen["sampling"]
    units = gen.get("units", {})
    recorded: dict[str, Any] = {
        "model": gen["model"],
        "prompt": gen["prompt_version"],
        "seed": gen.get("seed", opts.seed),
        "questions_per_unit": gen.get("questions_per_unit", opts.questions_per_unit),
        "strictness": gen.get("strictness"),
        "repair": gen.get("repair", True),
        "temperature": sampling.get("temperature"),
        "top_p": sampling.get("top_p"),
        "max_tokens": sampling.get("max_tokens"),
        "presence_penalty": sampling.get("presence_penalty"),
        "frequency_penalty": sampling.get("frequency_penalty"),
        "stop": tuple(sampling.get("stop", ())),
        "sampling_extra": dict(sampling.get("extra", {})),
        "unit_min_chars": units.get("min_chars", opts.unit_min_chars),
        "unit_drop_below": units.get("drop_below", opts.unit_drop_below),
        "split_rule": split.get("rule", opts.split_rule),
        "split_seed": split.get("seed"),
        "split_ratios": split.get("ratios"),
        "leaves_in_train": split.get("leaves_in_train", True),
        "infer_toc": bool(m.get("extraction", {}).get("infer_toc", False)),
        "name": m.get("name"),
        "description": m.get("description"),
    }
    if "seed" in keep and "split_seed" not in keep:
        recorded["split_seed"] = None  # an explicit --seed moves the split too, as usual
    values = {k: v for k, v in recorded.items() if k not in keep}
    filters = dict(gen.get("filters", {}))
    filters.update({k: v for k, v in opts.filters.to_dict().items() if f"filters.{k}" in keep})
    values["filters"] = FilterConfig(**filters)
    new = BuildOptions(**{**opts.__dict__, **values})
    prompt = load_prompt(new.prompt or DEFAULT_PROMPT)
    if "prompt" not in keep and gen.get("prompt_sha256") and prompt.sha256 != gen["prompt_sha256"]:
        raise SearchTomeError(
            f"{path}: was built with a different {gen['prompt_version']!r} template (SHA-256 "
            f"{gen['prompt_sha256'][:12]}...); pass --prompt with that template file"
        )
    return new


class _Explicit(argparse.Action):
    """Stores like ``store`` and remembers that the user gave the option (for
    ``--settings-from``, where given options win over recorded ones)."""

    def __init__(
        self, *args: Any, const_value: Any = None, append: bool = False, **kwargs: Any
    ) -> None:
        self.const_value = const_value
        self.append = append
        if const_value is not None:
            kwargs["nargs"] = 0
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        value = self.const_value if self.const_value is not None else values
        if self.append:
            value = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, value)
        explicit = getattr(namespace, "explicit", None) or set()
        explicit.add(self.dest)
        namespace.explicit = explicit


def _tracked(group: Any) -> Any:
    """Make every option of ``group`` record that it was given (see :class:`_Explicit`)."""
    add = group.add_argument

    def add_argument(*names: str, **kwargs: Any) -> Any:
        action = kwargs.pop("action", None)
        if action == "store_true":
            kwargs.update(const_value=True, default=False)
        elif action == "append":
            kwargs["append"] = True
        elif action is not None:
            raise TypeError(f"untracked action {action!r}")
        return add(*names, action=_Explicit, **kwargs)

    group.add_argument = add_argument
    return group


# argparse dest → BuildOptions field (or filters.<field>) for --settings-from.
_DEST_FIELD = {
    "no_repair": "repair",
    "no_leaves_in_train": "leaves_in_train",
    "min_question_chars": "filters.min_chars",
    "max_question_chars": "filters.max_chars",
    "drop_title_leakage": "filters.drop_title_leakage",
    "drop_self_reference": "filters.drop_self_reference",
}


def compare_files(out: Path, reference: Path) -> list[str]:
    """Files of ``out`` whose SHA-256 differs from a reference dataset's manifest."""
    from searchtome.dataset.layout import diff_hashes

    ref = reference / "manifest.json" if reference.is_dir() else reference
    return diff_hashes(
        read_json(ref).get("files", {}),
        read_json(out / "manifest.json").get("files", {}),
        missing="only in the reference",
        extra="not in the reference",
        changed="differs",
    )


# ----------------------------------------------------------------------------------------------
# CLI


def _parse_books(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    ids = tuple(dict.fromkeys(b.strip() for b in text.split(",") if b.strip()))
    return ids or None


def _n_questions(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"top_k\": 40}'")
    return value


def _build_command(args: argparse.Namespace) -> int:
    ratios = parse_ratios(args.split_ratios) if args.split_ratios else None
    filters = FilterConfig(
        min_chars=args.min_question_chars,
        max_chars=args.max_question_chars,
        drop_title_leakage=args.drop_title_leakage,
        drop_self_reference=args.drop_self_reference,
    )
    opts = BuildOptions(
        out=args.out,
        catalog=args.catalog,
        books=_parse_books(args.books),
        source_dir=args.source_dir,
        pdf_dir=args.pdf_dir,
        endpoint=args.endpoint or args.base_url,
        api_key=args.api_key,
        model=args.model,
        seed=args.seed,
        split_seed=args.split_seed,
        questions_per_unit=args.questions_per_unit,
        concurrency=args.concurrency,
        prompt=args.prompt,
        strictness=args.strictness,
        repair=not args.no_repair,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        presence_penalty=args.presence_penalty,
        frequency_penalty=args.frequency_penalty,
        stop=tuple(args.stop or ()),
        sampling_extra=args.sampling_extra or {},
        timeout=args.timeout,
        max_attempts=args.max_attempts,
        cache=args.cache,
        unit_min_chars=args.unit_min_chars,
        unit_drop_below=args.unit_drop_below,
        filters=filters,
        split_rule=args.split_rule,
        split_ratios=ratios,
        leaves_in_train=not args.no_leaves_in_train,
        infer_toc=args.infer_toc,
        name=args.name,
        description=args.description,
        card=not args.no_card,
    )
    if args.settings_from:
        given = {_DEST_FIELD.get(d, d) for d in getattr(args, "explicit", set())}
        opts = settings_from_manifest(opts, args.settings_from, keep=given)
    summary = build(opts)
    print(summary.render())
    if args.check_against:
        problems = compare_files(opts.out, args.check_against)
        if problems:
            print(
                f"searchtome: {len(problems)} file(s) differ from {args.check_against}:",
                file=sys.stderr,
            )
            for line in problems[:20]:
                print(f"  {line}", file=sys.stderr)
            return 4
        print(f"  identical to {args.check_against} (every file's SHA-256 matches)")
    if summary.transient_failures:
        print(
            f"searchtome: {len(summary.transient_failures)} unit(s) got no answer from the "
            "endpoint; rerun the same command to retry only those",
            file=sys.stderr,
        )
        return 3
    return 0


def _cache_export(args: argparse.Namespace) -> int:
    with ResponseCache(args.cache or default_cache_path()) as cache:
        n = cache.export(args.file, model=args.model)
    print(f"exported {n:,} replies to {args.file}")
    return 0


def _cache_import(args: argparse.Namespace) -> int:
    with ResponseCache(args.cache or default_cache_path()) as cache:
        stats = cache.import_file(args.file, replace=args.replace)
        total = len(cache)
    print(
        f"imported {args.file}: {stats['added']:,} new, {stats['same']:,} already present, "
        f"{stats['conflicts']:,} conflicting ({'replaced' if args.replace else 'kept ours'}); "
        f"cache now holds {total:,} replies"
    )
    return 0


def _cache_info(args: argparse.Namespace) -> int:
    path = args.cache or default_cache_path()
    with ResponseCache(path) as cache:
        rows = Counter((r["host"], r["model"], r["prompt_version"]) for r in cache._rows())
    print(f"{path}: {sum(rows.values()):,} replies")
    for (host, model, prompt), n in sorted(rows.items()):
        print(f"  {n:>8,}  {model}  via {host}  prompt {prompt}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "build",
        help="build a SearchTome dataset: fetch, extract, generate questions, split, write",
        description="Build a dataset from a catalog (or any folder of PDFs): fetch and verify "
        "the PDFs, extract ToC leaves and paragraphs, ask an OpenAI-compatible endpoint for "
        "questions about every generation unit (replies cached; a rerun resumes), filter, "
        "split, and write parquet files + manifest.json + README.md to --out.",
    )
    src = _tracked(p.add_argument_group("books"))
    src.add_argument(
        "--catalog",
        type=Path,
        metavar="FILE",
        help="catalog TOML (default: the packaged SearchTome v1); with --pdf-dir: optional [[books]] metadata (domain, title, licence)",
    )
    src.add_argument("--books", metavar="ID,...", help="only these book ids")
    src.add_argument(
        "--source-dir", type=Path, metavar="DIR", help="folder with already-downloaded PDFs"
    )
    src.add_argument(
        "--pdf-dir",
        type=Path,
        metavar="DIR",
        help="build from every *.pdf in DIR (book id from the file name, domain 'unknown' unless --catalog says)",
    )
    src.add_argument(
        "--infer-toc",
        action="store_true",
        help="infer headings from the layout when a PDF has no outline",
    )
    llm = _tracked(p.add_argument_group("question generation"))
    llm.add_argument(
        "--endpoint",
        metavar="URL|local|cache",
        help="OpenAI-compatible base URL (e.g. http://localhost:8000/v1), 'local' (SmolLM2-135M served on this machine) or 'cache' (replay the reply cache only); default: $OPENAI_BASE_URL",
    )
    llm.add_argument("--base-url", metavar="URL", help="same as --endpoint URL")
    llm.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key (default: $OPENAI_API_KEY; never written anywhere)",
    )
    llm.add_argument(
        "--model",
        metavar="NAME",
        help=f"model name (default: {DEFAULT_MODEL}; SmolLM2-135M-Instruct with --endpoint local)",
    )
    llm.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="sampling seed and split seed (default: %(default)s)",
    )
    llm.add_argument(
        "--questions-per-unit",
        type=_n_questions,
        default=6,
        metavar="N|auto",
        help="questions asked per unit; 'auto' scales 2-10 with unit length (default: %(default)s)",
    )
    llm.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="requests in flight (default: 16; 2 with --endpoint local)",
    )
    llm.add_argument(
        "--prompt",
        metavar="VERSION|FILE",
        help=f"prompt template (default: {DEFAULT_PROMPT}; {FEWSHOT_PROMPT} with --endpoint local)",
    )
    llm.add_argument(
        "--strictness",
        choices=STRICTNESS,
        help="how replies are read (default: json; lenient with --endpoint local)",
    )
    llm.add_argument(
        "--no-repair", action="store_true", help="no repair request after an unusable reply"
    )
    llm.add_argument("--temperature", type=float, default=0.0, help="(default: %(default)s)")
    llm.add_argument("--top-p", type=float)
    llm.add_argument("--presence-penalty", type=float)
    llm.add_argument("--frequency-penalty", type=float)
    llm.add_argument(
        "--max-tokens", type=int, help="reply budget (default: 512; 96 with --endpoint local)"
    )
    llm.add_argument("--stop", action="append", metavar="TEXT", help="stop sequence (repeatable)")
    llm.add_argument(
        "--sampling-extra",
        type=_json_object,
        metavar="JSON",
        help="extra request fields, e.g. '{\"top_k\": 40}'",
    )
    llm.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per request (default: %(default)s)"
    )
    llm.add_argument(
        "--max-attempts",
        type=int,
        default=6,
        help="tries per request on 429/5xx/timeouts (default: %(default)s)",
    )
    llm.add_argument(
        "--cache",
        type=Path,
        metavar="FILE",
        help="reply cache (default: $SEARCHTOME_HOME/llm/responses.sqlite)",
    )
    flt = _tracked(p.add_argument_group("units and filters"))
    flt.add_argument(
        "--unit-min-chars",
        type=int,
        default=DEFAULT_MIN_CHARS,
        help="merge shorter paragraphs into the next (default: %(default)s)",
    )
    flt.add_argument(
        "--unit-drop-below",
        type=int,
        default=DEFAULT_DROP_BELOW,
        help="leave out units shorter than this (default: %(default)s)",
    )
    flt.add_argument("--min-question-chars", type=int, default=FilterConfig.min_chars)
    flt.add_argument("--max-question-chars", type=int, default=FilterConfig.max_chars)
    flt.add_argument(
        "--drop-title-leakage",
        action="store_true",
        help="drop questions that contain their leaf's title",
    )
    flt.add_argument(
        "--drop-self-reference",
        action="store_true",
        help="drop questions that mention 'the passage'/'the text'",
    )
    spl = _tracked(p.add_argument_group("splits"))
    spl.add_argument(
        "--split-rule", choices=RULES, default="by-unit", help="(default: %(default)s)"
    )
    spl.add_argument(
        "--split-ratios",
        metavar="TRAIN,DEV,TEST",
        help="default: the paper's 1056,388,1746 (The Whole Child)",
    )
    spl.add_argument("--split-seed", type=int, help="default: --seed")
    spl.add_argument(
        "--no-leaves-in-train",
        action="store_true",
        help="do not force one unit of every leaf into train",
    )
    out = _tracked(p.add_argument_group("output"))
    out.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="dataset folder to write (replaced atomically)",
    )
    out.add_argument("--name", help="dataset name (default: the catalog's)")
    out.add_argument("--description", help="one-paragraph description for the card")
    out.add_argument("--no-card", action="store_true", help="do not write README.md")
    out.add_argument(
        "--settings-from",
        type=Path,
        metavar="DATASET|MANIFEST",
        help="take every data-shaping setting (model, prompt, sampling, units, filters, splits) "
        "from an existing dataset's manifest.json, to rebuild it",
    )
    out.add_argument(
        "--check-against",
        type=Path,
        metavar="DATASET|MANIFEST",
        help="after building, compare every file's SHA-256 with this dataset's manifest; "
        "exit 4 when any differs",
    )
    p.set_defaults(func=_build_command)

    c = subparsers.add_parser(
        "cache",
        help="export, import or inspect the LLM reply cache",
        description="The reply cache lets anyone rebuild a dataset without an LLM: export it "
        "after a build, import it elsewhere, then `searchtome build --endpoint cache ...`.",
    )
    csub = c.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    e = csub.add_parser("export", help="write every cached reply to one .jsonl.gz file")
    e.add_argument("file", type=Path, metavar="FILE")
    e.add_argument("--model", help="only this model's replies")
    e.add_argument("--cache", type=Path, metavar="DB")
    e.set_defaults(func=_cache_export)
    i = csub.add_parser("import", help="merge an exported file into the cache")
    i.add_argument("file", type=Path, metavar="FILE")
    i.add_argument("--replace", action="store_true", help="on conflict, take the file's reply")
    i.add_argument("--cache", type=Path, metavar="DB")
    i.set_defaults(func=_cache_import)
    n = csub.add_parser("info", help="count cached replies by model, endpoint and prompt")
    n.add_argument("--cache", type=Path, metavar="DB")
    n.set_defaults(func=_cache_info)
