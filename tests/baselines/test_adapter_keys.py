"""The adapter cache keys of the shipped configs and of the committed runs stay what they were.

Trained adapters in ``$SEARCHTOME_HOME`` are found by :func:`adapters.adapter_key`; a key that
moves silently retrains (hours on a CPU) or, worse, strands a training in progress. The keys
below were recorded with the code before the settings were nested by concern, for every
shipped config, the defaults, the committed runs' ``meta.json`` and the background seed run
(``--set adapt_toc=true --set max_epochs=20 --set patience=5 --set threads=1 --seed 1``).

The key also hashes the model's files and the torch/transformers/peft versions, which differ
between machines; those two inputs are fixed here (to the model's name and to constant
versions) so that the pins hold anywhere, while everything the config shapes — the training
fields, the examples and prompt prefixes it produces, the dev sample, system, seed — is real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.llm_helpers import tiny_lm_fixture  # noqa: F401

torch = pytest.importorskip("torch")

from searchtome.baselines.generative import adapters  # noqa: E402
from searchtome.baselines.generative.adapters import (  # noqa: E402
    TrainingSet,
    adapter_key,
    build_examples,
    dev_sample,
)
from searchtome.baselines.generative.books import book_context  # noqa: E402
from searchtome.baselines.generative.engine import load_lm  # noqa: E402
from searchtome.baselines.generative.stair import (  # noqa: E402
    DSIConfig,
    DSIConstrainedConfig,
    StairConfig,
    config_path,
)

from searchtome.config import make_config  # noqa: E402
from searchtome.dataset.loader import load  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED_RUN = ["adapt_toc=true", "max_epochs=20", "patience=5", "threads=1"]
# searchtome demo's CPU-sized overrides (commands/demo.py, the full profile)
DEMO_STAIR = ["adapt_toc=false", "max_epochs=3", "patience=1", "dev_max_queries=30", "num_beams=3"]
DEMO_DSI = [
    "max_epochs=3",
    "patience=1",
    "dev_max_queries=30",
    "num_beams=3",
    "max_output_tokens=32",
]
# fields that reach the examples and the dev selection another way
OTHERS = ["identifiers=atomic", "indexing=true", "index_max_tokens=16", "dev_decode=beam"]

# (baseline, config file or None, --set overrides, seed) → key
PINNED = {
    ("stair", None, (), 42): "7493bf1cf7bdf431eabc",
    ("stair", "stair-fast", (), 42): "57869e5954918e3a0483",
    ("stair", "stair-mistral7b", (), 42): "05271a63651b565d698b",
    ("stair", None, tuple(SEED_RUN), 1): "46757643e064e9336701",
    ("dsi", None, (), 42): "43ff1e2f801a3e947f67",
    ("dsi", "dsi-fast", (), 42): "5544744a9c34d9d95c1c",
    ("dsi", "dsi-mistral7b", (), 42): "2a3a53804444a694d89b",
    ("dsi-constrained", None, (), 42): "43ff1e2f801a3e947f67",
    ("stair", "submissions/stair", (), 42): "7493bf1cf7bdf431eabc",
    ("stair", "submissions/stair-free", (), 42): "7493bf1cf7bdf431eabc",
    ("dsi", "submissions/dsi", (), 42): "43ff1e2f801a3e947f67",
    ("dsi-constrained", "submissions/dsi-constrained", (), 42): "43ff1e2f801a3e947f67",
    ("stair", None, tuple(DEMO_STAIR), 42): "2c29fea61103c9f1996d",
    ("dsi", None, tuple(DEMO_DSI), 42): "b6c4cc834c6c1aa53676",
    ("dsi", None, tuple(OTHERS), 3): "2087d02f3390ab0668e3",
    (
        "stair",
        "stair-mistral7b",
        ("lora_targets=q_proj,v_proj", "lr=1e-3"),
        42,
    ): "9366875c7f79ef2b4a44",
}
CLASSES = {"stair": StairConfig, "dsi": DSIConfig, "dsi-constrained": DSIConstrainedConfig}


def _source(name: str | None) -> Path | None:
    if name is None:
        return None
    if name.startswith("submissions/"):
        return ROOT / name / "meta.json"
    return config_path(name)


@pytest.fixture(scope="module")
def keys(tiny_lm_dir: Path, tiny_dataset: Path) -> dict[tuple, str]:
    torch.set_num_threads(1)
    lm = load_lm(str(tiny_lm_dir), dtype="float32", device="cpu")
    ds = load(tiny_dataset)
    got = {}
    with pytest.MonkeyPatch.context() as mp:
        # The machine-dependent inputs (see the module docstring), fixed.
        mp.setattr(adapters, "model_fingerprint", lambda name: {"name": name})
        mp.setattr(adapters, "_versions", lambda: {"torch": "T", "transformers": "X", "peft": "P"})
        for pin in PINNED:
            baseline, source, overrides, seed = pin
            cfg = make_config(CLASSES[baseline], _source(source), list(overrides))
            with_toc = baseline == "stair"
            system = "stair" if with_toc else "dsi"
            books = {
                "alpha-bio": book_context(lm, ds, "alpha-bio", cfg, with_toc=with_toc, seed=seed)
            }
            examples = build_examples(lm, ds, books, ["alpha-bio"], cfg)
            dev = dev_sample(ds, ["alpha-bio"], cfg.dev_max_queries, seed)
            data = TrainingSet(books, ["alpha-bio"], examples, dev)
            got[pin] = adapter_key(lm, data, cfg, system=system, with_toc=with_toc, seed=seed)
    return got


def test_adapter_keys_are_pinned(keys: dict[tuple, str]) -> None:
    assert keys == PINNED
