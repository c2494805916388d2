"""What the generative baselines (STAIR, DSI, zero-shot LLM) share that needs no torch.

The ToC text, identifiers and prompts below are the ``v1`` prompt layout's; the default layout,
the paper's (numbered ToC lines, ``leaf`` lines as identifiers), and the choice between the two
are in :mod:`.layouts`.

**ToC serialization** (:func:`serialize_toc`) — every node of the book's ToC, one per line, in
document order, indented two spaces per level below the top, each line ``- `` + the title
on one line (:func:`searchtome.titles.clean_title`)::

    - Chapter One: Perspectives
      - Childhood Defined
        - Periods of Development

**Leaf identifiers** (:func:`leaf_identifiers`) — the string a model generates for a leaf: its
title path joined by `` > `` (``Chapter One: Perspectives > Childhood Defined > Periods of
Development``). Titles repeat inside books ("Summary", "Educational Implications"), paths
rarely do; when two leaves still share a path, the second and later get `` (2)``, `` (3)`` in
document order, so identifiers are unique within a book. DSI may use semantic ids instead
(:func:`semantic_ids`, hierarchical k-means as in the DSI paper: ``3-0-7``).

**Output matching** (:class:`IdentifierIndex`) — a generated string becomes a leaf id when it is
a leaf identifier; the id of a non-leaf node when it is that node's title path (a "non-leaf"
output); otherwise an id that exists nowhere, ``{book}/invalid-{hash of the text}`` (an "invalid" output).
Nothing is dropped, so the scorer counts both kinds.

**Token trie** (:class:`TokenTrie`) — the token sequences of a book's identifiers (each ending
in EOS), for constrained decoding and for scoring every leaf in one tree-shaped forward pass.

**Prompts** (:class:`PromptTemplate`) — the instruction, book title and ToC come first and the
query last, so the prompt splits into a per-book *prefix* (identical for every query of the
book: its key/value cache is computed once) and a per-query *suffix*; the two halves are
tokenized separately and concatenated, in training and at inference alike.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchtome.errors import SearchTomeError
from searchtome.titles import PATH_SEP, clean_title, title_path

if TYPE_CHECKING:
    import numpy as np

    from searchtome.records import TocNode

# LoRA on attention and MLP projections (the names of Llama/Mistral-style models), as in STAIR.
LORA_TARGETS: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
INVALID_MARK = "invalid"

_WS_RE = re.compile(r"\s+")


def _depths(nodes: Sequence[TocNode]) -> list[int]:
    return [max(len(n.path) - 1, 0) for n in nodes]


def serialize_toc(nodes: Sequence[TocNode]) -> str:
    """The documented one-node-per-line ToC text (see the module docstring)."""
    if not nodes:
        raise SearchTomeError("cannot serialize an empty table of contents")
    return "\n".join(
        f"{'  ' * depth}- {clean_title(node.title)}"
        for node, depth in zip(nodes, _depths(nodes), strict=True)
    )


def leaf_identifiers(nodes: Sequence[TocNode]) -> dict[str, str]:
    """``leaf id → unique title-path identifier`` for the leaves among ``nodes`` (doc order)."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for node in nodes:
        if not node.is_leaf:
            continue
        base = title_path(node.path) or f"Untitled {node.node_id.split('/', 1)[1]}"
        count = seen.get(base, 0) + 1
        seen[base] = count
        out[node.node_id] = base if count == 1 else f"{base} ({count})"
    return out


# -- semantic ids (DSI) -------------------------------------------------------------------------


