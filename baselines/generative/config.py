"""The settings of the generative retrievers, STAIR and DSI: one definition (no torch needed).

Six sections, one per concern — the language model (``lm``), the prompt (``prompt``), LoRA
(``lora``), training (``training``), dev selection (``dev``) and decoding (``decoding``) — each
field with its default and its help text (``searchtome ls config NAME`` prints them). The
training loop reads its section as it is (:func:`.train.train` takes a :class:`TrainSettings`),
so there is no second copy with other defaults. Every setting keeps its flat public key
(``--set lora_r=8``, config files, ``meta.json``'s ``config``, ``GenRetConfig(lora_r=8)``): a
field's ``key`` metadata names it where it is not the field's own name, and
:func:`searchtome.config.flat_keys` makes the one mapping from them; dotted keys
(``--set lora.r=8``) work too.

Defaults are the CPU settings (docs/llm-baselines.md); the paper's are config files in
``baselines/configs``. A field with ``shapes_adapter=False`` does not change the trained
adapter and is left out of its cache key (:meth:`GenRetConfig.training_fields`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from searchtome.baselines.generative.common import LORA_TARGETS
from searchtome.baselines.generative.layouts import PROMPT_LAYOUTS

from searchtome.config import Sections, section, setting, typed_enums
from searchtome.errors import SearchTomeError, unknown_name

RESTRICTION = "no-llm-training"


class Decoder(StrEnum):
    """How test queries are decoded (``decode``)."""

    BEAM = "beam"  # trie-constrained beam search: only leaf identifiers come out
    EXACT = "exact"  # the log-probability of every leaf identifier: all leaves ranked
    FREE = "free"  # unconstrained beam search: non-leaf and invalid answers kept and counted


class DevDecoder(StrEnum):
    """How the dev questions are decoded for model selection (``dev_decode``)."""

    GREEDY = "greedy"  # constrained, one beam
    BEAM = "beam"  # constrained, num_beams beams
    EXACT = "exact"


class Identifiers(StrEnum):
    """What the model writes for a leaf (``identifiers``)."""

    PATH = "path"  # the layout's leaf string: the leaf's ToC line (paper) or title path (v1)
    ATOMIC = "atomic"  # one opaque number per leaf (the original DSI's atomic docids)
    SEMANTIC = "semantic"  # hierarchical k-means codes of leaf embeddings (common.semantic_ids)


class Restricted(StrEnum):
    """What to do with books marked ``no-llm-training`` (``restricted``)."""

    REFUSE = "refuse"
    EXCLUDE = "exclude"
    ALLOW = "allow"


def _at_least_one(obj: Any, *names: str) -> None:
    for name in names:
        if getattr(obj, name) < 1:
            raise SearchTomeError(f"{name} must be at least 1, not {getattr(obj, name)}")


@dataclass(frozen=True)
class LMSettings:
    """The language model: which one, in which dtype, on which device, with how many threads."""

    name: str = setting(
        "smollm2", "the base model: smollm2 (offline), a Hugging Face name or a folder", key="model"
    )
    dtype: str = setting(
        "auto",
        "auto: bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16/AMX), else float32; "
        "bf16 rounds differently between CPU families, so float32 compares runs across machines",
    )
    device: str = setting("auto", "auto, cpu, cuda, cuda:N", shapes_adapter=False)
    threads: int = setting(
        0, "torch intra-op threads; 0 = one per usable CPU, whatever the load", shapes_adapter=False
    )


@dataclass(frozen=True)
class PromptSettings:
    """The prompt and the identifiers: the layout, what the model writes for a leaf, the budget."""

    layout: str = setting(
        "paper",
        "paper: the paper's Table 2 (numbered ToC lines, the leaf line as output); v1: chat "
        "template, indented ToC, title paths",
        key="prompt_layout",
    )
    identifiers: Identifiers = setting(
        Identifiers.PATH,
        "path: the layout's leaf string; atomic: one number per leaf; semantic: hierarchical "
        "k-means codes",
    )
    semantic_k: int = setting(10, "semantic identifiers: clusters per level")
    semantic_c: int = setting(100, "semantic identifiers: a cluster above this size splits again")
    max_input_tokens: int = setting(14000, "prompt budget in tokens (the ToC prefix included)")

    def __post_init__(self) -> None:
        typed_enums(self)
        if self.layout not in PROMPT_LAYOUTS:
            raise unknown_name("prompt_layout value", self.layout, PROMPT_LAYOUTS)


@dataclass(frozen=True)
class LoraSettings:
    """LoRA: the adapter's rank, scale, dropout, and the layers and modules it adapts."""

    r: int = setting(16, "LoRA rank", key="lora_r")
    alpha: int = setting(32, "LoRA alpha (scale = alpha / r)", key="lora_alpha")
    dropout: float = setting(0.05, "LoRA dropout", key="lora_dropout")
    layers: int = setting(
        10, "LoRA on the top N transformer layers only (0 = all)", key="lora_layers"
    )
    targets: tuple[str, ...] = setting(
        LORA_TARGETS, "the projection modules LoRA wraps", key="lora_targets"
    )


