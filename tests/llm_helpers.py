"""Fixtures for the LLM baseline tests: a tiny randomly initialised Llama with SmolLM2's tokenizer.

The tiny model has SmolLM2's real vocabulary, chat template and special tokens (copied from the
converted offline model), so prompts, identifiers and tries are exactly those of the default
model, while a forward pass costs milliseconds. Import the fixtures into a test module with
``from tests.llm_helpers import tiny_lm_fixture  # noqa: F401`` (fixture name ``tiny_lm_dir``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")


def _with_home(models_dir: Path, tmp: Path):
    """A SEARCHTOME_HOME whose models/ is the session's shared model cache."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    if not (home / "models").exists():
        (home / "models").symlink_to(models_dir, target_is_directory=True)
    return home


def build_tiny_llama(out: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session", name="tiny_lm_dir")
def tiny_lm_fixture(tmp_path_factory: pytest.TempPathFactory, shared_models_dir: Path) -> Path:
    """Folder of the tiny random Llama (built once per session from the SmolLM2 tokenizer)."""
    from searchtome.models import smollm2_path

    tmp = tmp_path_factory.mktemp("tinylm")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEARCHTOME_HOME", str(_with_home(shared_models_dir, tmp)))
        tokenizer_dir = smollm2_path()
    return build_tiny_llama(tmp / "tiny-llama", tokenizer_dir)


@pytest.fixture(scope="session", name="smollm2_dir")
def smollm2_fixture(tmp_path_factory: pytest.TempPathFactory, shared_models_dir: Path) -> Path:
    """The converted SmolLM2-135M-Instruct folder (converted at most once per session)."""
    from searchtome.models import smollm2_path

    tmp = tmp_path_factory.mktemp("smol")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEARCHTOME_HOME", str(_with_home(shared_models_dir, tmp)))
        return smollm2_path()


def one_thread() -> None:
    """Deterministic and fast on a shared 2-core machine."""
    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
