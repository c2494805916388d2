"""The scorer: per-query values of any registered measures for a run against qrels.

**Missing queries** count as misses: every query in the qrels gets a value, 0 when the run has
no ranking for it (ir_measures and ranx behave this way; pytrec_eval and BEIR silently drop such
queries and average over the rest). A query with no relevant document scores 0 on every measure.
Rankings are scored in the order given (see the tie rule in :mod:`searchtome.metrics.ties`).
Measures the registry does not hold are computed by ir_measures (:mod:`.external`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from searchtome.errors import SearchTomeError
from searchtome.metrics.budget import BudgetFamily, reading
from searchtome.metrics.external import external_values
from searchtome.metrics.family import Ranked
from searchtome.metrics.measures import DEFAULT_MEASURES, Measure, measure_names, parse_measure
from searchtome.metrics.qrels import Qrels
from searchtome.metrics.structure import STRUCTURE_MEASURES
from searchtome.metrics.ties import TIE_RULE, ties_that_matter
from searchtome.runs import Run

if TYPE_CHECKING:  # only annotations: scoring against qrels never loads a dataset module
    from searchtome.dataset.loader import Dataset

log = logging.getLogger(__name__)


def _positives(qrels: Qrels) -> dict[str, tuple[tuple[str, int], ...]]:
    """Relevant (doc, rel) pairs per query, highest relevance first; cached on the qrels."""
    cached = getattr(qrels, "_positive_cache", None)
    if cached is None:
        cached = {
            qid: tuple(sorted(((d, r) for d, r in docs.items() if r > 0), key=lambda x: -x[1]))
            for qid, docs in qrels.items()
        }
        if isinstance(qrels, Qrels):
            qrels._positive_cache = cached  # type: ignore[attr-defined]
    return cached


def _gain_matrix(
    run: Run,
    positives: Mapping[str, tuple[tuple[str, int], ...]],
    query_ids: Sequence[str],
    depth: int,
) -> np.ndarray:
    """Relevance of the first ``depth`` ranked ids of each query (0 for unjudged ids).

    Walks the (few) relevant ids of a query and finds each in the ranking with ``list.index``
    (C speed) instead of looking up every ranked id: one gold per query is the common case.
    """
    rows: list[int] = []
    cols: list[int] = []
    vals: list[int] = []
    rankings = run.rankings
    for i, qid in enumerate(query_ids):
        ranking = rankings.get(qid)
        relevant = positives.get(qid)
        if not ranking or not relevant:
            continue
        top = ranking[:depth] if len(ranking) > depth else ranking
        for doc, rel in relevant:
            try:
                pos = top.index(doc)
            except ValueError:
                continue
            rows.append(i)
            cols.append(pos)
            vals.append(rel)
    gains = np.zeros((len(query_ids), max(depth, 1)), dtype=np.float64)
    gains[rows, cols] = vals
    return gains


def _ideal(
    positives: Mapping[str, tuple[tuple[str, int], ...]], query_ids: Sequence[str], width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Number of relevant ids per query and the ideal gains (sorted, zero-padded to ``width``)."""
    n_rel = np.zeros(len(query_ids), dtype=np.float64)
    ideal = np.zeros((len(query_ids), max(width, 1)), dtype=np.float64)
    for i, qid in enumerate(query_ids):
        relevant = positives.get(qid, ())
        n_rel[i] = len(relevant)
        if relevant:
            rels = [r for _, r in relevant[:width]]
            ideal[i, : len(rels)] = rels
    return n_rel, ideal


def rank_arrays(
    run: Run, qrels: Qrels, measures: Sequence[Measure], query_ids: Sequence[str]
) -> Ranked:
    """The arrays every measure reads, deep enough for the largest cutoff in ``measures``."""
    longest = max((len(r) for r in run.rankings.values()), default=0)
    # Ranks past the longest ranking hold nothing: a cut-off beyond it needs no deeper arrays
    # (each measure slices up to its own k; P@k still divides by k).
    depth = max([min(m.cutoff or longest, longest) for m in measures] + [1])
    positives = _positives(qrels)
    gains = _gain_matrix(run, positives, query_ids, depth)
    uncut = any(m.definition.uncut_ideal and m.cutoff is None for m in measures)
    deepest = max([m.cutoff or 0 for m in measures if m.definition.uncut_ideal] + [0])
    most_relevant = max((len(v) for v in positives.values()), default=0)
    # The ideal ranking of nDCG@k needs min(k, most relevant) ranks, uncut nDCG all of them.
    width = max(depth, most_relevant if uncut else min(deepest, most_relevant))
    n_rel, ideal = _ideal(positives, query_ids, width)
    discount = 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))
    return Ranked(gains, gains > 0, n_rel, ideal, discount, depth, width)


