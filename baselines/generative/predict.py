"""Decoding the queries of a split into ranked leaf ids, book by book (needs the ml extra).

Three decoders (:class:`~.config.Decoder`): ``beam``, trie-constrained beam search; ``exact``, the
log-probability of every leaf identifier; ``free``, unconstrained beam search whose outputs are
matched back to leaf, non-leaf or invalid ids. Finished batches can be appended to a partial
file (:func:`append_partial`) so that a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.baselines.generative.config import Decoder, DecodingSettings

from searchtome.records import Query
from searchtome.settings import progress

if TYPE_CHECKING:
    from searchtome.baselines.generative.books import BookCtx
    from searchtome.baselines.generative.config import GenRetConfig
    from searchtome.baselines.generative.engine import LM, PrefixKV


@dataclass
class Decoded:
    ids: list[str]
    scores: list[float]
    kinds: list[str]


def decode_queries(
    lm: LM,
    book: BookCtx,
    prefix: PrefixKV,
    suffixes: Sequence[Sequence[int]],
    decoding: DecodingSettings,
    group: int = 0,
    candidates: Sequence[Sequence[str]] | None = None,
) -> list[Decoded]:
    """Ranked ids of one book's queries (their prompt suffixes) under ``decoding``'s decoder;
    ``group`` items per batch row (``tree_group``). ``candidates`` (exact decoding only): the
    leaf ids each query ranks, instead of every leaf of the book."""
    from searchtome.baselines.generative.beam import beam_search
    from searchtome.baselines.generative.engine import decode_text, rank_from_scores, score_trie

    if candidates is not None and decoding.mode is not Decoder.EXACT:
        raise ValueError("candidates are scored by the exact decoder only")
    if decoding.mode is Decoder.EXACT:
        out = []
        for i, suf in enumerate(suffixes):
            trie = book.trie if candidates is None else book.sub_trie(candidates[i])
            ranked = rank_from_scores(score_trie(lm, prefix, suf, trie))
            out.append(
                Decoded([k for k, _ in ranked], [s for _, s in ranked], ["leaf"] * len(ranked))
            )
        return out
    constrained = decoding.mode is not Decoder.FREE
    results = beam_search(
        lm,
        prefix,
        suffixes,
        trie=book.trie if constrained else None,
        num_beams=decoding.num_beams,
        max_new_tokens=decoding.max_output_tokens,
        length_penalty=decoding.length_penalty,
        group=group,
    )
    out = []
    for hyps in results:
        dec = Decoded([], [], [])
        for tokens, score in hyps:
            if constrained:
                key = book.trie.lookup(tokens)
                assert key is not None  # beam_search checked it
                item, kind = key, "leaf"
            else:
                item, kind = book.index.match(decode_text(lm, tokens))
            if item in dec.ids:  # two token sequences, one string: keep the better one
                continue
            dec.ids.append(item)
            dec.scores.append(float(score))
            dec.kinds.append(kind)
        out.append(dec)
    return out


class Predictor:
    """Decodes queries book by book, computing each book's prefix cache once."""

    def __init__(self, lm: LM, books: dict[str, BookCtx], cfg: GenRetConfig, frozen_prefix: bool):
        self.lm, self.books, self.cfg, self.frozen_prefix = lm, books, cfg, frozen_prefix
        self._prefix: dict[str, PrefixKV] = {}

    def prefix(self, book_id: str) -> PrefixKV:
        if book_id not in self._prefix:
            ids = self.books[book_id].prefix_ids
            if self.frozen_prefix:
                with self.lm.adapter_disabled():
                    self._prefix[book_id] = self.lm.prefix_cache(ids)
            else:
                self._prefix[book_id] = self.lm.prefix_cache(ids)
        return self._prefix[book_id]

    def forget(self) -> None:
        """Drop cached prefixes (after the adapter changed)."""
        self._prefix.clear()

    def run(
        self,
        queries: Sequence[Query],
        decoding: DecodingSettings | None = None,
        *,
        desc: str = "decoding",
        done: dict[str, Decoded] | None = None,
        on_batch: Callable[[dict[str, Decoded]], None] | None = None,
        candidates: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Decoded]:
        """Decode the queries not in ``done`` with ``decoding`` (default: the config's);
        ``on_batch`` sees every finished batch; ``candidates``: the leaves each query ranks
        (by query id; exact decoding), all of its book's when not given."""
        cfg = self.cfg
        decoding = decoding or cfg.decoding
        out: dict[str, Decoded] = dict(done or {})
        todo = [q for q in queries if q.query_id not in out]
        by_book: dict[str, list[Query]] = {}
        for q in todo:
            by_book.setdefault(q.book_id, []).append(q)
        batch = 1 if decoding.mode is Decoder.EXACT else decoding.query_batch
        bar = progress(total=len(todo), desc=desc, unit="query")
        for book_id in sorted(by_book):
            book = self.books[book_id]
            prefix = self.prefix(book_id)
            items = by_book[book_id]
            for lo in range(0, len(items), batch):
                part = items[lo : lo + batch]
                budget = cfg.prompt.max_input_tokens
                suffixes = [
                    book.suffix_ids(self.lm, q.text, book.query_label, budget) for q in part
                ]
                decoded = decode_queries(
                    self.lm,
                    book,
                    prefix,
                    suffixes,
                    decoding,
                    group=cfg.training.group,
                    candidates=None
                    if candidates is None
                    else [candidates[q.query_id] for q in part],
                )
                new = {q.query_id: d for q, d in zip(part, decoded, strict=True)}
                out.update(new)
                if on_batch is not None:
                    on_batch(new)
                bar.update(len(part))
        bar.close()
        return out


def read_partial(path: Path) -> dict[str, Decoded]:
    """The queries a killed run already decoded (none when ``path`` does not exist)."""
    out: dict[str, Decoded] = {}
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: redo that query
                continue
            out[row["q"]] = Decoded(row["ids"], row["scores"], row["kinds"])
    return out


def append_partial(path: Path, rows: dict[str, Decoded]) -> None:
    """Append decoded queries, one JSON line each, synced so that a kill loses at most a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for qid, d in rows.items():
            fh.write(json.dumps({"q": qid, "ids": d.ids, "scores": d.scores, "kinds": d.kinds}))
            fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
