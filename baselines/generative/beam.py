"""Beam search over a shared prompt prefix, several queries at once (needs the ml extra).

Each query and its open beams form a branch of a token tree in a batch row
(:class:`~searchtome.baselines.generative.engine.TreeCache`), so every step feeds one token per
open beam and reuses the keys/values of the prefix, the query and the beams' earlier tokens.
With a token trie only leaf identifiers can come out (the STAIR/DSI decoder); without one it is
unconstrained generation (the ``free`` decoder and the local zero-shot model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from searchtome.baselines.generative.common import TokenTrie
from searchtome.baselines.generative.engine import LM, PrefixKV, TreeCache, auto_group, chain

from searchtome.errors import SearchTomeError


@dataclass
class Hyp:
    score: float
    tokens: tuple[int, ...]
    last: int  # row-local index of the last token fed to the model
    node: int = 0  # trie node (constrained search)


def _normed(h: Hyp, length_penalty: float) -> float:
    return h.score / (len(h.tokens) ** length_penalty) if length_penalty else h.score


def _feed_suffixes(
    tree: TreeCache, suffixes: Sequence[Sequence[int]], members: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, dict[int, int]]:
    """Feed every query suffix as a chain in its row; the next-token log-probabilities of each
    query (in query order) and the row-local index of its last token."""
    tokens, parents, keep = [], [], []
    start_last: dict[int, int] = {}
    for qs in members:
        row_t: list[int] = []
        row_p: list[int] = []
        row_k: list[int] = []
        for q in qs:
            offset = len(row_t)
            row_t.extend(suffixes[q])
            row_p.extend(chain(len(suffixes[q]), -1, offset))
            row_k.append(len(row_t) - 1)
            start_last[q] = len(row_t) - 1
        tokens.append(row_t)
        parents.append(row_p)
        keep.append(row_k)
    logits = tree.extend(tokens, parents, keep=keep)
    return torch.log_softmax(logits.float(), dim=-1), start_last


def _candidates(
    beams: Sequence[Hyp], dists: Sequence[torch.Tensor], trie: TokenTrie | None, num_beams: int
) -> list[Hyp]:
    """Every one-token extension of the beams (trie children, or the vocabulary's top
    ``num_beams + 1``), best first; ties broken by tokens so the order is deterministic."""
    cands: list[Hyp] = []
    for h, lp in zip(beams, dists, strict=True):
        if trie is not None:
            allowed = list(trie.children[h.node].items())
            vals = lp[[t for t, _ in allowed]].tolist()
            for (tok, child), v in zip(allowed, vals, strict=True):
                cands.append(Hyp(h.score + v, (*h.tokens, tok), h.last, child))
        else:
            k = min(num_beams + 1, lp.numel())
            vals, idx = torch.topk(lp, k)
            for v, tok in zip(vals.tolist(), idx.tolist(), strict=True):
                cands.append(Hyp(h.score + v, (*h.tokens, tok), h.last))
    cands.sort(key=lambda h: (-h.score, h.tokens))
    return cands


@dataclass
class _Search:
    """The fixed settings of one beam search."""

    trie: TokenTrie | None
    num_beams: int
    max_new_tokens: int
    length_penalty: float
    eos: int

    def finished(self, h: Hyp) -> bool:
        if self.trie is not None:
            return h.node in self.trie.terminal
        return h.tokens[-1] == self.eos or len(h.tokens) >= self.max_new_tokens

    def advance(self, cands: Sequence[Hyp], done: list[Hyp]) -> tuple[list[Hyp], list[Hyp]]:
        """Split the ranked candidates into the next open beams and the finished results
        (``done``, the best ``num_beams`` kept); ``(open beams, done)``."""
        nxt: list[Hyp] = []
        done = list(done)
        for h in cands:
            if self.finished(h):
                done.append(h)
            elif len(nxt) < self.num_beams:
                nxt.append(h)
        done.sort(key=lambda h: (-_normed(h, self.length_penalty), h.tokens))
        done = done[: self.num_beams]
        if len(done) >= self.num_beams and not self.length_penalty:
            # Scores only decrease: an open beam below the worst kept result cannot beat it.
            worst = done[-1].score
            nxt = [h for h in nxt if h.score > worst]
        return nxt, done

    def results(self, done: list[Hyp], live: list[Hyp]) -> list[tuple[tuple[int, ...], float]]:
        lp = self.length_penalty
        hyps = sorted(done, key=lambda h: (-_normed(h, lp), h.tokens))[: self.num_beams]
        if self.trie is None and not hyps:  # ran out of steps: keep the open beams as they are
            hyps = sorted(live, key=lambda h: -_normed(h, lp))[: self.num_beams]
        if self.trie is not None:
            for h in hyps:
                if self.trie.lookup(h.tokens) is None:
                    raise AssertionError(f"constrained search produced a non-identifier {h.tokens}")
        return [(h.tokens, _normed(h, lp)) for h in hyps]


@torch.no_grad()
def beam_search(
    lm: LM,
    prefix: PrefixKV | None,
    suffixes: Sequence[Sequence[int]],
    *,
    trie: TokenTrie | None,
    num_beams: int = 5,
    max_new_tokens: int = 64,
    length_penalty: float = 0.0,
    group: int = 0,
) -> list[list[tuple[tuple[int, ...], float]]]:
    """Beam search for several queries at once over one shared prefix.

    Queries are laid out ``group`` per batch row (:func:`auto_group`), each query with its beams
    a separate branch of its row's tree. Returns, per query, up to ``num_beams`` finished
    hypotheses ``(tokens, score)`` best first; ``score`` is the summed log-probability (divided
    by ``length ** length_penalty``).

    With a ``trie`` only identifier continuations are considered, a hypothesis finishes when it
    consumes its identifier's EOS, and every output is an identifier (checked). Because
    log-probabilities only decrease, a query stops once its worst kept result beats every open
    beam, so with ``length_penalty=0`` the search never discards a better continuation of an
    open beam; with ``num_beams`` at least the number of identifiers nothing is ever pruned and
    the result is the exact ranking. Without a trie, the top tokens of the whole vocabulary are
    expanded and a hypothesis ends at EOS or after ``max_new_tokens`` (outputs may be anything —
    that is the point of the unconstrained mode).
    """
    if num_beams < 1:
        raise SearchTomeError("num_beams must be at least 1")
    n_q = len(suffixes)
    if any(not s for s in suffixes):
        raise SearchTomeError("empty query suffix")
    search = _Search(trie, num_beams, max_new_tokens, length_penalty, lm.eos_id)
    g = auto_group(lm, group, n_q)
    members = [list(range(i, min(i + g, n_q))) for i in range(0, n_q, g)]
    tree = TreeCache(lm, prefix, rows=len(members))
    logp_rows, start_last = _feed_suffixes(tree, suffixes, members)  # row-major = query order
    limit = trie.max_length if trie is not None else max_new_tokens

    live: list[list[Hyp]] = [[Hyp(0.0, (), start_last[q])] for q in range(n_q)]
    dist: dict[tuple[int, int], torch.Tensor] = {(q, 0): logp_rows[q] for q in range(n_q)}
    done: list[list[Hyp]] = [[] for _ in suffixes]
    rows_alive = list(range(len(members)))  # original row ids, in the tree's current order
    for _step in range(limit):
        for q, beams in enumerate(live):
            if beams:
                cands = _candidates(
                    beams, [dist[(q, b)] for b in range(len(beams))], trie, num_beams
                )
                live[q], done[q] = search.advance(cands, done[q])
        still = [r for r in rows_alive if any(live[q] for q in members[r])]
        if not still:
            break
        if len(still) < len(rows_alive):  # drop rows whose queries are all finished
            tree.select_rows([rows_alive.index(r) for r in still])
            rows_alive = still
        dist = _feed_beams(tree, [members[r] for r in rows_alive], live)
    return [search.results(done[q], live[q]) for q in range(n_q)]


def _feed_beams(
    tree: TreeCache, rows: Sequence[Sequence[int]], live: Sequence[list[Hyp]]
) -> dict[tuple[int, int], torch.Tensor]:
    """Feed the last token of every open beam (queries ``rows[r]`` in row ``r``) under its
    parent; the next-token log-probabilities by ``(query, beam)``. Updates each beam's ``last``."""
    base = tree.length
    feed = [[(q, b, h) for q in qs for b, h in enumerate(live[q])] for qs in rows]
    logits = tree.extend(
        [[h.tokens[-1] for _, _, h in row] for row in feed],
        [[h.last for _, _, h in row] for row in feed],
    )
    logp = torch.log_softmax(logits.float(), dim=-1)
    dist = {}
    i = 0
    for row in feed:
        for j, (q, b, h) in enumerate(row):
            h.last = base + j
            dist[(q, b)] = logp[i]
            i += 1
    return dist
