"""NavTree (a reconstruction) and ToC-NavTree: tree-routed retrieval that emits leaves only.

**NavTree is reconstructed from the published description** (the abstract of arXiv 2610.06902
and a press summary); the authors' code and full text were not available, so every rule below
that the description leaves open is ours and is marked as such in ``docs/baselines.md``.
**ToC-NavTree** is new: the same walk, but the navigation tree is the book's authored ToC.

Index (per book, no LLM):

1. Every ToC leaf's section text is split into sentences (``text.split_sentences``) and packed
   into chunks of at most ``chunk_tokens`` encoder tokens; chunks never cross a leaf boundary,
   so each chunk belongs to exactly one ToC leaf. With ``title="path"`` each chunk is preceded by
   its leaf's title path. A leaf without text is one chunk holding its title path.
2. Chunks and sentences are embedded (cached, see ``encoders``).
3. Tree. *NavTree*: a balanced binary segment tree over the chunks in document order (a node
   covering chunks ``[lo, hi)`` has children ``[lo, mid)`` and ``[mid, hi)``, ``mid = ⌈(lo+hi)/2⌉``;
   the tree's leaves are the chunks). *ToC-NavTree*: the book's ToC (a virtual root for the book;
   the tree's leaves are the ToC leaves; nodes without leaves below are dropped).
4. Text of an internal node (the "characteristic sentences" rule, ours): the centroid of the
   node's descendant chunk embeddings is L2-normalised; the node's descendant sentences are ranked
   by cosine to it (ties: document order) and taken greedily while they fit ``node_tokens``
   (a sentence that does not fit is skipped); the chosen ones are joined in document order. In
   ToC-NavTree the text starts with the node's title path.
5. Two exact FAISS inner-product indexes per book: one over tree-leaf vectors (chunks), one over
   internal-node vectors; and one BM25 index over each.

Query:

6. Signals: dense cosine and BM25 of the query against every chunk and every internal node.
   Each signal is normalised per query within its own index (``norm``: min-max or z-score) and
   mixed: ``s = alpha * dense + (1 - alpha) * bm25``.
7. Flat ranking: NavTree's tree leaves are chunks, scored by ``s``; ToC-NavTree's are ToC leaves,
   scored by their best chunk. The top ``anchors`` tree leaves are the anchors.
8. Anchored region: for each anchor, its ancestor ``anchor_height`` levels up (at most a child
   of the root) roots a sub-tree the walk may enter; the paths from the tree root to those
   sub-tree roots are allowed too. Nothing else is.
9. Walk: a beam descent from the root. At each step every child (inside the region) of the beam
   nodes is looked at: tree leaves are emitted, internal nodes compete by their branch score
   ``s`` and the best ``beam`` of them form the next beam. Emitted tree leaves are ordered by
   ``(1 - path_weight) * own score + path_weight * mean score of their ancestors below the
   root`` (ties: document order), so a branch's score can lift the leaves under it.
10. Leaves only, budget filled: the walk's tree leaves come first, then the flat ranking fills
    the rest. Mapping to ToC leaves: a chunk stands for the ToC leaf containing it; a ToC leaf
    takes the rank of its first chunk in that sequence (first hit); at most ``depth`` leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from searchtome.baselines.bm25 import BM25Config, BM25Index, rank_desc
from searchtome.baselines.dpr import flat_index, search_all
from searchtome.baselines.encoders import Encoder, EncoderConfig
from searchtome.baselines.registry import RunContext, register
from searchtome.baselines.text import pack_sentences, split_sentences
from searchtome.baselines.trees import Tree, segment_tree, toc_tree

from searchtome.errors import SearchTomeError
from searchtome.io import stable_hash
from searchtome.limits import MAX_IDS
from searchtome.records import Run
from searchtome.titles import title_path

log = logging.getLogger(__name__)

NORMS: tuple[str, ...] = ("minmax", "zscore")
RECONSTRUCTION_NOTE = (
    "NavTree here is a reconstruction from the published description (arXiv 2610.06902 abstract "
    "and a press summary; no code or full text available): chunking, internal-node text rule, "
    "branch score, anchoring and walk parameters are ours"
)


@dataclass(frozen=True)
class NavTreeConfig:
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    chunk_tokens: int = 128
    node_tokens: int = 128
    title: str = "none"
    alpha: float = 0.5
    norm: str = "zscore"
    anchors: int = 5
    anchor_height: int = 1
    beam: int = 8
    path_weight: float = 0.0
    # BM25 inside the branch score (chosen on dev with the walk settings above).
    k1: float = 0.9
    b: float = 0.75
    stopwords: str = "none"
    stemmer: str = "english"
    depth: int = MAX_IDS

    def __post_init__(self) -> None:
        from searchtome.errors import unknown_name

        if self.norm not in NORMS:
            raise unknown_name("normalisation", self.norm, NORMS)
        if self.title not in ("none", "path"):
            raise unknown_name("title mode", self.title, ("none", "path"))
        for name in ("alpha", "path_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise SearchTomeError(f"{name} must be between 0 and 1, not {getattr(self, name)}")
        for name in ("chunk_tokens", "node_tokens", "anchors", "beam"):
            if getattr(self, name) < 1:
                raise SearchTomeError(f"{name} must be at least 1")
        if self.anchor_height < 0:
            raise SearchTomeError("anchor_height must be 0 or more")
        if not 1 <= self.depth <= MAX_IDS:
            raise SearchTomeError(f"depth must be between 1 and {MAX_IDS}, not {self.depth}")

    @property
    def bm25(self) -> BM25Config:
        return BM25Config(
            k1=self.k1, b=self.b, stopwords=self.stopwords, stemmer=self.stemmer, title="none"
        )

    def index_key(self) -> dict[str, Any]:
        """The fields that shape the index (everything but the query-time walk)."""
        from dataclasses import asdict

        return {
            "encoder": asdict(self.encoder),
            "chunk_tokens": self.chunk_tokens,
            "node_tokens": self.node_tokens,
            "title": self.title,
            "bm25": asdict(self.bm25),
        }


@dataclass(frozen=True)
class TocNavTreeConfig(NavTreeConfig):
    """Same knobs; defaults chosen separately on dev for the ToC tree."""


@dataclass(frozen=True)
class HybridConfig:
    """The flat fusion under NavTree, with NavTree's index settings (so the two share caches)."""

    # NavTree's defaults, read from it so that each is written once.
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    chunk_tokens: int = NavTreeConfig.chunk_tokens
    title: str = NavTreeConfig.title
    alpha: float = NavTreeConfig.alpha
    norm: str = NavTreeConfig.norm
    k1: float = NavTreeConfig.k1
    b: float = NavTreeConfig.b
    stopwords: str = NavTreeConfig.stopwords
    stemmer: str = NavTreeConfig.stemmer
    depth: int = NavTreeConfig.depth

    def navtree(self) -> NavTreeConfig:
        """The NavTree config whose walk is switched off (``anchor_height=0``): the same index,
        and the same ranking (``test_hybrid_is_navtree_without_its_walk``)."""
        kept = {f: getattr(self, f) for f in self.__dataclass_fields__}
        return NavTreeConfig(**kept, anchor_height=0)

    def __post_init__(self) -> None:
        self.navtree()  # one validation for both


