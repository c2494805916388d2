"""The frozen lower layers of a top-K LoRA model, computed once per book (needs the ml extra).

With LoRA on the top K of L layers (``lora_layers``) the weights of layers ``0 … L−K−1`` never
change during training, and neither do their inputs: the book's prompt prefix and each training
example's tokens (query suffix + identifier) are the same in every epoch. So the hidden states
that enter the first adapted layer are the same at every step, for the prefix and for every
example:

* the prefix (instruction, title, ToC) goes through the lower layers once per book;
* every training example of the book goes through them once, attending to that prefix, as the
  chain it is in training (a token sees the prefix, the tokens before it and itself);
* each step then runs only the top K layers: on the prefix (``adapt_toc=true``: LoRA reads the
  ToC, so its top-layer keys/values change with every step and are recomputed with gradients)
  and on the step's examples, fed from their stored states.

The top-K computation is the one the full forward pass makes, module by module and in the same
order (so LoRA dropout draws the same masks from the same generator), with the same tree masks
and positions as :class:`~searchtome.baselines.generative.engine.TreeCache`; only the lower
layers' results come from another batch shape, which rounds differently (float32: ~1e-6).
Backpropagation never reached the lower layers (nothing below the adapter needs a gradient), so
what is saved is their forward pass on the prefix and the examples at every step.

Supported: decoder-only models laid out as Llama's (``model.model.embed_tokens``, ``layers``,
``norm``, ``rotary_emb``; Llama, Mistral, Qwen2 and Qwen3, whose attention only calls
``cache.update``). Anything else, LoRA on every layer, or gradient checkpointing train the
earlier way (:func:`adapted_from` returns ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from searchtome.baselines.generative.engine import LM, PrefixKV


class Example(Protocol):
    """What this module reads of a training example (``train.Example``, which imports us)."""

    @property
    def book_id(self) -> str: ...

    @property
    def suffix(self) -> tuple[int, ...]: ...

    @property
    def target(self) -> tuple[int, ...]: ...


# Decoder layers whose attention reads past keys/values through ``cache.update`` only.
SUPPORTED_MODELS = ("llama", "mistral", "qwen2", "qwen3")
# Examples per batch row when their lower-layer states are computed (one tree per row).
LOWER_CHUNK = 16


def adapted_from(lm: LM) -> int | None:
    """Index of the lowest layer holding a trainable parameter, when the layers below it can be
    computed once (at least one of them, and a supported layout); else ``None``."""
    base = getattr(lm.model, "model", None)
    if getattr(lm.model.config, "model_type", "") not in SUPPORTED_MODELS or base is None:
        return None
    if not all(hasattr(base, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return None
    if any(p.requires_grad for p in base.embed_tokens.parameters()):
        return None
    for i, layer in enumerate(base.layers):
        if any(p.requires_grad for p in layer.parameters()):
            return i or None
    return None


class _LayerKV:
    """The ``cache`` the decoder layers see: ``update`` puts the stored keys/values of that layer
    (a prefix, batch 1, broadcast over the rows) before the new ones, or, when recording, keeps
    the new ones as the prefix of later passes. Nothing grows: every pass starts from the
    prefix alone."""

    def __init__(self, kv: Mapping[int, tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
        self.kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = dict(kv or {})
        self.recording = kv is None

    def update(
        self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.recording:
            self.kv[layer_idx] = (key, value)
            return key, value
        k, v = self.kv[layer_idx]
        rows = key.shape[0]
        return (
            torch.cat([k.expand(rows, -1, -1, -1), key], dim=-2),
            torch.cat([v.expand(rows, -1, -1, -1), value], dim=-2),
        )


def run_layers(
    lm: LM,
    hidden: torch.Tensor,
    layers: range,
    positions: torch.Tensor,
    mask: torch.Tensor | None,
    cache: _LayerKV,
) -> torch.Tensor:
    """``hidden`` through ``layers`` of the decoder, as the model's own forward runs them
    (``mask`` None: plain causal attention, the prefix pass)."""
    base = lm.model.model
    rope = base.rotary_emb(hidden, position_ids=positions)
    for i in layers:
        hidden = base.layers[i](
            hidden,
            attention_mask=mask,
            position_embeddings=rope,
            position_ids=positions,
            cache=cache,
            use_cache=True,
        )
    return hidden


@dataclass
class Rows:
    """Training examples laid out as batch rows of chains after the prefix, as
    :class:`~searchtome.baselines.generative.engine.TreeCache` lays out a training batch:
    ``group`` examples per row, shorter rows padded with tokens that see only the prefix and
    themselves."""

    segments: list[list[tuple[int, ...]]]  # per row, each example's tokens (suffix + target[:-1])
    keep: list[list[int]]  # per row, the positions whose logits predict a target token
    labels: list[int]  # the target tokens, row by row

    @classmethod
    def of(cls, batch: Sequence[Example], group: int) -> Rows:
        segments, keep, labels = [], [], []
        for lo in range(0, len(batch), group):
            row_s, row_k, width = [], [], 0
            for ex in batch[lo : lo + group]:
                seg = (*ex.suffix, *ex.target[:-1])
                first = width + len(ex.suffix) - 1
                row_k.extend(range(first, first + len(ex.target)))
                labels.extend(ex.target)
                row_s.append(seg)
                width += len(seg)
            segments.append(row_s)
            keep.append(row_k)
        return cls(segments, keep, labels)

    @property
    def width(self) -> int:
        return max(sum(len(s) for s in row) for row in self.segments)

    def tokens(self, pad: int) -> torch.Tensor:
        ids = torch.full((len(self.segments), self.width), pad, dtype=torch.long)
        for r, row in enumerate(self.segments):
            flat = [t for seg in row for t in seg]
            ids[r, : len(flat)] = torch.tensor(flat, dtype=torch.long)
        return ids

    def layout(self, prefix_len: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(positions, additive mask)``: each example's tokens count on from the prefix and see
        the prefix, their own earlier tokens and themselves; pads sit at position 0."""
        rows, n = len(self.segments), self.width
        pos = torch.zeros((rows, n), dtype=torch.long)
        visible = torch.zeros((rows, n, prefix_len + n), dtype=torch.bool)
        visible[:, :, :prefix_len] = True
        idx = torch.arange(n)
        visible[:, idx, prefix_len + idx] = True  # every token, pads included, sees itself
        for r, row in enumerate(self.segments):
            start = 0
            for seg in row:
                m = len(seg)
                pos[r, start : start + m] = torch.arange(prefix_len, prefix_len + m)
                block = torch.ones((m, m), dtype=torch.bool).tril()
                visible[r, start : start + m, prefix_len + start : prefix_len + start + m] = block
                start += m
        mask = torch.zeros(visible.shape, dtype=dtype)
        mask.masked_fill_(~visible, torch.finfo(dtype).min)
        return pos, mask[:, None]

    def select(self) -> torch.Tensor:
        sel = torch.zeros((len(self.segments), self.width), dtype=torch.bool)
        for r, row_keep in enumerate(self.keep):
            sel[r, row_keep] = True
        return sel


