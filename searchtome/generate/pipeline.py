"""``build``: catalog (or a folder of PDFs) → fetch → extract → generate → filter → split → write.

Stages and what makes them skip:

* **fetch** — the fetch module's content-addressed download cache (a verified PDF is never
  downloaded twice); see :mod:`searchtome.generate.sources`.
* **extract** — ``$SEARCHTOME_HOME/builds/extract/<book>-<key>/``, keyed by the PDF's SHA-256,
  the book id, the ToC options (with a catalog book's outline depth, when it has one) and the
  searchtome/PyMuPDF versions.
* **generate** — the SQLite reply cache (:mod:`searchtome.llm.cache`): only requests it lacks
  are sent; when it lacks none, no endpoint is contacted (``--endpoint local`` does not even
  start its server); see :mod:`searchtome.generate.endpoint`.
* **filter / split** — cheap and deterministic: always recomputed. Books with the paper's
  figures are then compared with them (:mod:`searchtome.generate.paper`).
* **write** — skipped when ``--out`` already holds a dataset whose manifest records the same
  build fingerprint (a hash of every input, setting and generated reply) and whose files still
  match their recorded SHA-256; see :mod:`searchtome.generate.output`.

Nothing in the output depends on the clock, the machine or the paths used: the same catalog,
cache and settings give the same bytes.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from searchtome.dataset.manifest import BuildRecord
from searchtome.errors import SearchTomeError, unknown_name
from searchtome.generate.endpoint import Endpoint, generate, resolve_endpoint
from searchtome.generate.manifest import BUILD_FORMAT, BuildFacts, manifest_info
from searchtome.generate.options import BuildOptions
from searchtome.generate.output import BuildOutput, up_to_date, write_output
from searchtome.generate.paper import check_leaves, paper_comparison
from searchtome.generate.questions import (
    STRICTNESS,
    Candidate,
    GenerationConfig,
    UnitOutcome,
    filter_questions,
    load_prompt,
)
from searchtome.generate.sources import (
    BookSource,
    CollectionInfo,
    books_from_catalog,
    books_from_pdf_dir,
    extract_all,
    extract_key,
)
from searchtome.generate.splits import RULES, SplitConfig, SplitItem, assign_splits
from searchtome.generate.summary import BuildSummary
from searchtome.generate.units import UnitConfig, make_units
from searchtome.io import stable_hash
from searchtome.llm.cache import ResponseCache, default_cache_path
from searchtome.llm.client import SamplingParams
from searchtome.records import Leaf, Paragraph, Query, TocNode, Unit


@dataclass(frozen=True)
class _Configs:
    """The stage configurations one build derives from its options and endpoint."""

    generation: GenerationConfig
    sampling: SamplingParams
    units: UnitConfig
    split: SplitConfig


@dataclass
class _Texts:
    """What the books' extractions give the later stages."""

    units: list[Unit] = field(default_factory=list)
    dropped_units: list[Unit] = field(default_factory=list)
    leaves: list[Leaf] = field(default_factory=list)
    paragraphs: list[Paragraph] = field(default_factory=list)
    toc: list[TocNode] = field(default_factory=list)


def _query_id(unit_id: str, position: int) -> str:
    leaf_id, _, unit = unit_id.partition("#")
    book_id, _, ordinal = leaf_id.partition("/")
    return f"{book_id}-{ordinal}-{unit}-q{position:02d}"


def build(opts: BuildOptions) -> BuildSummary:
    """Run every stage; returns what happened. Raises :class:`SearchTomeError` on bad input."""
    start = time.monotonic()
    summary = BuildSummary(out=opts.out)
    endpoint = resolve_endpoint(opts)
    configs = _configs(opts, endpoint)
    sources, collection = _books(opts, summary)

    extractions, reused = extract_all(sources, opts.infer_toc)
    summary.stages["extract"] = (
        "skipped (cached)" if reused == len(sources) else f"{len(sources) - reused} extracted"
    )
    check_leaves(sources, extractions)
    texts = _units(sources, extractions, configs.units, summary)

    with ResponseCache(opts.cache or default_cache_path()) as cache:
        outcomes, gen_info = generate(
            opts, endpoint, configs.generation, configs.sampling, cache, texts.units, summary
        )
    by_unit = {u.unit_id: u for u in texts.units}
    kept, removed = _filter(opts, outcomes, by_unit, texts.leaves, summary)
    check_failures(opts, summary)
    queries, split = _split(kept, by_unit, configs.split, summary)
    summary.paper = paper_comparison(sources, extractions, queries)

    facts = BuildFacts(
        collection,
        sources,
        configs.generation,
        configs.sampling,
        configs.units,
        gen_info,
        split,
        summary,
    )
    info = manifest_info(opts, facts)
    report = _report(summary, removed, texts.dropped_units)
    if summary.paper:  # left out without figures, so such builds keep their report and bytes
        report["paper_comparison"] = summary.paper
    fingerprint = stable_hash(
        {
            "info": info.to_dict(files=False, format=False),
            "report": report,
            "queries": [q.to_dict() for q in queries],
            "extractions": {s.book.book_id: extract_key(s, opts.infer_toc) for s in sources},
            "books": [s.book.to_dict() for s in sources],
            "card": opts.card,
        }
    )
    info = replace(info, build=BuildRecord(format=BUILD_FORMAT, fingerprint=fingerprint))
    if up_to_date(opts.out, fingerprint):
        summary.up_to_date = True
        summary.stages["write"] = "skipped (up to date)"
    else:
        output = BuildOutput(
            sources,
            extractions,
            texts.toc,
            texts.leaves,
            texts.paragraphs,
            texts.units,
            queries,
            info,
            report,
            split,
        )
        write_output(opts, output)
        summary.stages["write"] = "done"
    summary.seconds = time.monotonic() - start
    return summary


