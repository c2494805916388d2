"""The one configuration mechanism: defaults < config file or mapping < explicit values."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from searchtome.baselines.bm25 import BM25Config
from searchtome.baselines.dpr import DPRConfig
from searchtome.baselines.encoders import EncoderConfig

from searchtome.config import config_keys, field_default, make_config
from searchtome.errors import SearchTomeError


@dataclass(frozen=True)
class _Inner:
    size: int = 1
    name: str = "inner"


@dataclass(frozen=True)
class _Outer:
    out: str
    rate: float = 0.5
    tags: tuple[str, ...] = ()
    inner: _Inner = field(default_factory=lambda: _Inner(size=2))


def test_one_precedence_rule_and_required_fields():
    # defaults < mapping (e.g. a manifest's recorded settings) < explicit values
    cfg = make_config(
        _Outer, {"rate": 0.1, "tags": ["x"], "inner": {"name": "file"}}, {"out": "o", "rate": "0.2"}
    )
    assert cfg == _Outer(out="o", rate=0.2, tags=("x",), inner=_Inner(size=2, name="file"))
    # A nested table refines the nested default; a dotted explicit key refines it further.
    cfg = make_config(_Outer, {"inner": {"name": "file"}}, {"out": "o", "inner.size": "3"})
    assert cfg.inner == _Inner(size=3, name="file")
    assert config_keys(_Outer) == ["out", "rate", "tags", "inner", "inner.size", "inner.name"]
    assert field_default(_Outer, "rate") == 0.5 and field_default(_Outer, "inner").size == 2
    with pytest.raises(SearchTomeError, match="invalid config"):
        make_config(_Outer)  # "out" has no default and was not given
    with pytest.raises(SearchTomeError, match=r"manifest\.json: unknown config key 'rat'"):
        make_config(_Outer, {"rat": 1}, {"out": "o"}, source="manifest.json")


def test_a_nested_file_table_refines_the_nested_default(tmp_path):
    toml = tmp_path / "dpr.toml"
    toml.write_text("[encoder]\nbatch_size = 8\n")
    cfg = make_config(DPRConfig, toml)
    assert cfg.encoder.batch_size == 8
    assert cfg.encoder.passage_max_tokens == DPRConfig().encoder.passage_max_tokens


def test_config_layers_defaults_file_and_overrides(tmp_path):
    assert make_config(BM25Config) == BM25Config()
    toml = tmp_path / "bm25.toml"
    toml.write_text('k1 = 0.9\ntitle = "none"\n')
    cfg = make_config(BM25Config, toml, ["b=0.5", "stemmer=none", "depth=10"])
    assert (cfg.k1, cfg.b, cfg.title, cfg.stemmer, cfg.depth) == (0.9, 0.5, "none", "none", 10)
    js = tmp_path / "bm25.json"
    js.write_text(json.dumps({"k1": 2}))
    assert make_config(BM25Config, js).k1 == 2.0
    assert make_config(BM25Config, {"k1": 1.0}, {"b": 0.1}).b == 0.1
    # A submission's meta.json repeats a run: its "config" is used.
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"system": "bm25", "config": {"k1": 0.7}}))
    assert make_config(BM25Config, meta).k1 == 0.7


def test_nested_configs_and_presets():
    cfg = make_config(DPRConfig, None, ["encoder.batch_size=8", "encoder.query_prefix=query: "])
    assert cfg.encoder.batch_size == 8 and cfg.encoder.query_prefix == "query: "
    assert cfg.encoder.passage_max_tokens == DPRConfig().encoder.passage_max_tokens
    nv = make_config(DPRConfig, None, ["encoder=nv-embed-v2", "encoder.batch_size=2"])
    assert nv.encoder == EncoderConfig(**{**EncoderConfig.PRESETS["nv-embed-v2"], "batch_size": 2})
    assert make_config(DPRConfig, {"encoder": "nv-embed-v2"}).encoder.pooling == "nv-embed"
    assert make_config(DPRConfig, None, ["encoder.revision=null"]).encoder.revision is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["k3=1"], "unknown config key 'k3' (did you mean 'k1'?)"),
        (["k1=fast"], "k1: expected a number, got 'fast'"),
        (["depth=2.5"], "depth: expected an integer"),
        (["lowercase=maybe"], "lowercase: expected true or false"),
        (["depth=500"], "depth must be between 1 and 100"),
        (["variant=okapy"], "did you mean 'okapi'"),
        (["k1"], "expected KEY=VALUE"),
    ],
)
def test_bad_overrides_fail_with_one_clear_line(overrides, message):
    with pytest.raises(SearchTomeError) as info:
        make_config(BM25Config, None, overrides)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_nested_key_and_file(tmp_path):
    with pytest.raises(SearchTomeError, match=r"did you mean 'encoder\.model'"):
        make_config(DPRConfig, None, ["encoder.modle=x"])
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"encoder": {"pooling": "max"}}))
    with pytest.raises(SearchTomeError, match=r"c\.json: .*pooling"):
        make_config(DPRConfig, bad)
    bad.write_text(json.dumps({"k2": 1}))
    with pytest.raises(SearchTomeError, match=r"c\.json: unknown config key 'k2'"):
        make_config(BM25Config, bad)
    with pytest.raises(SearchTomeError, match="not found"):
        make_config(BM25Config, tmp_path / "missing.toml")
    (tmp_path / "c.toml").write_text("k1 = = 2")
    with pytest.raises(SearchTomeError, match="not valid TOML"):
        make_config(BM25Config, tmp_path / "c.toml")