@dataclass
class BookLower:
    """One book's states at the input of the first adapted layer: the prefix's ``(1, P, H)``
    and every example's ``(tokens, H)``, keyed by its tokens (suffix + target without EOS: the
    states depend on nothing else)."""

    prefix: torch.Tensor
    examples: dict[tuple[int, ...], torch.Tensor]

    def nbytes(self) -> int:
        t = [self.prefix, *self.examples.values()]
        return sum(x.numel() * x.element_size() for x in t)


@torch.no_grad()
def book_lower(
    lm: LM, first: int, prefix_ids: Sequence[int], examples: Sequence[Example]
) -> BookLower:
    """The prefix and every example of one book through layers ``0 … first−1``, once."""
    base, device = lm.model.model, lm.device
    ids = torch.tensor([list(prefix_ids)], device=device)
    positions = torch.arange(len(prefix_ids), device=device)[None]
    cache = _LayerKV()
    prefix = run_layers(lm, base.embed_tokens(ids), range(first), positions, None, cache)
    frozen = _LayerKV(cache.kv)
    states: dict[tuple[int, ...], torch.Tensor] = {}
    unique = list({(*ex.suffix, *ex.target[:-1]): ex for ex in examples}.values())
    for lo in range(0, len(unique), LOWER_CHUNK):
        part = unique[lo : lo + LOWER_CHUNK]
        rows = Rows.of(part, len(part))
        pos, mask = rows.layout(len(prefix_ids), lm.dtype)
        hidden = base.embed_tokens(rows.tokens(lm.eos_id).to(device))
        out = run_layers(lm, hidden, range(first), pos.to(device), mask.to(device), frozen)
        start = 0
        for seg in rows.segments[0]:
            states[seg] = out[0, start : start + len(seg)].clone()
            start += len(seg)
    return BookLower(prefix, states)