class TooManyFailures(SearchTomeError):
    """More units failed than ``max_failed_units`` allows; nothing was written."""

    exit_code = 3


def check_failures(opts: BuildOptions, summary: BuildSummary) -> None:
    """Stop before writing when the failed share of units passes ``opts.max_failed_units``."""
    failed, total = len(summary.failures), summary.units
    if not failed or failed <= opts.max_failed_units * total:
        return
    no_answer = len(summary.transient_failures)
    unit, reason = summary.failures[0]
    raise TooManyFailures(
        f"{failed:,} of {total:,} units failed ({failed / total:.0%}, above --max-failed-units "
        f"{opts.max_failed_units:g}): {no_answer:,} got no answer, {failed - no_answer:,} gave "
        f"unusable replies (first: {unit}: {reason}); nothing written to {opts.out}; fix the "
        "endpoint and rerun (answered units are cached and unusable replies asked again), or "
        "pass --max-failed-units 1 to write what there is"
    )


def _configs(opts: BuildOptions, endpoint: Endpoint) -> _Configs:
    """Each stage's configuration, the endpoint's defaults filling what ``opts`` leaves open;
    every setting is checked here, before any book is fetched."""
    defaults = endpoint.defaults
    if opts.strictness is not None and opts.strictness not in STRICTNESS:
        raise unknown_name("strictness", opts.strictness, STRICTNESS)
    if opts.split_rule not in RULES:
        raise unknown_name("split rule", opts.split_rule, RULES)
    prompt = load_prompt(opts.prompt or defaults["prompt"])
    generation = GenerationConfig(
        prompt=prompt,
        n_questions=(
            opts.questions_per_unit
            if opts.questions_per_unit is not None
            else defaults["questions_per_unit"]
        ),
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
    if not 0 <= opts.max_failed_units <= 1:
        raise SearchTomeError(
            f"--max-failed-units must be a share between 0 and 1, got {opts.max_failed_units:g}"
        )
    units = UnitConfig(min_chars=opts.unit_min_chars, drop_below=opts.unit_drop_below)
    units.validate()
    split = SplitConfig(
        seed=opts.split_seed if opts.split_seed is not None else opts.seed,
        rule=opts.split_rule,
        ratios=opts.split_ratios or defaults["split_ratios"],
        leaves_in_train=opts.leaves_in_train,
    )
    split.validate()
    return _Configs(generation, sampling, units, split)


def _books(opts: BuildOptions, summary: BuildSummary) -> tuple[list[BookSource], CollectionInfo]:
    if opts.pdf_dir is not None:
        if opts.source_dir is not None:
            raise SearchTomeError("--source-dir belongs to catalog builds; drop it with --pdf-dir")
        sources, collection = books_from_pdf_dir(opts)
        summary.stages["fetch"] = f"{len(sources)} local PDF(s)"
    else:
        sources, collection = books_from_catalog(opts)
        summary.stages["fetch"] = collection.fetched
    summary.books = len(sources)
    return sources, collection


def _units(
    sources: Sequence[BookSource],
    extractions: dict[str, Any],
    cfg: UnitConfig,
    summary: BuildSummary,
) -> _Texts:
    texts = _Texts()
    for src in sources:
        ex = extractions[src.book.book_id]
        got, lost = make_units(ex.leaves, ex.paragraphs, cfg)
        texts.units.extend(got)
        texts.dropped_units.extend(lost)
        texts.leaves.extend(ex.leaves)
        texts.paragraphs.extend(ex.paragraphs)
        texts.toc.extend(ex.toc.nodes)
    summary.leaves = len(texts.leaves)
    summary.units = len(texts.units)
    summary.units_dropped = len(texts.dropped_units)
    if not texts.units:
        raise SearchTomeError("the books have no text to ask questions about (no generation units)")
    return texts


def _filter(
    opts: BuildOptions,
    outcomes: Sequence[UnitOutcome],
    by_unit: dict[str, Unit],
    leaves: Sequence[Leaf],
    summary: BuildSummary,
) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
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
    return kept, removed


def _split(
    kept: Sequence[Candidate], by_unit: dict[str, Unit], cfg: SplitConfig, summary: BuildSummary
) -> tuple[list[Query], Any]:
    items = [
        SplitItem(
            _query_id(c.unit_id, c.position),
            by_unit[c.unit_id].book_id,
            by_unit[c.unit_id].leaf_id,
            c.unit_id,
        )
        for c in kept
    ]
    split = assign_splits(items, cfg)
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
    return queries, split


def _report(
    summary: BuildSummary,
    removed: Sequence[tuple[Candidate, str]],
    dropped_units: Sequence[Unit],
) -> dict[str, Any]:
    """``build-report.json``: failed units, removed questions and dropped units, with reasons."""
    return {
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
