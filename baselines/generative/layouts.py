"""Prompt layouts of the generative baselines: what a model reads about a book and what it writes.

A layout fixes the ToC text, the string a model generates for a leaf (its identifier, which the
token trie constrains), how a generated string maps back to a ToC node, and the prompt around
the query. ``prompt_layout`` picks one:

* ``paper`` (the default) — STAIR's input as the paper's Table 2 shows it, as plain text::

      ### Book: Alpha Biology
      <instruction>
      ### Table of Contents
      1 Cells
      1.1 Membranes
      leaf 1.1.1 Lipids
      ...
      ### Query: What is said about lipids?
      ### Section:
      leaf 1.1.1 Lipids

  The ToC block holds one line per node in document order (:func:`toc_lines`): its section
  number and title, leaf lines prefixed ``leaf ``. The number is the book's own when the title
  starts with one (``12.9 Step seven: ...`` is kept as it is), else the node's ordinal path in
  the ToC (``1.1.1``). The completion (the identifier) is the leaf's own line, then EOS. DSI
  reads the same prompt without the ToC block. STAIR and DSI get the text as it is (only the
  BOS token the tokenizer itself would add); the zero-shot model gets it as one chat message.
* ``v1`` — the toolkit's first layout, kept byte for byte: the model's chat template around
  the instruction, ``Book:``, the indented ToC of ``common.serialize_toc`` and ``Question:``;
  identifiers are title paths (``common.leaf_identifiers``).

Everything before the query depends on the book only, so in both layouts the prompt splits
into a per-book prefix (its key/value cache computed once) and a per-query suffix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from searchtome.baselines.generative.common import (
    DSI_INSTRUCTION,
    DSI_SEMANTIC_INSTRUCTION,
    PASSAGE_LABEL,
    QUERY_LABEL,
    STAIR_INSTRUCTION,
    ZEROSHOT_INSTRUCTION,
    IdentifierIndex,
    PromptTemplate,
    leaf_identifiers,
    serialize_toc,
)

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.titles import clean_title

if TYPE_CHECKING:
    from searchtome.records import TocNode

PROMPT_LAYOUTS: tuple[str, ...] = ("paper", "v1")


class Task(StrEnum):
    """What a prompt asks for; it decides the instruction and whether the ToC is in it."""

    STAIR = "stair"  # name the leaf, the ToC in the prompt
    DSI = "dsi"  # name the leaf, the query alone
    DSI_CODES = "dsi-semantic"  # write the leaf's code (atomic or semantic identifiers)
    ZEROSHOT = "zeroshot"  # name three leaves, the ToC in one chat message

    @classmethod
    def retrieval(cls, with_toc: bool, codes: bool) -> Task:
        """STAIR's task, or DSI's: ``codes`` when identifiers are numbers, not leaf strings."""
        if with_toc:
            return cls.STAIR
        return cls.DSI_CODES if codes else cls.DSI

    @property
    def reads_toc(self) -> bool:
        return self in (Task.STAIR, Task.ZEROSHOT)


LEAF_MARK = "leaf "

# A title that starts with its own section number: "12.9 Step seven", "3. Methods", "4 Law".
_OWN_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.?(?:\s|$)")

# The paper's instruction, in our own words; DSI's variants leave the ToC out of it.
PAPER_STAIR_INSTRUCTION = (
    "Pick the section of the table of contents below that can answer the user query. "
    "Write only that section, exactly as its line reads, and no explanation."
)
PAPER_DSI_INSTRUCTION = (
    "Pick the section of this book that can answer the user query. "
    "Write only that section, and no explanation."
)
PAPER_DSI_SEMANTIC_INSTRUCTION = (
    "Pick the section of this book that can answer the user query. "
    "Write only its code, and no explanation."
)
PAPER_ZEROSHOT_INSTRUCTION = (
    "Pick the three sections of the table of contents below (lines starting with 'leaf') most "
    "likely to answer the user query, best first. Write each exactly as its line reads, one per "
    "line, and nothing else."
)


def section_line(node: TocNode) -> str:
    """A node's line in the paper's ToC block (before duplicates get ``(2)``, ``(3)``)."""
    title = clean_title(node.title)
    if _OWN_NUMBER.match(title):
        body = title
    else:
        ordinal = node.node_id.split("/", 1)[1]
        body = f"{ordinal} {title}".rstrip()
    return f"{LEAF_MARK}{body}" if node.is_leaf else body


def toc_lines(nodes: Sequence[TocNode]) -> dict[str, str]:
    """``node id → line`` for every node, in document order, unique within the book.

    Ordinal numbers make lines unique; a book's own numbers may repeat (two "1.1 Introduction"
    in two parts), and then the later lines get `` (2)``, `` (3)``, as v1's title paths do.
    """
    if not nodes:
        raise SearchTomeError("cannot serialize an empty table of contents")
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for node in nodes:
        line = section_line(node)
        count = seen.get(line, 0) + 1
        seen[line] = count
        out[node.node_id] = line if count == 1 else f"{line} ({count})"
    return out


def _leading_bos(tokenizer: Any) -> str:
    """The BOS token text when the tokenizer puts one before plain text itself (Llama, Mistral);
    empty for tokenizers that do not (SmolLM2) and for objects that are not tokenizers."""
    bos = getattr(tokenizer, "bos_token", None)
    if not bos or not callable(tokenizer):
        return ""
    ids = tokenizer("x")["input_ids"]
    return bos if ids and ids[0] == tokenizer.bos_token_id else ""


@dataclass(frozen=True)
class PaperTemplate(PromptTemplate):
    """The paper's plain-text prompt; ``use_chat_template`` only for models used zero-shot."""

    use_chat_template: bool = False

    def user_text(self, book_title: str, toc_text: str, slot: str) -> str:
        toc = f"### Table of Contents\n{toc_text}\n" if self.with_toc else ""
        return f"### Book: {clean_title(book_title)}\n{self.instruction}\n{toc}{slot}\n### Section:"

    def plain_text(self, tokenizer: Any, user: str) -> str:
        # The completion starts on its own line, so a leaf line tokenizes as it does alone.
        return f"{_leading_bos(tokenizer)}{user}\n"


