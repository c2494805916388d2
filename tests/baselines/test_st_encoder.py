"""The dense encoder through sentence-transformers: detection, prompts, and today's vectors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip(
    "sentence_transformers", reason="needs the st extra: pip install 'searchtome[st]'"
)

from searchtome.baselines.dpr import DPRConfig, run_dpr
from searchtome.baselines.encoders import Encoder, EncoderConfig
from searchtome.baselines.registry import RunContext

from searchtome.config import make_config
from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from searchtome.llm.models import minilm_path

TEXTS = [
    "Infants learn language by listening to caregivers.",
    "The stock market fell sharply on Tuesday. " * 40,  # longer than every token limit here
    "x",
]


def test_backend_follows_modules_json(tmp_path: Path) -> None:
    folder = str(minilm_path())  # the wheel's folder is a sentence-transformers model
    assert Encoder(EncoderConfig(model=folder)).backend == "sentence-transformers"
    assert Encoder(EncoderConfig(model=folder, backend="transformers")).backend == "transformers"
    # The built-in name keeps the path the committed runs and caches were made with.
    assert Encoder(EncoderConfig()).backend == "transformers"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    assert Encoder(EncoderConfig(model=str(plain))).backend == "transformers"
    with pytest.raises(SearchTomeError, match="unknown encoder backend 'onnx'"):
        EncoderConfig(backend="onnx")


@pytest.mark.parametrize("prefix", ["", "query: "])
def test_same_vectors_as_the_transformers_path(tmp_path: Path, prefix: str) -> None:
    config = EncoderConfig(
        model=str(minilm_path()), query_prefix=prefix, query_max_tokens=32, cache=False
    )
    st = Encoder(config, tmp_path)
    hf = Encoder(replace(config, backend="transformers"), tmp_path)
    assert st.fingerprint != hf.fingerprint  # never one cache for two code paths
    a, b = st.encode_queries(TEXTS), hf.encode_queries(TEXTS)
    assert a.shape == b.shape == (3, 384)
    assert np.abs(a - b).max() < 1e-6
    # The prefix reaches the model: with it, the vectors move.
    if prefix:
        plain = Encoder(replace(config, query_prefix=""), tmp_path).encode_queries(TEXTS)
        assert np.abs(a - plain).max() > 1e-3


def test_dpr_over_a_sentence_transformers_folder_ranks_as_today(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    ds = load(tiny_dataset)
    folder = str(minilm_path())
    # The command line's form: --set encoder.model=FOLDER
    st_config = make_config(DPRConfig, overrides=[f"encoder.model={folder}"])
    assert st_config.encoder.model == folder
    runs, notes = [], []
    for config in (st_config, DPRConfig()):
        ctx = RunContext(cache_dir=tmp_path / "baselines")
        runs.append(run_dpr(ds, "test", config, ctx))
        notes.append(ctx.notes["encoder"])
    assert notes[0]["encoded"] > 0 and notes[1]["encoded"] > 0  # two caches, both filled
    assert [n["backend"] for n in notes] == ["sentence-transformers", "transformers"]
    assert runs[0].rankings == runs[1].rankings
    for qid, scores in runs[0].scores.items():
        assert np.allclose(scores, runs[1].scores[qid], atol=1e-6)