def semantic_ids(
    vectors: np.ndarray, *, k: int = 10, c: int = 100, seed: int = 0
) -> list[tuple[int, ...]]:
    """Hierarchical k-means ids (DSI's "semantically structured identifiers").

    Vectors are split into ``k`` clusters, and every cluster with more than ``c`` members is
    split again, recursively; the last element is the position inside the final cluster. The
    defaults are NCI's implementation defaults (k=10, c=100). k-means++ with a fixed seed keeps
    the ids deterministic.
    """
    import numpy as np
    from scipy.cluster.vq import kmeans2

    vectors = np.asarray(vectors, dtype=np.float64)
    if k < 2 or c < 1:
        raise SearchTomeError(f"semantic ids need k >= 2 and c >= 1 (got k={k}, c={c})")
    out: list[tuple[int, ...] | None] = [None] * len(vectors)

    def split(indices: np.ndarray, prefix: tuple[int, ...], depth: int) -> None:
        if len(indices) <= c or depth > 12:
            for pos, i in enumerate(indices):
                out[int(i)] = (*prefix, pos)
            return
        rng = np.random.default_rng([seed, depth, *prefix])
        n_clusters = min(k, len(indices))
        _, labels = kmeans2(vectors[indices], n_clusters, minit="++", seed=rng, iter=30)
        groups = [indices[labels == j] for j in range(n_clusters)]
        groups = [g for g in groups if len(g)]
        if len(groups) == 1:  # k-means could not separate them (identical vectors)
            chunks = np.array_split(indices, k)
            groups = [g for g in chunks if len(g)]
        for j, group in enumerate(groups):
            split(group, (*prefix, j), depth + 1)

    split(np.arange(len(vectors)), (), 0)
    return [t for t in out if t is not None]


def semantic_id_strings(ids: Sequence[tuple[int, ...]]) -> list[str]:
    return ["-".join(str(x) for x in t) for t in ids]


# -- output matching ----------------------------------------------------------------------------

_SEP_RE = re.compile(r"\s*(?:>|›|»|→|->|=>|/)\s*")
_BULLET_RE = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,3}[.):]|\[?\d{1,3}\]|[a-cA-C][.)])\s+")
_QUOTES = "\"'`“”‘’«»"


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")
    return _WS_RE.sub(" ", text).strip().casefold()


def _norm_path(text: str) -> str:
    parts = [p.strip().strip(_QUOTES).strip() for p in _SEP_RE.split(_norm(text))]
    return PATH_SEP.join(p for p in parts if p)


@dataclass
class IdentifierIndex:
    """Maps generated strings of one book to leaf ids, non-leaf node ids or invalid ids."""

    book_id: str
    identifiers: Mapping[str, str]  # leaf id → identifier
    node_paths: Mapping[str, str] = field(default_factory=dict)  # non-leaf node id → title path
    leaf_titles: Mapping[str, str] = field(default_factory=dict)  # leaf id → title
    # Other spellings → leaf or node id (a layout's variants); identifiers and paths win.
    aliases: Mapping[str, str] = field(default_factory=dict)
    _exact: dict[str, str] = field(init=False, default_factory=dict)
    _paths: dict[str, str] = field(init=False, default_factory=dict)
    _titles: dict[str, list[str]] = field(init=False, default_factory=dict)
    _invalid: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._exact = {text: lid for lid, text in self.identifiers.items()}
        for nid, path in self.node_paths.items():
            self._paths.setdefault(_norm_path(path), nid)
        for lid, text in self.identifiers.items():  # leaves win over nodes on equal paths
            self._paths[_norm_path(text)] = lid
        for text, item in self.aliases.items():
            self._paths.setdefault(_norm_path(text), item)
        for lid, title in self.leaf_titles.items():
            self._titles.setdefault(_norm_path(title), []).append(lid)

    @classmethod
    def for_book(
        cls, nodes: Sequence[TocNode], identifiers: Mapping[str, str] | None = None
    ) -> IdentifierIndex:
        if not nodes:
            raise SearchTomeError("a book without ToC nodes has no identifiers")
        identifiers = dict(identifiers) if identifiers is not None else leaf_identifiers(nodes)
        return cls(
            book_id=nodes[0].book_id,
            identifiers=identifiers,
            node_paths={n.node_id: title_path(n.path) for n in nodes if not n.is_leaf},
            leaf_titles={n.node_id: clean_title(n.title) for n in nodes if n.is_leaf},
        )

    def invalid_id(self, text: str) -> str:
        """A stable id that exists nowhere, one per distinct unmatched string.

        Derived from the string itself, not from the order strings were met in: the same
        answer gets the same id whichever process, batch or resumed run decoded it.
        """
        key = _norm(text)
        if key not in self._invalid:
            digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]
            self._invalid[key] = f"{self.book_id}/{INVALID_MARK}-{digest}"
        return self._invalid[key]

    def match(self, text: str, *, lenient: bool = False) -> tuple[str, str]:
        """``(id, kind)`` with kind ``leaf``, ``non-leaf`` or ``invalid``.

        Strict matching (fine-tuned models) accepts an identifier up to case, whitespace and
        the separator spelling. Lenient matching (zero-shot answers) also strips bullets,
        numbering and quotes, and accepts a leaf title alone or a path suffix when exactly one
        leaf has it.
        """
        raw = text.strip()
        if raw in self._exact:
            return self._exact[raw], "leaf"
        if lenient:
            raw = _BULLET_RE.sub("", raw).strip().strip(_QUOTES).strip().rstrip(".;,").strip()
        key = _norm_path(raw)
        hit = self._paths.get(key)
        if hit is not None:
            return hit, "leaf" if hit in self.identifiers else "non-leaf"
        if lenient and key:
            titles = self._titles.get(key, [])
            if len(titles) == 1:
                return titles[0], "leaf"
            whole = [
                lid
                for lid, ident in self.identifiers.items()
                if _norm_path(ident).endswith(PATH_SEP + key)
            ]
            if len(whole) == 1:
                return whole[0], "leaf"
        return self.invalid_id(text), "invalid"


