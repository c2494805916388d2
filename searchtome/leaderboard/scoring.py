"""Scoring submissions: per-query measures, ToC-based counts, and aggregates.

Per query: the retrieval measures (``R@1``, ``R@3``, ``R@5``, ``nDCG@3``, ``RR@10`` by default)
and, when a dataset is at hand, whether the output holds a non-leaf ToC node or an invalid id at
rank 1 and anywhere in the top 3 (``NonLeaf@1``, ``NonLeaf@3``, ``Invalid@1``, ``Invalid@3``).
The token-budget measures (``InBudget@B``, ``TokensToGold``), when named, read the dataset's
section texts: against qrels alone they are refused.
A query the submission does not answer is a miss: 0 on every measure.

Aggregates: per book, per domain, ``aggregate`` = the macro mean over domains (the paper's
"average": each domain weighs the same, whatever its number of queries) and ``micro`` = the mean
over all queries. With TREC qrels instead of a dataset there are no domains: ``aggregate`` is
then the micro mean and the ToC-based counts are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.metrics.budget import TOKENIZER
from searchtome.metrics.measures import DEFAULT_MEASURES, measure_names
from searchtome.metrics.qrels import Qrels
from searchtome.metrics.scorer import (
    aggregate,
    budget_measures,
    budget_values,
    evaluate_arrays,
    is_count,
    warn_ties,
)
from searchtome.metrics.structure import STRUCTURE_MEASURES, structure_flags
from searchtome.runs import Run, Submission

if TYPE_CHECKING:  # only annotations: `score --qrels` never loads a dataset module
    from searchtome.dataset.loader import Dataset

log = logging.getLogger(__name__)


@dataclass
class QueryTable:
    """What the analyses need to know about each scored query, as aligned arrays."""

    query_ids: list[str]
    book: np.ndarray
    domain: np.ndarray
    gold: list[str]
    depth: np.ndarray  # ToC level of the gold leaf (1 = top level)
    train_questions: np.ndarray  # training questions whose gold is this query's gold leaf

    @classmethod
    def from_dataset(cls, dataset: Dataset, split: str) -> QueryTable:
        queries = dataset.queries(split)
        if not queries:
            raise SearchTomeError(f"{dataset.root}: the {split} split has no queries")
        nodes = dataset.nodes
        train = {leaf: len(qs) for leaf, qs in dataset.training_questions().items()}
        return cls(
            query_ids=[q.query_id for q in queries],
            book=np.asarray([q.book_id for q in queries]),
            domain=np.asarray([dataset.domain(q.book_id) for q in queries]),
            gold=[q.leaf_id for q in queries],
            depth=np.asarray(
                [nodes[q.leaf_id].level if q.leaf_id in nodes else 0 for q in queries],
                dtype=np.int64,
            ),
            train_questions=np.asarray([train.get(q.leaf_id, 0) for q in queries], dtype=np.int64),
        )


@dataclass
class SystemScores:
    """One system's per-query values (arrays aligned with the scoreboard's query ids)."""

    system: str
    per_query: Mapping[str, np.ndarray]  # a board may read them on demand (service.board)
    answered: np.ndarray
    meta: Mapping[str, Any] = field(default_factory=dict)
    path: str | None = None
    unknown_queries: int = 0
    tied_queries: int = 0  # rankings whose tied scores can change a measured value
    depth: int = 0  # the most ids the system returned for one query (its ranking depth)
    # Answered with an empty ranking: "answered" yet nothing to score (zero-shot replies that
    # named no leaf). Counted apart, or 94 empty rankings of 189 read as "Answered 189/189".
    empty: np.ndarray | None = None

    @property
    def n_empty(self) -> int:
        return 0 if self.empty is None else int(self.empty.sum())


def _group_means(
    values: Mapping[str, np.ndarray], labels: np.ndarray
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for label in sorted(set(labels.tolist())):
        mask = labels == label
        out[label] = {m: aggregate(m, v[mask]) for m, v in values.items()}
    return out


@dataclass
class Scoreboard:
    """Scores of several systems on the same queries."""

    query_ids: list[str]
    measures: list[str]
    systems: list[SystemScores]
    queries: QueryTable | None = None
    split: str = "test"

    @property
    def all_measures(self) -> list[str]:
        return self.measures + (list(STRUCTURE_MEASURES) if self.queries is not None else [])

    def get(self, system: str) -> SystemScores:
        for s in self.systems:
            if s.system == system:
                return s
        raise unknown_name("system", system, [s.system for s in self.systems])

    def micro(self, system: str) -> dict[str, float]:
        s = self.get(system)
        return {m: aggregate(m, s.per_query[m]) for m in self.all_measures}

    def per_domain(self, system: str) -> dict[str, dict[str, float]]:
        if self.queries is None:
            return {}
        return _group_means(self.get(system).per_query, self.queries.domain)

    def per_book(self, system: str) -> dict[str, dict[str, float]]:
        if self.queries is None:
            return {}
        return _group_means(self.get(system).per_query, self.queries.book)

    def aggregate(self, system: str) -> dict[str, float]:
        """Macro mean over domains (micro mean when there are no domains)."""
        domains = self.per_domain(system)
        if not domains:
            return self.micro(system)
        # A count (NumQ...) adds up over domains; a rate is their macro mean.
        combine = {True: np.sum, False: np.mean}
        return {
            m: float(combine[is_count(m)]([values[m] for values in domains.values()]))
            for m in self.all_measures
        }

    def empty_rate(self, system: str) -> float:
        """The share of queries answered with an empty ranking: macro over domains like the
        measures (the plain mean without domains)."""
        s = self.get(system)
        empty = s.empty if s.empty is not None else np.zeros(len(self.query_ids), dtype=bool)
        if self.queries is None:
            return float(empty.mean())
        domains = self.queries.domain
        return float(np.mean([empty[domains == d].mean() for d in sorted(set(domains.tolist()))]))

    def groups(self) -> list[str] | None:
        return None if self.queries is None else self.queries.domain.tolist()

    def per_query_arrays(
        self, measures: Sequence[str] | None = None
    ) -> dict[str, dict[str, np.ndarray]]:
        measures = list(measures or self.measures)
        return {s.system: {m: s.per_query[m] for m in measures} for s in self.systems}

    def system_json(self, system: str, by_query: bool = False) -> dict[str, Any]:
        """The ``score --format json`` object of one system."""
        s = self.get(system)
        out: dict[str, Any] = {
            "system": system,
            "aggregate": self.aggregate(system),
            "micro": self.micro(system),
            "per_domain": self.per_domain(system),
            "per_book": self.per_book(system),
            "n_queries": len(self.query_ids),
            "answered": int(s.answered.sum()),
            "empty": s.n_empty,  # answered with no id at all
        }
        if budget_measures(self.measures):  # which tokens the budget measures counted
            out["tokenizer"] = TOKENIZER.to_dict()
        if by_query:
            names = self.all_measures
            out["per_query"] = {
                qid: {m: float(s.per_query[m][i]) for m in names}
                for i, qid in enumerate(self.query_ids)
            }
        return out


def beyond_depth(measure: str, depth: int) -> bool:
    """Whether ``measure`` has a cut-off deeper than a ranking of ``depth`` ids.

    A 3-deep run's R@5 equals its R@3 and its RR@10 its RR@3: such values are not comparable
    with those of deeper runs, so the leaderboard marks them instead of printing them. Measures
    without a cut-off, and unknown depths (0), are never marked.
    """
    from searchtome.metrics.measures import parse_measure

    if depth <= 0 or measure in STRUCTURE_MEASURES:
        return False
    cutoff = parse_measure(measure).rank_cutoff  # a budget in tokens is no rank
    return cutoff is not None and cutoff > depth


def score_runs(
    runs: Sequence[Run | Submission],
    *,
    data: Dataset | None = None,
    qrels: Qrels | None = None,
    split: str = "test",
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> Scoreboard:
    """Score runs against a dataset split (with ToC counts) or against qrels (without)."""
    if (data is None) == (qrels is None):
        raise SearchTomeError(
            "score against either a dataset (--data) or qrels (--qrels), not both"
        )
    # The structure counts are always computed; naming them in ``measures`` is allowed.
    names = [m for m in measure_names(measures) if m not in STRUCTURE_MEASURES]
    priced = budget_measures(names)
    if priced and data is None:
        raise SearchTomeError(
            f"{', '.join(priced)}: token-budget measures read the dataset's section texts; "
            "score against a dataset (--data) instead of qrels"
        )
    judged = [m for m in names if m not in priced]
    table = QueryTable.from_dataset(data, split) if data is not None else None
    if qrels is None:
        assert data is not None
        qrels = Qrels.from_dataset(data, split)
    qids = qrels.query_ids() if table is None else table.query_ids
    known = set(qids)
    systems: list[SystemScores] = []
    seen: set[str] = set()
    for item in runs:
        run = item.run if isinstance(item, Submission) else item
        meta = item.meta if isinstance(item, Submission) else run.meta
        path = item.path if isinstance(item, Submission) else None
        name = item.system if isinstance(item, Submission) else run.name
        if name in seen:
            raise SearchTomeError(
                f"two submissions are named {name!r}; give each a distinct 'system' in meta.json "
                "(or a distinct run tag / file name for TREC runs)"
            )
        seen.add(name)
        per_query = evaluate_arrays(run, qrels, judged, qids)
        if data is not None:
            per_query.update(budget_values(run.rankings, data, qids, priced))
            per_query.update(structure_flags(run.rankings, data, qids))
        answered = np.asarray([qid in run.rankings for qid in qids])
        empty = np.asarray([qid in run.rankings and not run.rankings[qid] for qid in qids])
        unknown = sum(1 for qid in run.rankings if qid not in known)
        ties = warn_ties(name, run, qrels, names)
        missing = int((~answered).sum())
        if missing:
            log.warning("%s: %d of %d queries missing; scored as misses", name, missing, len(qids))
        if unknown:
            log.warning("%s: %d query ids are not in the %s queries; ignored", name, unknown, split)
        depth = max((len(ids) for ids in run.rankings.values()), default=0)
        systems.append(
            SystemScores(name, per_query, answered, dict(meta), path, unknown, ties, depth, empty)
        )
    return Scoreboard(qids, names, systems, table, split)