# -- the per-book index --------------------------------------------------------------------------


@dataclass
class BookIndex:
    book_id: str
    leaf_ids: list[str]
    chunk_texts: list[str]
    chunk_leaf: np.ndarray  # chunk → position in leaf_ids
    tree: Tree
    node_texts: list[str]  # internal-node texts, in internal-index row order
    chunk_index: Any
    node_index: Any
    chunk_bm25: BM25Index
    node_bm25: BM25Index
    toc: bool
    _signals: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)

    def signals(self, query: str, qvec: np.ndarray) -> tuple[np.ndarray, ...]:
        """Raw (dense chunk, bm25 chunk, dense node, bm25 node) scores, memoised per query."""
        key = query
        if key not in self._signals:
            dense_c = search_all(self.chunk_index, qvec[None, :])[0].astype(np.float64)
            dense_n = (
                search_all(self.node_index, qvec[None, :])[0].astype(np.float64)
                if self.node_index is not None
                else np.zeros(0)
            )
            self._signals[key] = (
                dense_c,
                self.chunk_bm25.scores(query),
                dense_n,
                self.node_bm25.scores(query) if self.node_texts else np.zeros(0),
            )
        return self._signals[key]


def chunks_of_leaves(
    leaves: Sequence[Any], encoder: Encoder, config: NavTreeConfig
) -> tuple[list[str], list[int], list[list[int]], list[str]]:
    """Chunk texts, chunk → leaf position, chunk → sentence ids, and all sentences."""
    sentences: list[str] = []
    chunk_texts: list[str] = []
    chunk_leaf: list[int] = []
    chunk_sents: list[list[int]] = []
    titles = [title_path(x.path) or x.title for x in leaves]
    reserve = encoder.count_tokens(titles) if config.title == "path" else [0] * len(leaves)
    for i, leaf in enumerate(leaves):
        sents = split_sentences(leaf.text)
        cap = max(1, config.chunk_tokens - reserve[i])
        groups = pack_sentences(sents, cap, encoder.count_tokens) if sents else []
        if not groups:
            groups = [[titles[i]]]
        for group in groups:
            ids = list(range(len(sentences), len(sentences) + len(group)))
            sentences.extend(group)
            text = " ".join(group)
            if config.title == "path" and group != [titles[i]]:
                text = f"{titles[i]}. {text}"
            chunk_texts.append(text)
            chunk_leaf.append(i)
            chunk_sents.append(ids)
    return chunk_texts, chunk_leaf, chunk_sents, sentences