def is_invalid_id(item_id: str) -> bool:
    return item_id.split("/", 1)[-1].startswith(f"{INVALID_MARK}-")


# -- token trie ---------------------------------------------------------------------------------


class TokenTrie:
    """Token-id sequences of identifiers (each ending with EOS) as a prefix tree.

    Every node gets an index in insertion order (root = 0) so the whole trie can be fed to the
    model as one tree-shaped sequence (:meth:`flatten`).
    """

    def __init__(self, sequences: Mapping[str, Sequence[int]], eos_id: int) -> None:
        self.eos_id = int(eos_id)
        self.children: list[dict[int, int]] = [{}]
        self.token: list[int] = [-1]
        self.parent: list[int] = [-1]
        self.depth: list[int] = [0]
        self.terminal: dict[int, str] = {}
        self.sequences: dict[str, tuple[int, ...]] = {}
        for key, seq in sequences.items():
            seq = tuple(int(t) for t in seq)
            if not seq or seq[-1] != self.eos_id or self.eos_id in seq[:-1]:
                raise SearchTomeError(
                    f"identifier {key!r}: its token sequence must end with EOS ({self.eos_id}) "
                    "exactly once"
                )
            node = 0
            for tok in seq:
                nxt = self.children[node].get(tok)
                if nxt is None:
                    nxt = len(self.token)
                    self.children[node][tok] = nxt
                    self.children.append({})
                    self.token.append(tok)
                    self.parent.append(node)
                    self.depth.append(self.depth[node] + 1)
                node = nxt
            if node in self.terminal:
                raise SearchTomeError(
                    f"identifiers {self.terminal[node]!r} and {key!r} tokenize identically"
                )
            self.terminal[node] = key
            self.sequences[key] = seq

    def __len__(self) -> int:
        return len(self.sequences)

    @property
    def max_length(self) -> int:
        return max((len(s) for s in self.sequences.values()), default=0)

    def node_of(self, prefix: Iterable[int]) -> int | None:
        node = 0
        for tok in prefix:
            node = self.children[node].get(int(tok), -1)
            if node < 0:
                return None
        return node

    def allowed(self, prefix: Iterable[int]) -> list[int]:
        """Tokens that may follow ``prefix``; ``[EOS]`` once the prefix has left the trie or is
        complete (HF beam search refuses an empty list and could otherwise drift)."""
        node = self.node_of(prefix)
        if node is None or not self.children[node]:
            return [self.eos_id]
        return list(self.children[node])

    def lookup(self, tokens: Sequence[int]) -> str | None:
        """The identifier whose full sequence (with EOS) is ``tokens``, else ``None``."""
        node = self.node_of(tokens)
        return None if node is None else self.terminal.get(node)

    def flatten(self) -> tuple[list[int], list[int], list[int]]:
        """All non-root nodes as ``(tokens, parents, depths)`` in index order (parents first),
        with parent ``-1`` for the children of the root and 0-based depths."""
        tokens = self.token[1:]
        parents = [p - 1 for p in self.parent[1:]]
        depths = [d - 1 for d in self.depth[1:]]
        return tokens, parents, depths


