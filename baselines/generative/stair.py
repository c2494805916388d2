"""STAIR and DSI: a LoRA-tuned causal LM that writes the identifier of the answering leaf.

* ``stair`` — the prompt holds a fixed instruction, the book title and the book's whole ToC
  (one node per line, indented), then the query; the model writes the leaf's title path.
* ``dsi`` — the same model family, training data and decoders, but the prompt holds the query
  only (≤ 512 tokens); identifiers are the layout's leaf strings, atomic numbers or hierarchical
  k-means codes. It decodes freely, as the paper ran it: it may write a header that is no leaf,
  or one that exists nowhere, and such answers are kept and counted (non-leaf / invalid).
* ``dsi-constrained`` — the controlled variant: the same DSI with trie-constrained beam search,
  so only leaf identifiers can come out.

Defaults are the CPU settings (SmolLM2-135M-Instruct, a few epochs); the paper's settings are
config files away: ``searchtome run stair --config $(python -c "import searchtome.baselines.generative.stair
as s; print(s.config_path('stair-mistral7b'))")``. See docs/llm-baselines.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.baselines.generative.config import (
    Decoder,
    DecodingSettings,
    GenRetConfig,
    PromptSettings,
    TrainSettings,
)
from searchtome.baselines.generative.retriever import run_generative
from searchtome.baselines.registry import RunContext, register

from searchtome.config import section

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset
    from searchtome.records import Run

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def config_path(name: str) -> Path:
    """A shipped config file by name (``stair-mistral7b``, ``dsi-mistral7b``, ...)."""
    from searchtome.errors import unknown_name

    path = CONFIG_DIR / f"{name}.toml"
    if not path.is_file():
        raise unknown_name("config", name, [p.stem for p in CONFIG_DIR.glob("*.toml")])
    return path


@dataclass(frozen=True, init=False)
class StairConfig(GenRetConfig):
    """STAIR in the paper's setting, sized for a CPU: LoRA (top 10 layers of SmolLM2) reads the
    ToC, up to 20 epochs with early stopping (patience 5) on dev R@1. The earlier, cheaper
    set-up (frozen ToC, 6 epochs) is the shipped config ``stair-fast``; see docs/llm-baselines.md."""

    training: TrainSettings = section(TrainSettings, adapt_toc=True, max_epochs=20, patience=5)


@dataclass(frozen=True, init=False)
class DSIConfig(GenRetConfig):
    """DSI on CPU: the query alone in the prompt, trained as STAIR is (20 epochs, patience 5;
    the earlier 12 / 3 are the config ``dsi-fast``). Free decoding, as in the paper (its DSI
    named headers that do not exist: 3.25 % non-leaf)."""

    prompt: PromptSettings = section(PromptSettings, max_input_tokens=512)
    training: TrainSettings = section(TrainSettings, max_epochs=20, patience=5)
    decoding: DecodingSettings = section(DecodingSettings, mode=Decoder.FREE)


@dataclass(frozen=True, init=False)
class DSIConstrainedConfig(DSIConfig):
    """DSI whose beam search is constrained to the book's leaf identifiers (a token trie)."""

    decoding: DecodingSettings = section(DecodingSettings)  # the default decoder: beam


@register(
    "stair",
    summary="STAIR: LoRA-tuned LLM reads the book's full ToC (the paper's layout by default) and "
    "the query and writes the leaf's line; trie-constrained beam search or exact ranking",
    config=StairConfig,
    needs=("ml",),
    trains_on=("train", "dev"),
    doc="llm-baselines.md",
)
def run_stair(dataset: Dataset, split: str, config: StairConfig, ctx: RunContext) -> Run:
    return run_generative(dataset, split, config, ctx, system="stair", with_toc=True)


@register(
    "dsi",
    summary="DSI as the paper ran it: the same LoRA-tuned LLM without the ToC in its input "
    "(query only), free beam search; non-leaf and invalid answers are kept and counted",
    config=DSIConfig,
    needs=("ml",),
    trains_on=("train", "dev"),
    doc="llm-baselines.md",
)
def run_dsi(dataset: Dataset, split: str, config: DSIConfig, ctx: RunContext) -> Run:
    return run_generative(dataset, split, config, ctx, system="dsi", with_toc=False)


@register(
    "dsi-constrained",
    summary="DSI with trie-constrained beam search: only leaf identifiers can come out",
    config=DSIConstrainedConfig,
    needs=("ml",),
    trains_on=("train", "dev"),
    doc="llm-baselines.md",
)
def run_dsi_constrained(
    dataset: Dataset, split: str, config: DSIConstrainedConfig, ctx: RunContext
) -> Run:
    # DSI's cache and system name: the same adapter as `dsi` (the decoder does not shape it),
    # so the controlled variant costs no second training run.
    ctx.cache_dir = ctx.cache_dir.with_name("dsi")
    run = run_generative(dataset, split, config, ctx, system="dsi", with_toc=False)
    return replace(run, name="dsi-constrained")
