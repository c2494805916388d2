"""STAIR and DSI: a LoRA-tuned causal LM that writes the identifier of the answering leaf.

* ``stair`` — the prompt holds a fixed instruction, the book title and the book's whole ToC
  (one node per line, indented), then the query; the model writes the leaf's title path.
* ``dsi`` — the same model family, training data and decoders, but the prompt holds the query
  only (≤ 512 tokens); identifiers are title paths or hierarchical k-means codes.

Defaults are the CPU settings (SmolLM2-135M-Instruct, a few epochs); the paper's settings are
config files away: ``searchtome run stair --config $(python -c "import searchtome.baselines.generative.stair
as s; print(s.config_path('stair-mistral7b'))")``. See docs/llm-baselines.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.baselines.generative.config import GenRetConfig
from searchtome.baselines.generative.retriever import run_generative
from searchtome.baselines.registry import RunContext, register

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


@dataclass(frozen=True)
class StairConfig(GenRetConfig):
    """STAIR on CPU: SmolLM2, frozen-ToC prefix, 6 epochs at most (see docs/llm-baselines.md)."""


@dataclass(frozen=True)
class DSIConfig(GenRetConfig):
    """DSI on CPU: the prompt is short, so more epochs fit the same budget."""

    max_input_tokens: int = 512
    max_epochs: int = 12
    patience: int = 3


@register(
    "stair",
    summary="STAIR: LoRA-tuned LLM reads the query and the book's full ToC and writes the "
    "leaf's title path; trie-constrained beam search or exact ranking",
    config=StairConfig,
    needs=("ml",),
    trains_on=("train", "dev"),
)
def run_stair(dataset: Dataset, split: str, config: StairConfig, ctx: RunContext) -> Run:
    return run_generative(dataset, split, config, ctx, system="stair", with_toc=True)


@register(
    "dsi",
    summary="DSI: the same LoRA-tuned LLM without the ToC in its input (query only); "
    "trie-constrained beam search over leaf identifiers",
    config=DSIConfig,
    needs=("ml",),
    trains_on=("train", "dev"),
)
def run_dsi(dataset: Dataset, split: str, config: DSIConfig, ctx: RunContext) -> Run:
    return run_generative(dataset, split, config, ctx, system="dsi", with_toc=False)
