"""The tie rule, and runs whose order is derived from scores.

**The tie rule** (one rule, applied by every reader and scorer in searchtome):

1. An explicit order is authoritative. A JSON-lines submission's ``leaf_ids`` and a
   :class:`~searchtome.records.Run`'s ``rankings`` are scored exactly in the order given; scores,
   when present, are informational and never re-sort the list.
2. Where the order has to be derived from scores — TREC run files, whose rank column trec_eval
   ignores, and score dictionaries (:func:`run_from_scores`) — ids are sorted by score
   descending and ties are broken by id descending (code-point order), which is exactly what
   trec_eval does. A TREC run therefore scores the same here and in trec_eval / pytrec_eval.
3. Tied scores are reported as a warning where they matter, because a tie means the submitted
   order — not the model — decided the rank: the validator counts the rankings with ties, and
   the scorer warns once, with a count, about the queries whose ties can change a reported
   measure (:func:`ties_that_matter`; ties below every cut-off are not reported).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from searchtome.runs import Run

TIE_RULE = (
    "the submitted order is authoritative; where order comes from scores (TREC runs, score "
    "dictionaries) ids are sorted by score descending, ties broken by id descending (trec_eval's rule)"
)


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


def tie_groups(scores: Sequence[float]) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges of two or more adjacent equal scores."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or scores[i] != scores[start]:
            if i - start > 1:
                groups.append((start, i))
            start = i
    return groups


def ties_that_matter(
    run: Run,
    judgements: Mapping[str, Mapping[str, int]],
    cutoffs: Iterable[int],
    order_depth: float,
) -> list[str]:
    """Query ids whose tied scores can change a measured value, had the tie been broken otherwise.

    A tie group can change a value only when its ids are judged differently (a relevant id tied
    with a non-relevant one) and, for measures that only count the ids in the top k (R, P,
    Success), the group straddles k (some ids at rank <= k, some after); for measures that weigh
    the order (nDCG, RR, anything computed by ir_measures), when it starts within their depth
    ``order_depth`` (``inf``: any depth). Ties below every cut-off decide nothing reported.
    """
    if not run.scores:
        return []
    cuts = sorted(set(cutoffs))
    out = []
    for qid, values in run.scores.items():
        ranking = run.rankings.get(qid, ())
        judged = judgements.get(qid, {})
        for start, end in tie_groups(values):
            if len({judged.get(doc) for doc in ranking[start:end]}) < 2:
                continue  # reordering ids judged alike changes no measure
            if start < order_depth or any(start < k < end for k in cuts):
                out.append(qid)
                break
    return out


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
