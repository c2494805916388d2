"""The dense encoder: offline MiniLM vectors, the on-disk cache, passages, presets."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchtome.baselines.encoders import (
    NV_EMBED_QUERY_PREFIX,
    Encoder,
    EncoderConfig,
)

from searchtome.errors import SearchTomeError

TEXTS = [
    "Infants learn language by listening to caregivers.",
    "Babies pick up words from the adults who care for them.",
    "The stock market fell sharply on Tuesday.",
    "Photosynthesis turns light into chemical energy.",
]


def test_vectors_are_normalised_and_meaningful():
    enc = Encoder()
    v = enc.encode_passages(TEXTS)
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    # The paraphrase pair is closer than any unrelated pair.
    assert sims[0, 1] > max(sims[0, 2], sims[0, 3], sims[1, 2], sims[1, 3]) + 0.2


def test_cache_serves_reruns_and_keys_include_the_prefix():
    enc = Encoder()
    first = enc.encode_passages(TEXTS)
    assert enc.stats == {"encoded": 4, "cached": 0}
    again = Encoder()
    second = again.encode_passages(TEXTS + TEXTS[:1])
    assert again.stats == {"encoded": 0, "cached": 5}
    assert "_model" not in again.__dict__  # a fully cached call never touches the model
    assert np.array_equal(first, second[:4]) and np.array_equal(first[0], second[4])
    # A query prefix changes the text the model sees, so it is a different cache entry.
    prefixed = Encoder(EncoderConfig(query_prefix="query: "))
    q = prefixed.encode_queries(TEXTS[:1])
    assert prefixed.stats["encoded"] == 1
    assert not np.allclose(q[0], first[0])
    # The cache is keyed by model config too: unnormalised vectors are not the same entries...
    raw = Encoder(EncoderConfig(normalize=False))
    assert raw.fingerprint != enc.fingerprint


def test_interrupted_encoding_resumes_without_redoing_batches(monkeypatch):
    enc = Encoder(EncoderConfig(batch_size=2))
    calls = []
    real = Encoder._forward

    def flaky(self, texts, prefix, max_tokens, *role):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, texts, prefix, max_tokens, *role)

    monkeypatch.setattr(Encoder, "_forward", flaky)
    with pytest.raises(KeyboardInterrupt):
        enc.encode_passages(TEXTS)
    monkeypatch.setattr(Encoder, "_forward", real)
    resumed = Encoder(EncoderConfig(batch_size=2))
    resumed.encode_passages(TEXTS)
    assert resumed.stats == {"encoded": 2, "cached": 2}


def test_batching_does_not_change_vectors():
    one = Encoder(EncoderConfig(batch_size=1, cache=False)).encode_passages(TEXTS)
    many = Encoder(EncoderConfig(batch_size=4, cache=False)).encode_passages(TEXTS)
    assert np.allclose(one, many, atol=1e-5)


def test_split_passage_fits_the_limit_and_loses_nothing():
    enc = Encoder(EncoderConfig(passage_max_tokens=32))
    text = " ".join(f"Sentence number {i} talks about infant sleep and feeding." for i in range(20))
    parts = enc.split_passage(text)
    assert len(parts) > 3
    lengths = [len(enc.tokenizer(p)["input_ids"]) for p in parts]  # with [CLS]/[SEP]
    assert max(lengths) <= 32
    assert " ".join(parts).split() == text.split()
    assert enc.split_passage("") == []
    # Reserved room for a title shrinks each passage.
    assert len(enc.split_passage(text, reserve=10)) > len(parts)


def test_presets_and_validation():
    nv = EncoderConfig.preset("nv-embed-v2")
    assert nv.model == "nvidia/NV-Embed-v2" and nv.pooling == "nv-embed"
    assert nv.query_prefix == NV_EMBED_QUERY_PREFIX and nv.passage_prefix == ""
    assert (nv.passage_max_tokens, nv.query_max_tokens) == (512, 256)
    assert nv.trust_remote_code
    with pytest.raises(SearchTomeError, match="did you mean 'nv-embed-v2'"):
        EncoderConfig.preset("nv-embed")
    with pytest.raises(SearchTomeError, match="pooling"):
        EncoderConfig(pooling="max")


def test_model_label_names_the_offline_wheel():
    assert Encoder().model_label().startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert (
        Encoder(EncoderConfig(model="org/model", revision="abc")).model_label() == "org/model@abc"
    )


def test_unloadable_model_is_a_one_line_error(tmp_path):
    enc = Encoder(EncoderConfig(model=str(tmp_path)))
    with pytest.raises(SearchTomeError) as info:
        enc.count_tokens(["x"])
    message = str(info.value)
    assert message.startswith(f"cannot load the tokenizer of encoder '{tmp_path}'")
    assert "\n" not in message and "--set encoder.model=PATH" in message