def characteristic_text(
    sentence_ids: Sequence[int],
    sentence_vecs: np.ndarray,
    sentence_tokens: Sequence[int],
    centroid: np.ndarray,
    sentences: Sequence[str],
    cap: int,
) -> str:
    """The node-text rule: sentences nearest the centroid that fit ``cap``, in document order."""
    ids = np.asarray(sentence_ids, dtype=np.int64)
    if len(ids) == 0:
        return ""
    sims = sentence_vecs[ids] @ centroid
    order = np.lexsort((ids, -sims))
    chosen, used = [], 0
    for j in order:
        sid = int(ids[j])
        n = sentence_tokens[sid]
        if used + n <= cap:
            chosen.append(sid)
            used += n
        if used >= cap:
            break
    return " ".join(sentences[s] for s in sorted(chosen))


def build_book_index(
    dataset: Any, book_id: str, config: NavTreeConfig, encoder: Encoder, toc: bool
) -> BookIndex:
    leaves = dataset.leaves(book_id)
    if not leaves:
        raise SearchTomeError(f"book {book_id!r} has no leaves to retrieve")
    chunk_texts, chunk_leaf, chunk_sents, sentences = chunks_of_leaves(leaves, encoder, config)
    leaf_ids = [x.leaf_id for x in leaves]
    chunk_vecs = encoder.encode_passages(chunk_texts, desc=f"encoding chunks ({book_id})")
    sent_vecs = encoder.encode_passages(sentences, desc=f"encoding sentences ({book_id})")
    sent_tokens = encoder.count_tokens(sentences)

    tree = toc_tree(dataset.toc(book_id), leaf_ids) if toc else segment_tree(len(chunk_texts))
    chunks_of_leaf: list[list[int]] = [[] for _ in leaves]
    for c, i in enumerate(chunk_leaf):
        chunks_of_leaf[i].append(c)

    node_texts: list[str] = []
    for v in tree.internal_nodes():
        refs = tree.descendant_leaves(v)
        chunks = sorted(c for r in refs for c in (chunks_of_leaf[r] if toc else [r]))
        centroid = chunk_vecs[chunks].mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        sent_ids = [s for c in chunks for s in chunk_sents[c]]
        text = characteristic_text(
            sent_ids, sent_vecs, sent_tokens, centroid, sentences, config.node_tokens
        )
        if toc and tree.titles[v]:
            text = f"{title_path(tree.titles[v])}: {text}".rstrip(": ")
        node_texts.append(text)
    node_vecs = (
        encoder.encode_passages(node_texts, desc=f"encoding tree nodes ({book_id})")
        if node_texts
        else np.zeros((0, chunk_vecs.shape[1]), dtype=np.float32)
    )
    bm25 = config.bm25
    return BookIndex(
        book_id=book_id,
        leaf_ids=leaf_ids,
        chunk_texts=chunk_texts,
        chunk_leaf=np.asarray(chunk_leaf, dtype=np.int64),
        tree=tree,
        node_texts=node_texts,
        chunk_index=flat_index(chunk_vecs),
        node_index=flat_index(node_vecs) if node_texts else None,
        chunk_bm25=BM25Index(chunk_texts, bm25),
        node_bm25=BM25Index(node_texts, bm25),
        toc=toc,
    )


# Built indexes and query signals survive between runs in one process (``searchtome tune``).
_MEMO: dict[str, BookIndex] = {}
_MEMO_SIZE = 8


def _book_key(dataset: Any, book_id: str, config: NavTreeConfig, toc: bool) -> str:
    leaves = [(x.leaf_id, tuple(x.path), x.title, x.text) for x in dataset.leaves(book_id)]
    nodes = [(n.node_id, n.parent_id, tuple(n.path)) for n in dataset.toc(book_id)] if toc else []
    return stable_hash([book_id, toc, leaves, nodes, config.index_key()])