# -- prompts ------------------------------------------------------------------------------------

STAIR_INSTRUCTION = (
    "You locate answers in a book. Below is the book's table of contents, one entry per line, "
    "each entry indented under the entry that contains it. Reply with the leaf entry (one that "
    "has no entries under it) whose section answers the question: write its full path of "
    "titles from the top level down, joined by ' > ', exactly as in the table of contents."
)
DSI_INSTRUCTION = (
    "Which section of the book answers the question? Reply with the section's full path of "
    "titles from the top level down, joined by ' > '."
)
DSI_SEMANTIC_INSTRUCTION = "Which section of the book answers the question? Reply with its code."
ZEROSHOT_INSTRUCTION = (
    "You locate answers in a book. Below is the book's table of contents, one entry per line, "
    "each entry indented under the entry that contains it. List the three leaf entries (entries "
    "with nothing under them) most likely to answer the question, best first, one per line, "
    "each as its full path of titles joined by ' > ', exactly as in the table of contents. "
    "Write nothing else."
)

QUERY_LABEL = "Question"
PASSAGE_LABEL = "Passage"
_SLOT = "\x00SEARCHTOME-QUERY-SLOT\x00"


@dataclass(frozen=True)
class PromptTemplate:
    """Builds the per-book prefix text and the per-query suffix text of a prompt.

    ``with_toc`` selects STAIR (instruction + book title + ToC before the query) or DSI (query
    only). The model's chat template is used when the tokenizer has one; the text is rendered
    once with a placeholder for the query and split there.
    """

    instruction: str
    with_toc: bool = True
    use_chat_template: bool = True

    def user_text(self, book_title: str, toc_text: str, slot: str) -> str:
        if self.with_toc:
            return (
                f"{self.instruction}\n\nBook: {clean_title(book_title)}\n\n"
                f"Table of contents:\n{toc_text}\n\n{slot}"
            )
        return f"{self.instruction}\n\n{slot}"

    def split(self, tokenizer: Any, book_title: str, toc_text: str) -> tuple[str, str]:
        """``(prefix, suffix_pattern)``; the suffix pattern holds ``{label}`` and ``{text}``."""
        user = self.user_text(book_title, toc_text, _SLOT)
        if self.use_chat_template and getattr(tokenizer, "chat_template", None):
            rendered = tokenizer.apply_chat_template(
                [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
            )
        else:
            rendered = self.plain_text(tokenizer, user)
        if rendered.count(_SLOT) != 1:
            raise SearchTomeError("the chat template does not keep the user message intact")
        prefix, tail = rendered.split(_SLOT)
        tail = tail.replace("{", "{{").replace("}", "}}")
        return prefix, "{label}: {text}" + tail

    def plain_text(self, tokenizer: Any, user: str) -> str:
        """The prompt for a model without a chat template (or a template that uses none)."""
        return f"{user}\nAnswer: "

    @staticmethod
    def suffix(pattern: str, text: str, label: str = QUERY_LABEL) -> str:
        return pattern.format(label=label, text=clean_title(text))


# -- model identity -----------------------------------------------------------------------------


def model_fingerprint(name: str) -> dict[str, Any]:
    """What identifies a model's weights in cache keys: its name, config and weight files."""
    from searchtome.llm.models import resolve

    path = Path(resolve(name))
    info: dict[str, Any] = {"name": name}
    if path.is_dir():
        cfg = path / "config.json"
        info["config"] = cfg.read_text(encoding="utf-8") if cfg.is_file() else None
        info["weights"] = sorted(
            (p.name, p.stat().st_size)
            for p in path.iterdir()
            if p.suffix in {".safetensors", ".bin", ".gguf"}
        )
    return info
