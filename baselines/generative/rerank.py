"""``stair-rerank``: a trained STAIR adapter reorders the top ``k`` leaves of a first-stage run.

STAIR reads the book's whole ToC and the question and scores a leaf by the log-probability of
writing its line (``log P(identifier + EOS | ToC prompt + question)``, exactly, over the cached
ToC prefix: :func:`~.engine.score_trie` on a trie of the candidates alone). A first-stage
retriever reads the leaves' text and not the book's structure; the reranker lets the structure
judge between the few leaves the text already found. Inside the top ``k`` the new order is by
``weight * z(STAIR log P) + (1 - weight) * z(-rank)`` (z-scores over the query's candidates;
ties keep the first stage's order; ``weight = 1``: STAIR alone among the candidates); the leaves
below rank ``k`` keep the first stage's order. Ids that are no leaf of the query's book (a
first stage that writes headers or invented ids) are dropped: the reranker names leaves only.
The first stage is a run file (any submission folder, JSON lines or TREC run of the split being
run), so any system can be reranked, and only its ranks are used (runs carry scores of
different scales, or none).

The adapter is STAIR's own: the same training settings and seed reuse STAIR's cached adapter
(``$SEARCHTOME_HOME/baselines/stair/adapters/``), so ``searchtome run stair --seed N`` followed by
``searchtome run stair-rerank --seed N`` trains once. The scores of a first stage's candidates
are kept in a partial file keyed by adapter and candidates (not by ``weight``), so ``searchtome
tune stair-rerank --grid weight=...`` scores each query once. See docs/trained.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from searchtome.baselines.generative.config import Decoder, DecodingSettings
from searchtome.baselines.generative.retriever import run_generative
from searchtome.baselines.generative.stair import StairConfig
from searchtome.baselines.registry import RunContext, register

from searchtome.config import section, setting
from searchtome.errors import SearchTomeError
from searchtome.limits import MAX_IDS
from searchtome.records import Run

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset


@dataclass(frozen=True)
class RerankSettings:
    """The first stage and how its top k are reordered (none of it shapes the adapter)."""

    candidates: str = setting(
        "",
        "the first-stage run to rerank: a submission folder, JSON-lines or TREC run of the "
        "split being run (required)",
        shapes_adapter=False,
    )
    k: int = setting(10, "candidates per query: the first stage's top k", shapes_adapter=False)
    weight: float = setting(
        0.5,
        "STAIR's share inside the top k: weight * z(log P) + (1 - weight) * z(-rank)",
        shapes_adapter=False,
    )

    def __post_init__(self) -> None:
        if not 1 <= self.k <= MAX_IDS:
            raise SearchTomeError(f"k must be between 1 and {MAX_IDS}, not {self.k}")
        if not 0.0 <= self.weight <= 1.0:
            raise SearchTomeError(f"weight must be between 0 and 1, not {self.weight}")


@dataclass(frozen=True, init=False)
class StairRerankConfig(StairConfig):
    """STAIR in the paper's setting (the same adapter) scoring a first stage's top k leaves."""

    decoding: DecodingSettings = section(DecodingSettings, mode=Decoder.EXACT)
    rerank: RerankSettings = section(RerankSettings)

    def __post_init__(self) -> None:
        if self.decoding.mode is not Decoder.EXACT:
            raise SearchTomeError(
                f"stair-rerank scores its candidates exactly; decode must be exact, not "
                f"{self.decoding.mode.value}"
            )


def first_stage(path: str, dataset: Dataset, split: str) -> Run:
    """The candidate run, checked to rank every query of ``split``."""
    from searchtome.submissions.reader import read_submission

    if not path:
        raise SearchTomeError(
            "stair-rerank needs its first stage: --set candidates=RUN (a submission folder or "
            f"run file of the {split} split)"
        )
    run = read_submission(path).run
    missing = [q.query_id for q in dataset.queries(split) if q.query_id not in run.rankings]
    if missing:
        more = f" and {len(missing) - 1:,} more" if len(missing) > 1 else ""
        raise SearchTomeError(
            f"{path}: no ranking for query {missing[0]!r}{more} of the {split} split; "
            f"candidates must be a run of the {split} split"
        )
    return run


def reorder(first: Sequence[str], scored: Mapping[str, float], k: int, weight: float) -> list[str]:
    """``first``'s top ``k`` ids that have a score, reordered by ``weight * z(score) + (1 -
    weight) * z(-rank)`` (rank in ``first``), then ``first``'s ids below rank ``k``."""
    from searchtome.baselines.rerank import rerank_top

    top = list(first[:k])
    leaves = [x for x in top if x in scored]
    ranks = np.asarray([-top.index(x) for x in leaves], dtype=np.float64)
    stair = np.asarray([scored[x] for x in leaves], dtype=np.float64)
    order = rerank_top(ranks, stair, weight) if leaves else []
    return [leaves[i] for i in order] + list(first[k:])


@register(
    "stair-rerank",
    summary="STAIR (ToC in the prompt, its trained adapter) rescores a first-stage run's top k "
    "leaves, mixed with the first stage's rank",
    config=StairRerankConfig,
    needs=("ml",),
    trains_on=("train", "dev"),
    doc="trained.md",
)
def run_stair_rerank(
    dataset: Dataset, split: str, config: StairRerankConfig, ctx: RunContext
) -> Run:
    from searchtome.baselines.runner import portable_path

    settings = config.rerank
    first = first_stage(settings.candidates, dataset, split)
    leaves = {b: {x.leaf_id for x in dataset.leaves(b)} for b in dataset.book_ids()}
    books = {q.query_id: q.book_id for q in dataset.queries(split)}
    tops = {
        q.query_id: [x for x in first.rankings[q.query_id][: settings.k] if x in leaves[q.book_id]]
        for q in dataset.queries(split)
    }
    # STAIR's cache: its adapter, trained with the same settings and seed, is this one.
    ctx.cache_dir = ctx.cache_dir.with_name("stair")
    stair = run_generative(
        dataset, split, config, ctx, system="stair", with_toc=True, candidates=tops
    )
    rankings = {}
    for qid, top in tops.items():
        scored = dict(zip(stair.rankings[qid], (stair.scores or {})[qid], strict=True))
        assert set(scored) == set(top)  # every candidate leaf, exactly once
        ranked = reorder(first.rankings[qid], scored, settings.k, settings.weight)
        rankings[qid] = tuple(x for x in ranked if x in leaves[books[qid]])
    ctx.record(
        description=(
            f"stair-rerank: STAIR's adapter rescores the top {settings.k} leaves of "
            f"{first.name} (weight {settings.weight} on its z-scored log-probability, the rest "
            "on the first stage's rank)"
        ),
        first_stage={
            "run": portable_path(settings.candidates, "<PATH>"),
            "system": first.name,
            "k": settings.k,
            "candidate_leaves": sum(len(t) for t in tops.values()),
            "dropped_not_leaves": sum(len(first.rankings[q]) - len(rankings[q]) for q in rankings),
        },
    )
    return dataclasses.replace(stair, name="stair-rerank", rankings=rankings, scores=None)