def book_index(
    dataset: Any, book_id: str, config: NavTreeConfig, encoder: Encoder, toc: bool
) -> BookIndex:
    key = _book_key(dataset, book_id, config, toc)
    if key not in _MEMO:
        while len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = build_book_index(dataset, book_id, config, encoder, toc)
    return _MEMO[key]


# -- the walk ------------------------------------------------------------------------------------


def normalise(x: np.ndarray, how: str) -> np.ndarray:
    if x.size == 0:
        return x
    if how == "minmax":
        lo, hi = float(x.min()), float(x.max())
        return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    sd = float(x.std())
    return (x - float(x.mean())) / sd if sd > 0 else np.zeros_like(x)


def walk(
    tree: Tree, leaf_scores: np.ndarray, node_scores: np.ndarray, config: NavTreeConfig
) -> list[int]:
    """Tree leaves (as leaf-score positions) in emission order: walk first, flat fill after."""
    flat = [int(i) for i in rank_desc(leaf_scores)]
    if len(tree) == 1:
        return flat
    node_of_ref = {tree.leaf_ref[v]: v for v in range(len(tree)) if tree.leaf_ref[v] >= 0}
    roots = []
    for ref in flat[: config.anchors]:
        v = node_of_ref[ref]
        for _ in range(config.anchor_height):
            if tree.parent[v] <= 0:
                break
            v = tree.parent[v]
        roots.append(v)

    def allowed(v: int) -> bool:
        return any(tree.contains(r, v) or tree.contains(v, r) for r in roots)

    def score(v: int) -> float:
        ref = tree.leaf_ref[v]
        return float(leaf_scores[ref]) if ref >= 0 else float(node_scores[tree.internal_ref[v]])

    emitted: list[int] = []
    beam = [0]
    while beam:
        candidates = []
        for v in beam:
            for c in tree.children[v]:
                if not allowed(c):
                    continue
                if tree.leaf_ref[c] >= 0:
                    emitted.append(c)
                else:
                    candidates.append(c)
        candidates.sort(key=lambda c: (-score(c), tree.tin[c]))
        beam = candidates[: config.beam]

    lam = config.path_weight

    def key(v: int) -> tuple[float, int]:
        own = score(v)
        if lam == 0.0:
            return (-own, tree.tin[v])
        total, n, u = 0.0, 0, tree.parent[v]
        while u > 0:
            total, n, u = total + score(u), n + 1, tree.parent[u]
        return (-((1 - lam) * own + lam * total / n if n else own), tree.tin[v])

    order = [tree.leaf_ref[v] for v in sorted(emitted, key=key)]
    seen = set(order)
    return order + [r for r in flat if r not in seen]


def rank_leaves(index: BookIndex, query: str, qvec: np.ndarray, config: NavTreeConfig) -> list[str]:
    dense_c, bm25_c, dense_n, bm25_n = index.signals(query, qvec)
    a, how = config.alpha, config.norm
    chunk_s = a * normalise(dense_c, how) + (1 - a) * normalise(bm25_c, how)
    node_s = a * normalise(dense_n, how) + (1 - a) * normalise(bm25_n, how)
    if index.toc:
        leaf_s = np.full(len(index.leaf_ids), -np.inf)
        np.maximum.at(leaf_s, index.chunk_leaf, chunk_s)
        sequence = walk(index.tree, leaf_s, node_s, config)
    else:
        sequence = [int(index.chunk_leaf[c]) for c in walk(index.tree, chunk_s, node_s, config)]
    out: list[str] = []
    seen: set[int] = set()
    for i in sequence:
        if i not in seen:
            seen.add(i)
            out.append(index.leaf_ids[i])
            if len(out) == config.depth:
                break
    return out


def fused_chunk_scores(
    index: BookIndex, query: str, qvec: np.ndarray, config: NavTreeConfig
) -> np.ndarray:
    """The hybrid's score of every chunk: z-scored (or min-max) dense and BM25, mixed by alpha."""
    dense_c, bm25_c, _, _ = index.signals(query, qvec)
    a, how = config.alpha, config.norm
    return a * normalise(dense_c, how) + (1 - a) * normalise(bm25_c, how)


def flat_leaves(index: BookIndex, query: str, qvec: np.ndarray, config: NavTreeConfig) -> list[str]:
    """ToC leaves by their best chunk's fused score (``hybrid``): no tree, no walk."""
    chunk_s = fused_chunk_scores(index, query, qvec, config)
    return [index.leaf_ids[i] for i, _ in best_chunks(index, chunk_s, config.depth)]


