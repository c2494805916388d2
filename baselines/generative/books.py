"""What one book needs for prompting and decoding: identifiers, token trie and prompt halves.

A book's prompt splits into a per-book prefix (instruction, title and, for STAIR, the ToC) and a
per-query suffix, tokenized separately (``common.PromptTemplate``); the prefix is the same for
every query of the book, so its key/value cache is computed once. The prompt layout
(``prompt_layout``, :mod:`.layouts`) decides the ToC text, the identifiers and the labels.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from searchtome.baselines.generative.common import (
    PASSAGE_LABEL,
    QUERY_LABEL,
    IdentifierIndex,
    TokenTrie,
    semantic_id_strings,
    semantic_ids,
)
from searchtome.baselines.generative.config import Identifiers
from searchtome.baselines.generative.layouts import Task, get_layout

from searchtome.errors import SearchTomeError
from searchtome.titles import title_path

if TYPE_CHECKING:
    from searchtome.baselines.generative.config import GenRetConfig
    from searchtome.baselines.generative.engine import LM

    from searchtome.dataset.layout import Dataset

log = logging.getLogger(__name__)


@dataclass
class BookCtx:
    """Everything a book needs for prompting and decoding."""

    book_id: str
    title: str
    identifiers: dict[str, str]  # leaf id → identifier string
    index: IdentifierIndex
    prefix_ids: list[int]
    tail_ids: list[int]
    trie: TokenTrie
    query_label: str = QUERY_LABEL  # "Question" (v1) or "### Query" (paper)
    passage_label: str = PASSAGE_LABEL

    def suffix_ids(self, lm: LM, text: str, label: str, budget: int) -> list[int]:
        head = lm.encode(f"{label}: {' '.join(text.split())}")
        room = budget - len(self.prefix_ids) - len(self.tail_ids)
        if room < 8:
            raise SearchTomeError(
                f"book {self.book_id}: the prompt prefix takes {len(self.prefix_ids)} tokens, "
                f"leaving {room} of max_input_tokens={budget} for the query; raise max_input_tokens"
            )
        return head[:room] + self.tail_ids

    def sub_trie(self, leaf_ids: Sequence[str]) -> TokenTrie:
        """The trie of ``leaf_ids`` alone (leaves of this book), their token sequences taken
        from the book's trie: what a reranker scores for one query."""
        unknown = [x for x in leaf_ids if x not in self.trie.sequences]
        if unknown:
            raise SearchTomeError(f"book {self.book_id}: {unknown[0]!r} is none of its leaves")
        return TokenTrie({x: self.trie.sequences[x] for x in leaf_ids}, self.trie.eos_id)


def _semantic_identifiers(dataset: Dataset, book_id: str, cfg: GenRetConfig, seed: int) -> dict:
    from searchtome.baselines.encoders import Encoder, EncoderConfig

    leaves = dataset.leaves(book_id)
    texts = [f"{title_path(x.path)}. {x.text}" for x in leaves]
    vectors = Encoder(EncoderConfig()).encode_passages(texts, desc=f"embedding {book_id} leaves")
    prompt = cfg.prompt
    ids = semantic_id_strings(
        semantic_ids(vectors, k=prompt.semantic_k, c=prompt.semantic_c, seed=seed)
    )
    return {x.leaf_id: s for x, s in zip(leaves, ids, strict=True)}


def book_context(
    lm: LM, dataset: Dataset, book_id: str, cfg: GenRetConfig, *, with_toc: bool, seed: int
) -> BookCtx:
    """The prompt halves, identifiers (the layout's leaf strings or semantic ids) and trie of
    one book."""
    layout = get_layout(cfg.prompt.layout)
    nodes = dataset.toc(book_id)
    if not nodes:
        raise SearchTomeError(f"{dataset.root}: book {book_id!r} has no ToC nodes")
    leaf_ids = {x.leaf_id for x in dataset.leaves(book_id)}
    if cfg.prompt.identifiers is Identifiers.SEMANTIC:
        idents = _semantic_identifiers(dataset, book_id, cfg, seed)
        index = IdentifierIndex(book_id, idents)
    elif cfg.prompt.identifiers is Identifiers.ATOMIC:
        # One opaque number per leaf in document order, as the original DSI's atomic docids
        # (a number says nothing about the section; only training ties it to one).
        idents = {x.leaf_id: str(i) for i, x in enumerate(dataset.leaves(book_id), 1)}
        index = IdentifierIndex(book_id, idents)
    else:
        idents = {k: v for k, v in layout.leaf_identifiers(nodes).items() if k in leaf_ids}
        index = layout.index(nodes, idents)
    missing = leaf_ids - set(idents)
    if missing:
        raise SearchTomeError(
            f"{dataset.root}: leaves {sorted(missing)[:3]} of {book_id!r} are not ToC leaves"
        )
    title = dataset.books[book_id].book.title
    # Codes (cluster paths or opaque numbers) get the "write its code" instruction.
    codes = cfg.prompt.identifiers is not Identifiers.PATH
    prefix, pattern = layout.template(Task.retrieval(with_toc, codes)).split(
        lm.tokenizer, title, layout.toc_text(nodes)
    )
    tail = pattern.split("{text}", 1)[1].replace("{{", "{").replace("}}", "}")
    trie = TokenTrie({lid: [*lm.encode(s), lm.eos_id] for lid, s in idents.items()}, lm.eos_id)
    if trie.max_length > cfg.decoding.max_output_tokens:
        log.warning(
            "%s: the longest identifier takes %d tokens (> max_output_tokens=%d); constrained "
            "decoding still completes it",
            book_id,
            trie.max_length,
            cfg.decoding.max_output_tokens,
        )
    return BookCtx(
        book_id,
        title,
        idents,
        index,
        lm.encode(prefix),
        lm.encode(tail),
        trie,
        query_label=layout.query_label,
        passage_label=layout.passage_label,
    )