@dataclass(frozen=True)
class Layout:
    """One prompt layout: ToC text, identifiers, output matching and prompt templates."""

    name: str
    query_label: str
    passage_label: str

    @property
    def paper(self) -> bool:
        return self.name == "paper"

    def toc_text(self, nodes: Sequence[TocNode]) -> str:
        if self.paper:
            return "\n".join(toc_lines(nodes).values())
        return serialize_toc(nodes)

    def leaf_identifiers(self, nodes: Sequence[TocNode]) -> dict[str, str]:
        """``leaf id → identifier``: the leaf's line (paper) or its title path (v1)."""
        if not self.paper:
            return leaf_identifiers(nodes)
        leaves = {n.node_id for n in nodes if n.is_leaf}
        return {k: v for k, v in toc_lines(nodes).items() if k in leaves}

    def index(
        self, nodes: Sequence[TocNode], identifiers: Mapping[str, str] | None = None
    ) -> IdentifierIndex:
        """Matches outputs to leaves, non-leaf nodes or invalid ids (see ``IdentifierIndex``).

        Paper layout: a non-leaf node's line is a non-leaf output; a line with the ``leaf``
        prefix added or dropped still names its node (the node decides leaf or non-leaf).
        """
        if not self.paper:
            return IdentifierIndex.for_book(nodes, identifiers)
        if not nodes:
            raise SearchTomeError("a book without ToC nodes has no identifiers")
        lines = toc_lines(nodes)
        leaves = {n.node_id: clean_title(n.title) for n in nodes if n.is_leaf}
        idents = (
            dict(identifiers)
            if identifiers is not None
            else {k: v for k, v in lines.items() if k in leaves}
        )
        aliases: dict[str, str] = {}
        for nid, line in lines.items():
            aliases.setdefault(line, nid)
            other = line[len(LEAF_MARK) :] if nid in leaves else LEAF_MARK + line
            aliases.setdefault(other, nid)
        return IdentifierIndex(
            book_id=nodes[0].book_id,
            identifiers=idents,
            node_paths={nid: line for nid, line in lines.items() if nid not in leaves},
            leaf_titles=leaves,
            aliases=aliases,
        )

    def template(self, task: Task) -> PromptTemplate:
        """The prompt template of ``task``."""
        if self.paper:
            instruction = {
                Task.STAIR: PAPER_STAIR_INSTRUCTION,
                Task.DSI: PAPER_DSI_INSTRUCTION,
                Task.DSI_CODES: PAPER_DSI_SEMANTIC_INSTRUCTION,
                Task.ZEROSHOT: PAPER_ZEROSHOT_INSTRUCTION,
            }[task]
            return PaperTemplate(
                instruction, with_toc=task.reads_toc, use_chat_template=task is Task.ZEROSHOT
            )
        instruction = {
            Task.STAIR: STAIR_INSTRUCTION,
            Task.DSI: DSI_INSTRUCTION,
            Task.DSI_CODES: DSI_SEMANTIC_INSTRUCTION,
            Task.ZEROSHOT: ZEROSHOT_INSTRUCTION,
        }[task]
        return PromptTemplate(instruction, with_toc=task.reads_toc)


LAYOUTS: dict[str, Layout] = {
    "paper": Layout("paper", query_label="### Query", passage_label="### Passage"),
    "v1": Layout("v1", query_label=QUERY_LABEL, passage_label=PASSAGE_LABEL),
}


def get_layout(name: str) -> Layout:
    if name not in LAYOUTS:
        raise unknown_name("prompt_layout", name, PROMPT_LAYOUTS)
    return LAYOUTS[name]