def evaluate_arrays(
    run: Run,
    qrels: Qrels,
    measures: Iterable[str | Measure] = DEFAULT_MEASURES,
    query_ids: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Per-query values as arrays aligned with ``query_ids`` (default: the qrels' queries)."""
    parsed = [parse_measure(m) for m in measures]
    priced = [str(m) for m in parsed if isinstance(m.definition, BudgetFamily)]
    if priced:
        raise SearchTomeError(
            f"{', '.join(priced)}: token-budget measures read the dataset's section texts, not "
            "qrels; score against a dataset (--data)"
        )
    structural = [str(m) for m in parsed if m.definition.needs_dataset]
    if structural:
        raise SearchTomeError(
            f"{', '.join(structural)}: structural flags read a dataset's ToC, not qrels; "
            f"scores against a dataset report {', '.join(STRUCTURE_MEASURES)}"
        )
    qids = list(qrels.query_ids() if query_ids is None else query_ids)
    built_in = [m for m in parsed if not m.external]
    values: dict[str, np.ndarray] = {}
    if built_in:
        ranked = rank_arrays(run, qrels, built_in, qids)
        values = {str(m): m.definition.values(ranked, m.cutoff) for m in built_in}
    values.update(external_values(run, qrels, [str(m) for m in parsed if m.external], qids))
    return {str(m): values[str(m)] for m in parsed}


def consequential_ties(run: Run, qrels: Qrels, measures: Iterable[str | Measure]) -> list[str]:
    """Queries whose tied scores can change one of ``measures`` (see ``ties_that_matter``)."""
    parsed = [parse_measure(m) for m in measures]
    # The structural flags read no judgement; a budget measure is order-sensitive at any depth
    # (a tie of the gold with another id changes the tokens read before it ends).
    parsed = [
        m
        for m in parsed
        if isinstance(m.definition, BudgetFamily) or not m.definition.needs_dataset
    ]
    cutoffs = [m.cutoff for m in parsed if m.cutoff and not m.definition.order_sensitive]
    depths = [m.rank_cutoff or math.inf for m in parsed if m.definition.order_sensitive]
    return ties_that_matter(run, qrels, cutoffs, max(depths, default=0))


def warn_ties(name: str, run: Run, qrels: Qrels, measures: Iterable[str | Measure]) -> int:
    """Log one warning, with a count, when ties can change a measure; returns the count."""
    count = len(consequential_ties(run, qrels, measures))
    if count:
        log.warning(
            "%s: %d rankings have tied scores that can change a reported measure; the submitted "
            "order decides them (tie rule: %s)",
            name,
            count,
            TIE_RULE,
        )
    return count


def evaluate(
    run: Run,
    qrels: Qrels,
    measures: Iterable[str | Measure] = DEFAULT_MEASURES,
) -> dict[str, dict[str, float]]:
    """Per-query values: ``{query id: {measure: value}}`` for every qrels query (missing = 0)."""
    names = measure_names(measures)
    warn_ties(f"run {run.name}", run, qrels, names)
    missing = sum(1 for q in qrels if q not in run.rankings)
    if missing:
        log.info(
            "run %s: %d of %d queries missing, scored as misses", run.name, missing, len(qrels)
        )
    arrays = evaluate_arrays(run, qrels, names)
    qids = qrels.query_ids()
    return {qid: {name: float(arrays[name][i]) for name in names} for i, qid in enumerate(qids)}


def is_count(measure: str | Measure) -> bool:
    """Whether a measure is a count (summed over queries, printed as a count), not a rate."""
    return parse_measure(measure).is_count


def in_percent(measure: str | Measure) -> bool:
    """Whether a measure's aggregate is a share shown in % (not a count, not a mean of tokens)."""
    definition = parse_measure(measure).definition
    return definition.aggregate == "mean" and definition.percent


def aggregate(measure: str | Measure, values: np.ndarray) -> float:
    """Per-query values added up as the measure means: the sum of a count, else the mean."""
    if is_count(measure):
        return float(values.sum())
    return float(values.mean()) if len(values) else 0.0


def mean_scores(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each measure over the queries given (all: missing ones are 0): mean, or sum for counts."""
    totals: dict[str, float] = {}
    for values in per_query.values():
        for name, value in values.items():
            totals[name] = totals.get(name, 0.0) + value
    n = len(per_query)
    return {
        name: total if is_count(name) else (total / n if n else 0.0)
        for name, total in totals.items()
    }


def budget_measures(measures: Sequence[str]) -> list[str]:
    """The names among ``measures`` (canonical) that a :class:`BudgetFamily` computes: they
    read a dataset's section texts (:mod:`searchtome.metrics.budget`), not qrels."""
    return [m for m in measures if isinstance(parse_measure(m).definition, BudgetFamily)]


def budget_values(
    rankings: Mapping[str, Sequence[str]],
    dataset: Dataset,
    query_ids: Sequence[str],
    measures: Sequence[str],
) -> dict[str, np.ndarray]:
    """Per-query values of the budget ``measures`` (canonical names) for one run's rankings."""
    if not measures:
        return {}
    read = reading(rankings, dataset, query_ids)
    out = {}
    for name in measures:
        m = parse_measure(name)
        family = m.definition
        assert isinstance(family, BudgetFamily), name
        out[name] = family.budget_values(read, m.cutoff)
    return out
