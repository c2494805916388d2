"""The settings of the generative retrievers, STAIR and DSI (no torch needed to read them).

Defaults are the CPU settings (docs/llm-baselines.md); the paper's settings are config files in
``baselines/configs``. Fields split into those that shape the trained adapter (part of its cache
key, :meth:`GenRetConfig.training_fields`) and inference-only ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from searchtome.baselines.generative.common import LORA_TARGETS
from searchtome.baselines.generative.layouts import PROMPT_LAYOUTS

from searchtome.errors import SearchTomeError, unknown_name

DECODERS: tuple[str, ...] = ("beam", "exact", "free")
DEV_DECODERS: tuple[str, ...] = ("greedy", "beam", "exact")
IDENTIFIERS: tuple[str, ...] = ("path", "atomic", "semantic")
RESTRICTED: tuple[str, ...] = ("refuse", "exclude", "allow")
RESTRICTION = "no-llm-training"

# Fields that do not change the trained adapter (left out of its cache key).
_INFERENCE_ONLY = {
    "device",
    "threads",
    "decode",
    "num_beams",
    "length_penalty",
    "query_batch",
    "cache_adapters",
    "adapter",
    "max_output_tokens",
    # How training computes, not what it trains: the same adapter up to float rounding.
    "cache_lower_layers",
}


@dataclass(frozen=True)
class GenRetConfig:
    """Settings shared by STAIR and DSI; defaults are the CPU settings (see docs/llm-baselines.md)."""

    model: str = "smollm2"
    # auto: bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16/AMX), else float32
    # (engine.pick_dtype). bf16 kernels round differently between CPU families; float32 is the
    # setting for comparing runs across machines.
    dtype: str = "auto"
    device: str = "auto"
    threads: int = 0  # torch intra-op threads; 0 = from the CPUs and load (searchtome.threads)
    # The paper's Table 2 layout (numbered ToC lines, the leaf line as output) or "v1" (chat
    # template, indented ToC, title paths); see layouts.py.
    prompt_layout: str = "paper"
    # What the model writes for a leaf: "path", the layout's leaf string (leaf line or title
    # path); "atomic", one opaque number per leaf (the original DSI's atomic docids); "semantic",
    # hierarchical k-means codes of leaf embeddings (common.semantic_ids).
    identifiers: str = "path"
    semantic_k: int = 10
    semantic_c: int = 100
    max_input_tokens: int = 14000
    max_output_tokens: int = 64
    # training
    train: bool = True
    adapter: str = ""  # a saved adapter folder to use instead of training
    indexing: bool = False  # add passage → leaf examples (DSI-style indexing)
    index_max_tokens: int = 128
    restricted: str = "refuse"  # books marked no-llm-training: refuse, exclude from training, allow
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_layers: int = 10  # LoRA on the top N layers only (0 = all)
    lora_targets: tuple[str, ...] = LORA_TARGETS
    lr: float = 2e-3
    weight_decay: float = 0.0
    warmup_ratio: float = 0.1
    batch_size: int = 16
    pack: int = 16  # training examples per forward pass (lower it to save memory)
    # Items (training examples, queries) per batch row; each is a branch of the row's token
    # tree over the shared prefix. 0 = auto: all in one row on CPU, one per row on GPU.
    tree_group: int = 0
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    max_epochs: int = 6
    patience: int = 2
    eval_every: int = 1
    adapt_toc: bool = False
    gradient_checkpointing: bool = False
    # The frozen layers below the LoRA layers (lora_layers > 0) computed once per book, for the
    # prompt prefix and every training example, instead of at every step (the same training up
    # to float rounding; baselines/generative/lower.py). False: the earlier path, which
    # recomputes them; benchmarks/generative_training.py times the two.
    cache_lower_layers: bool = True
    dev_max_queries: int = 100  # dev queries used for model selection; 0 = all
    dev_decode: str = "greedy"
    # inference
    decode: str = "beam"
    # Ten beams: a ranking ten deep, so R@5 and RR@10 read real ranks (3 beams made R@5 = R@3).
    num_beams: int = 10
    length_penalty: float = 0.0
    query_batch: int = 32
    cache_adapters: bool = True

    def __post_init__(self) -> None:
        for name, value, choices in (
            ("decode", self.decode, DECODERS),
            ("dev_decode", self.dev_decode, DEV_DECODERS),
            ("identifiers", self.identifiers, IDENTIFIERS),
            ("prompt_layout", self.prompt_layout, PROMPT_LAYOUTS),
            ("restricted", self.restricted, RESTRICTED),
        ):
            if value not in choices:
                raise unknown_name(f"{name} value", value, choices)
        for name in ("batch_size", "pack", "grad_accum", "num_beams", "query_batch", "eval_every"):
            if getattr(self, name) < 1:
                raise SearchTomeError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.max_epochs < 0 or self.patience < 1:
            raise SearchTomeError("max_epochs must be >= 0 and patience >= 1")

    @property
    def free_form(self) -> bool:
        """Unconstrained decoding may write non-leaf or invalid ids (kept for the scorer)."""
        return self.decode == "free"

    def training_fields(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in _INFERENCE_ONLY
        }
