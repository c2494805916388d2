"""Retrieval measures with their ir_measures names, relevance judgements, and the tie rule.

Measures are named the way ir_measures names them — ``R@1``, ``R@3``, ``R@5``, ``nDCG@3``,
``RR@10``, ``P@5`` — and their values equal trec_eval's (``recall_k``, ``ndcg_cut_k``,
``recip_rank`` on the run cut at k, ``P_k``) for the same ranked lists.

**The tie rule** (one rule, applied by every reader and scorer in searchtome):

1. An explicit order is authoritative. A JSON-lines submission's ``leaf_ids`` and a
   :class:`~searchtome.records.Run`'s ``rankings`` are scored exactly in the order given; scores,
   when present, are informational and never re-sort the list.
2. Where the order has to be derived from scores — TREC run files, whose rank column trec_eval
   ignores, and score dictionaries (:func:`run_from_scores`) — ids are sorted by score
   descending and ties are broken by id descending (code-point order), which is exactly what
   trec_eval does. A TREC run therefore scores the same here and in trec_eval / pytrec_eval.
3. Tied scores are reported as a warning (the validator and the scorer say how many queries
   have them), because a tie means the submitted order — not the model — decided the rank.

**Missing queries** count as misses: every query in the qrels gets a value, 0 when the run has
no ranking for it (ir_measures and ranx behave this way; pytrec_eval and BEIR silently drop such
queries and average over the rest). A query with no relevant document scores 0 on every measure.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.records import Run

if TYPE_CHECKING:
    from searchtome.dataset.layout import Dataset

log = logging.getLogger(__name__)

DEFAULT_MEASURES: tuple[str, ...] = ("R@1", "R@3", "R@5", "nDCG@3", "RR@10")

TIE_RULE = (
    "the submitted order is authoritative; where order comes from scores (TREC runs, score "
    "dictionaries) ids are sorted by score descending, ties broken by id descending (trec_eval's rule)"
)

# Canonical family name → what users may type for it (case-insensitive).
_FAMILIES: dict[str, tuple[str, ...]] = {
    "R": ("r", "recall", "success", "hits", "hit_rate", "hitrate", "accuracy"),
    "P": ("p", "precision"),
    "nDCG": ("ndcg", "ndcg_cut"),
    "RR": ("rr", "mrr", "recip_rank"),
}
_ALIASES = {alias: family for family, aliases in _FAMILIES.items() for alias in aliases}
_NEEDS_CUTOFF = {"R", "P"}
_MEASURE_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:[@_]\s*(\d+))?\s*$")


@dataclass(frozen=True, order=True)
class Measure:
    """A parsed measure: family (``R``, ``P``, ``nDCG``, ``RR``) and optional cutoff."""

    family: str
    cutoff: int | None = None

    def __str__(self) -> str:
        return self.family if self.cutoff is None else f"{self.family}@{self.cutoff}"

    @property
    def name(self) -> str:
        return str(self)


def parse_measure(text: str | Measure) -> Measure:
    """``"R@1"``, ``"ndcg@3"``, ``"MRR@10"``, ``"P_5"`` → :class:`Measure` (canonical names)."""
    if isinstance(text, Measure):
        return text
    match = _MEASURE_RE.match(str(text))
    family = _ALIASES.get(match.group(1).lower()) if match else None
    if match is None or family is None:
        known = [f"{f}@k" for f in _FAMILIES]
        raise unknown_name("measure", str(text), known)
    cutoff = int(match.group(2)) if match.group(2) else None
    if cutoff is not None and cutoff < 1:
        raise SearchTomeError(f"measure {text!r}: the cutoff must be at least 1")
    if cutoff is None and family in _NEEDS_CUTOFF:
        raise SearchTomeError(f"measure {text!r} needs a cutoff, e.g. {family}@1")
    return Measure(family, cutoff)


def measure_names(measures: Iterable[str | Measure]) -> list[str]:
    """Canonical names, in the order given, without duplicates."""
    out: list[str] = []
    for m in measures:
        name = str(parse_measure(m))
        if name not in out:
            out.append(name)
    return out


# -- relevance judgements -----------------------------------------------------------------------


class Qrels(Mapping[str, Mapping[str, int]]):
    """Relevance judgements: ``query id → {doc id: relevance}`` (relevant means > 0).

    The query order is kept as given; it is the order of every per-query output.
    """

    def __init__(self, mapping: Mapping[str, Mapping[str, int]], name: str = "qrels") -> None:
        self._data: dict[str, dict[str, int]] = {}
        for qid, docs in mapping.items():
            self._data[str(qid)] = {str(d): int(r) for d, r in docs.items()}
        self.name = name

    # Mapping protocol
    def __getitem__(self, qid: str) -> Mapping[str, int]:
        return self._data[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Qrels({self.name!r}, queries={len(self)})"

    def query_ids(self) -> list[str]:
        return list(self._data)

    def relevant(self, qid: str) -> set[str]:
        return {d for d, r in self._data.get(qid, {}).items() if r > 0}

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {q: dict(d) for q, d in self._data.items()}

    # Constructors
    @classmethod
    def from_dataset(cls, dataset: Dataset | str | Path, split: str = "test") -> Qrels:
        """The gold leaf of every query of ``split`` (relevance 1), in the dataset's query order."""
        from searchtome.dataset.layout import Dataset, load

        ds = dataset if isinstance(dataset, Dataset) else load(dataset)
        return cls({q.query_id: {q.leaf_id: 1} for q in ds.queries(split)}, name=f"{split}")

    @classmethod
    def from_trec(cls, path: str | Path) -> Qrels:
        """A TREC qrels file: ``qid iter docno rel`` per line (whitespace-separated)."""
        path = Path(path)
        data: dict[str, dict[str, int]] = {}
        for lineno, line in _read_text_lines(path):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise SearchTomeError(
                    f"{path}:{lineno}: line: expected 4 fields 'qid iter docno rel' in a TREC "
                    f"qrels file, got {len(parts)}"
                )
            qid, _, doc, rel = parts
            try:
                value = int(rel)
            except ValueError:
                try:
                    as_float = float(rel)
                except ValueError:
                    as_float = math.nan
                if not as_float.is_integer():
                    raise SearchTomeError(
                        f"{path}:{lineno}: rel: {rel!r} is not an integer relevance"
                    ) from None
                value = int(as_float)
            data.setdefault(qid, {})[doc] = value
        if not data:
            raise SearchTomeError(f"{path}: no judgements found; is this a TREC qrels file?")
        return cls(data, name=path.name)

    @classmethod
    def from_beir(cls, path: str | Path) -> Qrels:
        """A BEIR/MTEB qrels TSV with the header ``query-id corpus-id score``."""
        path = Path(path)
        data: dict[str, dict[str, int]] = {}
        lines = _read_text_lines(path)
        for lineno, line in lines:
            parts = line.rstrip("\n").split("\t")
            if lineno == 1 and parts[:2] == ["query-id", "corpus-id"]:
                continue
            if len(parts) != 3:
                raise SearchTomeError(
                    f"{path}:{lineno}: line: expected 3 tab-separated fields "
                    f"'query-id corpus-id score', got {len(parts)}"
                )
            try:
                data.setdefault(parts[0], {})[parts[1]] = int(float(parts[2]))
            except ValueError:
                raise SearchTomeError(
                    f"{path}:{lineno}: score: {parts[2]!r} is not a number"
                ) from None
        return cls(data, name=path.name)

    @classmethod
    def from_file(cls, path: str | Path) -> Qrels:
        """TREC qrels or a BEIR TSV, told apart by the content."""
        path = Path(path)
        for _, line in _read_text_lines(path):
            if line.strip():
                if "\t" in line and len(line.rstrip("\n").split("\t")) == 3:
                    return cls.from_beir(path)
                return cls.from_trec(path)
        raise SearchTomeError(f"{path}: the qrels file is empty")

    def to_trec(self, path: str | Path) -> Path:
        from searchtome.io import atomic_write

        with atomic_write(path) as fh:
            for qid, docs in self._data.items():
                for doc, rel in docs.items():
                    fh.write(f"{qid} 0 {doc} {rel}\n")
        return Path(path)


