"""Dense retrieval with a pre-trained encoder, not fine-tuned ("DPR" in the STAIR paper).

The paper's "DPR" row is NV-Embed-v2 used off the shelf; here any encoder works
(:class:`~searchtome.baselines.encoders.EncoderConfig`), the default being the offline MiniLM and
``--set encoder=nv-embed-v2`` the paper's model (needs a GPU and the hub).

Rules:

* Passages: a leaf whose text does not fit ``encoder.passage_max_tokens`` is cut into passages
  of whole sentences packed up to that limit (:meth:`Encoder.split_passage`); with
  ``title="path"`` each passage starts with the leaf's title path (its tokens are reserved from
  the limit). ``passages="first"`` keeps only the first passage of each leaf, i.e. the one-vector-
  per-leaf truncation of the independent reproduction. A leaf without text is its title path.
* Leaf score = the **maximum** inner product between the query and the leaf's passages (vectors
  are L2-normalised, so this is the best cosine). Ties: document order.
* One exact FAISS inner-product index (``IndexFlatIP``) per book; every query searches only its
  own book's index. Embeddings are cached on disk (see ``encoders``); the flat index is rebuilt
  from them in milliseconds, so it is not cached separately.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from searchtome.baselines.encoders import Encoder, EncoderConfig
from searchtome.baselines.registry import RunContext, register

from searchtome.errors import SearchTomeError
from searchtome.limits import MAX_IDS
from searchtome.records import Run
from searchtome.titles import title_path

log = logging.getLogger(__name__)

PASSAGE_MODES: tuple[str, ...] = ("split", "first")
TITLE_MODES: tuple[str, ...] = ("none", "path")


@dataclass(frozen=True)
class DPRConfig:
    # 96-token passages: chosen on dev for MiniLM (trained on short inputs); the nv-embed-v2
    # preset brings the paper's 512.
    encoder: EncoderConfig = field(default_factory=lambda: EncoderConfig(passage_max_tokens=96))
    passages: str = "split"
    title: str = "path"
    depth: int = MAX_IDS

    def __post_init__(self) -> None:
        from searchtome.errors import unknown_name

        if self.passages not in PASSAGE_MODES:
            raise unknown_name("passage mode", self.passages, PASSAGE_MODES)
        if self.title not in TITLE_MODES:
            raise unknown_name("title mode", self.title, TITLE_MODES)
        if not 1 <= self.depth <= MAX_IDS:
            raise SearchTomeError(f"depth must be between 1 and {MAX_IDS}, not {self.depth}")


def leaf_passages(
    encoder: Encoder, leaves: list[Any], config: DPRConfig
) -> tuple[list[str], list[int]]:
    """Passage texts of ``leaves`` and, for each, the index of the leaf it came from."""
    texts: list[str] = []
    owner: list[int] = []
    titles = [title_path(x.path) or x.title for x in leaves]
    reserve = encoder.count_tokens(titles) if config.title == "path" else [0] * len(leaves)
    for i, leaf in enumerate(leaves):
        parts = encoder.split_passage(leaf.text, reserve=reserve[i] + 1)
        if config.passages == "first":
            parts = parts[:1]
        if config.title == "path":
            parts = [f"{titles[i]}. {p}" for p in parts]
        if not parts:
            parts = [titles[i]]
        texts.extend(parts)
        owner.extend([i] * len(parts))
    return texts, owner


def flat_index(vectors: np.ndarray) -> Any:
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def search_all(index: Any, queries: np.ndarray) -> np.ndarray:
    """Inner products of every query with every indexed vector, in index order (n_q, n)."""
    n = index.ntotal
    scores, ids = index.search(np.ascontiguousarray(queries, dtype=np.float32), n)
    out = np.empty((len(queries), n), dtype=np.float32)
    np.put_along_axis(out, ids, scores, axis=1)
    return out


def max_by_owner(scores: np.ndarray, owner: np.ndarray, n_owners: int) -> np.ndarray:
    """Per row, the maximum score among the columns of each owner (``-inf`` if it has none)."""
    out = np.full((scores.shape[0], n_owners), -np.inf, dtype=np.float64)
    for col, o in enumerate(owner):
        np.maximum(out[:, o], scores[:, col], out=out[:, o])
    return out


@register(
    "dpr",
    summary="dense retrieval, pre-trained encoder not fine-tuned (MiniLM; NV-Embed-v2 by config), "
    "leaf = best passage, FAISS per book",
    config=DPRConfig,
    needs=("ml",),
)
def run_dpr(dataset: Any, split: str, config: DPRConfig, ctx: RunContext) -> Run:
    from searchtome.baselines.bm25 import rank_desc

    encoder = Encoder(config.encoder)
    books = [b for b in dataset.book_ids() if dataset.queries(split, b)]
    # Encode every book's passages and every query in one call each: one bar, full batches.
    passages: dict[str, tuple[list[str], np.ndarray]] = {}
    all_texts: list[str] = []
    for book_id in books:
        texts, owner = leaf_passages(encoder, dataset.leaves(book_id), config)
        passages[book_id] = (texts, np.asarray(owner, dtype=np.int64))
        all_texts.extend(texts)
    vectors = encoder.encode_passages(all_texts)
    queries = [q for b in books for q in dataset.queries(split, b)]
    qvec = encoder.encode_queries([q.text for q in queries])
    row_of = {q.query_id: i for i, q in enumerate(queries)}

    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    start = 0
    for book_id in books:
        texts, owner = passages[book_id]
        leaves = dataset.leaves(book_id)
        index = flat_index(vectors[start : start + len(texts)])
        start += len(texts)
        book_queries = dataset.queries(split, book_id)
        sims = search_all(index, qvec[[row_of[q.query_id] for q in book_queries]])
        leaf_scores = max_by_owner(sims, owner, len(leaves))
        for q, row in zip(book_queries, leaf_scores, strict=True):
            order = rank_desc(row)[: config.depth]
            rankings[q.query_id] = tuple(leaves[i].leaf_id for i in order)
            scores[q.query_id] = tuple(float(row[i]) for i in order)
    ctx.record(
        models=(encoder.model_label(),),
        encoder=encoder.describe(),
        dtype=encoder.config.dtype,  # run_info.dtype: what the encoder ran in
        n_passages=len(all_texts),
        parameters=encoder.parameter_count(),  # run_info.parameters
        leaf_score="max over the leaf's passages",
    )
    return Run(name="dpr", rankings=rankings, scores=scores)