def best_chunks(index: BookIndex, chunk_s: np.ndarray, depth: int) -> list[tuple[int, int]]:
    """(leaf position, its best chunk) for the ``depth`` leaves whose best chunk ranks highest;
    a leaf takes the rank of its first (best) chunk, ties in document order."""
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    for c in rank_desc(chunk_s):
        i = int(index.chunk_leaf[c])
        if i not in seen:
            seen.add(i)
            out.append((i, int(c)))
            if len(out) == depth:
                break
    return out


def _rank_queries(
    dataset: Any,
    split: str,
    config: NavTreeConfig,
    ctx: RunContext,
    toc: bool,
    name: str,
    rank: Any,
) -> tuple[dict[str, tuple[str, ...]], int]:
    """Every query of ``split`` ranked by ``rank(index, text, qvec, config)`` over its book's
    index (NavTree's, whichever ranking reads it, so the rows share one cache), and the number
    of internal tree nodes those indexes hold."""
    from searchtome.settings import progress

    encoder = Encoder(config.encoder)
    books = [b for b in dataset.book_ids() if dataset.queries(split, b)]
    queries = [q for b in books for q in dataset.queries(split, b)]
    qvec = encoder.encode_queries([q.text for q in queries])
    rankings: dict[str, tuple[str, ...]] = {}
    n_chunks = n_nodes = row = 0
    for book_id in books:
        index = book_index(dataset, book_id, config, encoder, toc)
        n_chunks += len(index.chunk_texts)
        n_nodes += len(index.node_texts)
        for q in progress(dataset.queries(split, book_id), desc=f"{name} {book_id}", unit="query"):
            rankings[q.query_id] = tuple(rank(index, q.text, qvec[row], config))
            row += 1
    ctx.record(
        models=(encoder.model_label(),),
        encoder=encoder.describe(),
        dtype=encoder.config.dtype,  # run_info.dtype: what the encoder ran in
        n_chunks=n_chunks,
        parameters=encoder.parameter_count(),  # run_info.parameters
    )
    return rankings, n_nodes


def _run(dataset: Any, split: str, config: NavTreeConfig, ctx: RunContext, toc: bool) -> Run:
    name = "toc-navtree" if toc else "navtree"
    rankings, n_nodes = _rank_queries(dataset, split, config, ctx, toc, name, rank_leaves)
    ctx.record(n_internal_nodes=n_nodes)
    if toc:
        ctx.record(
            description=(
                "ToC-NavTree (new, not in the NavTree or STAIR papers): NavTree's anchored hybrid "
                "walk over the book's authored ToC instead of a balanced segment tree; leaves only"
            )
        )
        ctx.record(tree="the book's ToC; internal text = title path + characteristic sentences")
    else:
        ctx.record(
            description=(
                "NavTree (reconstruction from the published description): balanced segment tree over "
                "sentence chunks, anchored dense+BM25 walk, leaves only, chunks mapped to ToC leaves"
            )
        )
        ctx.record(reconstruction=RECONSTRUCTION_NOTE)
    ctx.record(leaf_rule="a ToC leaf takes the rank of its first chunk (walk, then flat fill)")
    return Run(name=name, rankings=rankings)


@register(
    "navtree",
    summary="NavTree (reconstruction): BM25+MiniLM fusion over sentence chunks, then an anchored "
    "walk down a segment tree (measured: the walk barely reorders the top; see hybrid)",
    config=NavTreeConfig,
    needs=("ml",),
)
def run_navtree(dataset: Any, split: str, config: NavTreeConfig, ctx: RunContext) -> Run:
    return _run(dataset, split, config, ctx, toc=False)


@register(
    "hybrid",
    summary="Hybrid: BM25 and MiniLM scores of sentence chunks, z-scored and averaged; a leaf "
    "ranks by its best chunk (NavTree without its walk)",
    config=HybridConfig,
    needs=("ml",),
)
def run_hybrid(dataset: Any, split: str, config: HybridConfig, ctx: RunContext) -> Run:
    nav = config.navtree()
    rankings, _ = _rank_queries(dataset, split, nav, ctx, False, "hybrid", flat_leaves)
    ctx.record(
        description=(
            "hybrid: BM25 and MiniLM over sentence chunks of each ToC leaf, each z-scored per query "
            "and averaged; a ToC leaf ranks by its best chunk (NavTree's flat ranking, no tree walk)"
        )
    )
    return Run(name="hybrid", rankings=rankings)


@register(
    "toc-navtree",
    summary="ToC-NavTree (new): NavTree's walk over the book's authored ToC, leaves only",
    config=TocNavTreeConfig,
    needs=("ml",),
)
def run_toc_navtree(dataset: Any, split: str, config: TocNavTreeConfig, ctx: RunContext) -> Run:
    return _run(dataset, split, config, ctx, toc=True)