@dataclass(frozen=True)
class TrainSettings:
    """Training: whether and on what, the optimiser, the batches, the epochs and when to stop."""

    enabled: bool = setting(True, "fine-tune an adapter (false: the base model)", key="train")
    adapter: str = setting(
        "", "a saved adapter folder to use instead of training", shapes_adapter=False
    )
    cache_adapters: bool = setting(
        True, "reuse a cached adapter trained with the same key", shapes_adapter=False
    )
    restricted: Restricted = setting(
        Restricted.REFUSE,
        "books marked no-llm-training: refuse, exclude them from training, or allow them",
    )
    indexing: bool = setting(False, "add passage -> leaf examples (DSI-style indexing)")
    index_max_tokens: int = setting(128, "indexing: tokens of a passage kept")
    lr: float = setting(2e-3, "AdamW learning rate")
    weight_decay: float = setting(0.0, "AdamW weight decay")
    warmup_ratio: float = setting(0.1, "linear warm-up over this share of the steps, then decay")
    batch_size: int = setting(16, "training questions per step (all of one book)")
    pack: int = setting(16, "training examples per forward pass (lower it to save memory)")
    group: int = setting(
        0,
        "items (training examples, queries) per batch row, each a branch of the row's token "
        "tree over the shared prefix; also used when decoding. 0 = auto: one row on CPU, one "
        "item per row on GPU",
        key="tree_group",
    )
    grad_accum: int = setting(1, "batches per optimizer step")
    max_grad_norm: float = setting(1.0, "gradient clipping")
    max_epochs: int = setting(6, "at most this many epochs (0: no training)")
    patience: int = setting(2, "stop after this many dev evaluations without a gain")
    eval_every: int = setting(1, "evaluate on dev every N epochs (and after the last)")
    adapt_toc: bool = setting(
        False,
        "the ToC prefix passes through the adapted layers (the paper's setting); false: its "
        "keys/values come from the frozen base model, computed once",
    )
    gradient_checkpointing: bool = setting(False, "recompute activations to save memory")
    cache_lower_layers: bool = setting(
        True,
        "compute the frozen layers below LoRA once per book instead of at every step (the same "
        "training up to float rounding; false: the earlier path)",
        shapes_adapter=False,
    )

    def __post_init__(self) -> None:
        typed_enums(self)
        _at_least_one(self, "batch_size", "pack", "grad_accum", "eval_every")
        if self.max_epochs < 0 or self.patience < 1:
            raise SearchTomeError("max_epochs must be >= 0 and patience >= 1")


@dataclass(frozen=True)
class DevSelection:
    """Model selection: the dev questions that pick the kept epoch, and how they are decoded."""

    max_queries: int = setting(
        100, "dev questions used for model selection; 0 = all", key="dev_max_queries"
    )
    decode: DevDecoder = setting(
        DevDecoder.GREEDY,
        "greedy (constrained, one beam), beam (num_beams beams) or exact",
        key="dev_decode",
    )

    def __post_init__(self) -> None:
        typed_enums(self)

    def decoding(self, test: DecodingSettings) -> DecodingSettings:
        """The test decoder's settings changed to decode the dev questions this way."""
        if self.decode is DevDecoder.GREEDY:
            return dataclasses.replace(test, mode=Decoder.BEAM, num_beams=1)
        return dataclasses.replace(test, mode=Decoder(self.decode.value))


@dataclass(frozen=True)
class DecodingSettings:
    """Decoding the queries: the decoder, its beams and the batch of queries."""

    mode: Decoder = setting(
        Decoder.BEAM,
        "beam: trie-constrained beam search; exact: rank every leaf; free: unconstrained "
        "(non-leaf and invalid answers kept and counted)",
        key="decode",
        shapes_adapter=False,
    )
    num_beams: int = setting(
        10,
        "beams, so a ranking this deep (ten: R@5 and RR@10 read real ranks)",
        shapes_adapter=False,
    )
    length_penalty: float = setting(0.0, "beam score / length^this", shapes_adapter=False)
    query_batch: int = setting(32, "queries decoded together", shapes_adapter=False)
    max_output_tokens: int = setting(
        64, "the most tokens a free answer may take", shapes_adapter=False
    )

    def __post_init__(self) -> None:
        typed_enums(self)
        _at_least_one(self, "num_beams", "query_batch")


@dataclass(frozen=True, init=False)
class GenRetConfig(Sections):
    """Settings shared by STAIR and DSI; defaults are the CPU settings (docs/llm-baselines.md).

    ``init=False``: :class:`~searchtome.config.Sections` takes the sections and the flat keys.
    """

    lm: LMSettings = section(LMSettings)
    prompt: PromptSettings = section(PromptSettings)
    lora: LoraSettings = section(LoraSettings)
    training: TrainSettings = section(TrainSettings)
    dev: DevSelection = section(DevSelection)
    decoding: DecodingSettings = section(DecodingSettings)

    @property
    def free_form(self) -> bool:
        """Unconstrained decoding may write non-leaf or invalid ids (kept for the scorer)."""
        return self.decoding.mode is Decoder.FREE

    def training_fields(self) -> dict[str, Any]:
        """The settings that shape the trained adapter, by flat key (part of its cache key)."""
        record = self.record()
        return {key: record[key] for key in record if key not in _inference_only(self)}


def _inference_only(cfg: GenRetConfig) -> set[str]:
    """The flat keys of the fields marked ``shapes_adapter=False``."""
    return {
        str(sub.metadata.get("key", sub.name))
        for f in dataclasses.fields(cfg)
        for sub in dataclasses.fields(getattr(cfg, f.name))
        if sub.metadata.get("shapes_adapter") is False
    }