def top_prefix(
    lm: LM, first: int, lower: BookLower
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """The prefix's keys/values in the adapted layers, with gradients (``adapt_toc=true``).

    The last layer's attention output and MLP are computed too, as the full pass computes them:
    the loss does not read them (no gradient flows there), but LoRA dropout draws a mask for each
    of their projections, and skipping them would shift every later draw."""
    n_layers = len(lm.model.model.layers)
    length = lower.prefix.shape[1]
    positions = torch.arange(length, device=lm.device)[None]
    cache = _LayerKV()
    run_layers(lm, lower.prefix, range(first, n_layers), positions, None, cache)
    return cache.kv


def frozen_top(prefix: PrefixKV, first: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """The adapted layers' part of a frozen prefix cache (``adapt_toc=false``)."""
    return {i: kv for i, kv in enumerate(prefix.kv) if i >= first}


def rows_loss(
    lm: LM,
    first: int,
    rows: Rows,
    lower: BookLower,
    prefix_kv: Mapping[int, tuple[torch.Tensor, torch.Tensor]],
    prefix_len: int,
) -> torch.Tensor:
    """Summed token cross-entropy of the rows' targets, running only the adapted layers from
    the examples' stored lower-layer states."""
    base, device = lm.model.model, lm.device
    hidden = torch.zeros(
        (len(rows.segments), rows.width, lower.prefix.shape[-1]), dtype=lm.dtype, device=device
    )
    for r, row in enumerate(rows.segments):
        start = 0
        for seg in row:
            hidden[r, start : start + len(seg)] = lower.examples[seg]
            start += len(seg)
    pos, mask = rows.layout(prefix_len, lm.dtype)
    n_layers = len(base.layers)
    out = run_layers(
        lm, hidden, range(first, n_layers), pos.to(device), mask.to(device), _LayerKV(prefix_kv)
    )
    out = base.norm(out)
    # The columns any row keeps, then each row's own: how the full pass selects its logits.
    select = rows.select().to(device)
    cols = select.any(0).nonzero().flatten()
    logits = lm.model.lm_head(out[:, cols])[select[:, cols]]
    target = torch.tensor(rows.labels, device=device)
    return torch.nn.functional.cross_entropy(logits.float(), target, reduction="sum")


@dataclass
class Lower:
    """Every training book's lower-layer states, and where the adapted layers begin."""

    first: int
    books: dict[str, BookLower]

    def nbytes(self) -> int:
        return sum(b.nbytes() for b in self.books.values())


def lower_states(
    lm: LM, examples: Sequence[Example], prefixes: Mapping[str, Sequence[int]]
) -> Lower | None:
    """The lower layers' states of every book's prefix and examples, or ``None`` where the
    model's layout or adapter leaves nothing to compute once (see the module docstring)."""
    first = adapted_from(lm)
    if first is None:
        return None
    by_book: dict[str, list[Example]] = {}
    for ex in examples:
        by_book.setdefault(ex.book_id, []).append(ex)
    books = {b: book_lower(lm, first, prefixes[b], exs) for b, exs in sorted(by_book.items())}
    return Lower(first, books)


def loss_backward(
    lm: LM,
    lower: Lower,
    batch: Sequence[Example],
    frozen_prefix: PrefixKV | None,
    *,
    pack: int,
    group: int,
    scale: float,
) -> tuple[float, int]:
    """:func:`~searchtome.baselines.generative.train.batch_loss_backward` from the stored
    lower-layer states: the same packs, the same backward calls, in the same order."""
    from searchtome.baselines.generative.engine import auto_group

    book = lower.books[batch[0].book_id]
    plen = book.prefix.shape[1]
    n_tokens = sum(len(ex.target) for ex in batch)
    packs = [batch[i : i + pack] for i in range(0, len(batch), pack)]

    def loss_of(part: Sequence[Example], kv: Mapping[int, Any]) -> torch.Tensor:
        rows = Rows.of(part, auto_group(lm, group, len(part)))
        return rows_loss(lm, lower.first, rows, book, kv, plen)

    if frozen_prefix is not None:
        kv = frozen_top(frozen_prefix, lower.first)
        total = 0.0
        for part in packs:
            loss = loss_of(part, kv)
            (loss * (scale / n_tokens)).backward()
            total += float(loss.detach())
        return total / n_tokens, n_tokens
    kv = top_prefix(lm, lower.first, book)
    summed = torch.stack([loss_of(part, kv) for part in packs]).sum()
    (summed * (scale / n_tokens)).backward()
    return float(summed.detach()) / n_tokens, n_tokens