def _read_text_lines(path: Path) -> list[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return list(enumerate(fh, 1))
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise SearchTomeError(f"{path}: not UTF-8 text ({exc.reason})") from None


# -- runs built from scores ---------------------------------------------------------------------


def order_by_score(scored: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """The tie rule: score descending, ties broken by id descending (trec_eval's order)."""
    return sorted(scored, key=lambda item: (item[1], item[0]), reverse=True)


def run_from_scores(
    scores: Mapping[str, Mapping[str, float]], name: str = "run", depth: int | None = None
) -> Run:
    """A :class:`Run` from ``query id → {doc id: score}``, ordered by the tie rule."""
    rankings: dict[str, tuple[str, ...]] = {}
    values: dict[str, tuple[float, ...]] = {}
    for qid, docs in scores.items():
        ordered = order_by_score((str(d), float(s)) for d, s in docs.items())
        if depth is not None:
            ordered = ordered[:depth]
        rankings[str(qid)] = tuple(d for d, _ in ordered)
        values[str(qid)] = tuple(s for _, s in ordered)
    return Run(name=name, rankings=rankings, scores=values)


def count_ties(scores: Sequence[float]) -> int:
    """How many adjacent pairs of a ranked list share the same score."""
    return sum(1 for a, b in pairwise(scores) if a == b)


def tied_queries(run: Run) -> list[str]:
    """Query ids whose ranked list has at least two equal adjacent scores."""
    if not run.scores:
        return []
    return [qid for qid, s in run.scores.items() if count_ties(s)]


# -- evaluation ---------------------------------------------------------------------------------


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


def evaluate_arrays(
    run: Run,
    qrels: Qrels,
    measures: Iterable[str | Measure] = DEFAULT_MEASURES,
    query_ids: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Per-query values as arrays aligned with ``query_ids`` (default: the qrels' queries)."""
    parsed = [parse_measure(m) for m in measures]
    qids = list(qrels.query_ids() if query_ids is None else query_ids)
    longest = max((len(r) for r in run.rankings.values()), default=0)
    depth = max([m.cutoff or longest for m in parsed] + [1])
    positives = _positives(qrels)
    gains = _gain_matrix(run, positives, qids, depth)
    uncut_ndcg = any(m.family == "nDCG" and m.cutoff is None for m in parsed)
    most_relevant = max((len(v) for v in positives.values()), default=0) if uncut_ndcg else 0
    width = max(depth, most_relevant)
    n_rel, ideal = _ideal(positives, qids, width)
    hits = gains > 0
    discount = 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))
    has_rel = n_rel > 0
    out: dict[str, np.ndarray] = {}
    for m in parsed:
        k = m.cutoff or depth
        if m.family == "R":
            found = hits[:, :k].sum(axis=1)
            values = np.divide(found, n_rel, out=np.zeros(len(qids)), where=has_rel)
        elif m.family == "P":
            values = hits[:, :k].sum(axis=1) / float(k)
        elif m.family == "RR":
            first = np.argmax(hits[:, :k], axis=1)
            any_hit = hits[:, :k].any(axis=1)
            values = np.where(any_hit, 1.0 / (first + 1.0), 0.0)
        elif m.family == "nDCG":
            dcg = gains[:, :k] @ discount[:k]
            ideal_k = width if m.cutoff is None else m.cutoff
            idcg = ideal[:, :ideal_k] @ discount[:ideal_k]
            values = np.divide(dcg, idcg, out=np.zeros(len(qids)), where=idcg > 0)
        else:  # pragma: no cover - parse_measure admits only the families above
            raise AssertionError(m)
        out[str(m)] = values
    return out


def evaluate(
    run: Run,
    qrels: Qrels,
    measures: Iterable[str | Measure] = DEFAULT_MEASURES,
) -> dict[str, dict[str, float]]:
    """Per-query values: ``{query id: {measure: value}}`` for every qrels query (missing = 0)."""
    names = measure_names(measures)
    ties = tied_queries(run)
    if ties:
        log.warning(
            "run %s: %d queries have tied scores (tie rule: %s)",
            run.name,
            len(ties),
            TIE_RULE,
        )
    missing = sum(1 for q in qrels if q not in run.rankings)
    if missing:
        log.info(
            "run %s: %d of %d queries missing, scored as misses", run.name, missing, len(qrels)
        )
    arrays = evaluate_arrays(run, qrels, names)
    qids = qrels.query_ids()
    return {qid: {name: float(arrays[name][i]) for name in names} for i, qid in enumerate(qids)}


def mean_scores(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The mean of each measure over the queries given (all of them: missing ones are 0 already)."""
    totals: dict[str, float] = {}
    for values in per_query.values():
        for name, value in values.items():
            totals[name] = totals.get(name, 0.0) + value
    n = len(per_query)
    return {name: (total / n if n else 0.0) for name, total in totals.items()}


def to_ir_measures_dict(run: Run) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` with strictly decreasing synthetic scores that keep the run's order.

    For handing a run to trec_eval-style tools, which re-sort by score: the scores encode the
    authoritative order so no tool can reorder tied ids.
    """
    out: dict[str, dict[str, float]] = {}
    for qid, ranking in run.rankings.items():
        n = len(ranking)
        out[qid] = {doc: float(n - i) for i, doc in enumerate(ranking)}
    return out


def describe(measures: Iterable[str | Measure] = DEFAULT_MEASURES) -> dict[str, Any]:
    """One line per measure saying what it computes (used in reports and docs)."""
    text = {
        "R": "recall at {k}: share of the relevant ids found in the top {k}",
        "P": "precision at {k}: share of the top {k} that is relevant",
        "nDCG": "nDCG at {k}: linear gain, log2 discount, normalised by the ideal ranking",
        "RR": "reciprocal rank of the first relevant id within the top {k}",
    }
    out = {}
    for m in measures:
        p = parse_measure(m)
        out[str(p)] = text[p.family].format(k=p.cutoff if p.cutoff else "all")
    return out
