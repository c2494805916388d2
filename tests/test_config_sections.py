"""Settings nested by concern with flat public keys; config files that include a base and declare
their baseline; ``searchtome ls config``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from searchtome.baselines.generative import train
from searchtome.baselines.generative.config import (
    Decoder,
    DevDecoder,
    GenRetConfig,
    TrainSettings,
)
from searchtome.baselines.generative.stair import (
    CONFIG_DIR,
    DSIConfig,
    StairConfig,
    config_path,
)
from searchtome.baselines.generative.zeroshot import ZeroShotConfig

from searchtome.cli import main
from searchtome.config import config_record, describe, flat_keys, make_config
from searchtome.config_file import read_config_file
from searchtome.errors import SearchTomeError

ROOT = Path(__file__).resolve().parents[1]
# The public keys meta.json has recorded for STAIR and DSI runs (before cache_lower_layers, the
# committed runs' config; tests/submissions/test_submitted_runs.py reads them too).
COMMITTED = json.loads((ROOT / "submissions" / "stair" / "meta.json").read_text())["config"]


def test_the_public_keys_are_the_flat_names_meta_json_records() -> None:
    assert set(flat_keys(GenRetConfig)) == set(COMMITTED) | {"cache_lower_layers"}
    assert flat_keys(GenRetConfig)["lora_r"] == ("lora", "r")
    assert flat_keys(GenRetConfig)["tree_group"] == ("training", "group")
    cfg = make_config(StairConfig, None, ["threads=2"])
    recorded = json.loads(json.dumps(config_record(cfg)))
    assert {k: v for k, v in recorded.items() if k != "cache_lower_layers"} == COMMITTED


def test_flat_and_dotted_keys_name_the_same_setting_everywhere() -> None:
    flat = make_config(GenRetConfig, {"lora_r": 8}, ["lr=1e-3", "decode=exact"])
    dotted = make_config(
        GenRetConfig, {"lora": {"r": 8}}, ["training.lr=1e-3", "decoding.mode=exact"]
    )
    assert flat == dotted == GenRetConfig(lora_r=8, lr=1e-3, decode="exact")
    assert (flat.lora.r, flat.lora_r, flat.training.lr, flat.lr) == (8, 8, 1e-3, 1e-3)
    assert dataclasses.replace(flat, num_beams=3).decoding.num_beams == 3
    assert dataclasses.replace(flat, num_beams=3).lora.r == 8  # the rest is kept


def test_one_definition_of_the_training_settings() -> None:
    assert train.TrainSettings is TrainSettings  # the loop reads the config's own section
    assert GenRetConfig().training == TrainSettings()
    assert (StairConfig().adapt_toc, StairConfig().max_epochs, StairConfig().lr) == (True, 20, 2e-3)
    assert DSIConfig().training.max_epochs == 20 and DSIConfig().decode is Decoder.FREE


def test_closed_sets_are_enums_checked_where_they_enter() -> None:
    cfg = make_config(GenRetConfig, None, ["decode=free", "dev_decode=beam"])
    assert cfg.decoding.mode is Decoder.FREE and cfg.dev.decode is DevDecoder.BEAM
    assert cfg.free_form and config_record(cfg)["decode"] == "free"
    assert type(config_record(cfg)["decode"]) is str  # meta.json holds the plain text
    with pytest.raises(SearchTomeError, match=r"^--set: unknown decode value 'fre' \(did you"):
        make_config(GenRetConfig, None, ["decode=fre"])
    with pytest.raises(SearchTomeError, match=r"unknown dev_decode value 'gredy'"):
        GenRetConfig(dev_decode="gredy")
    with pytest.raises(
        SearchTomeError, match=r"unknown config key 'lora_rr'.*did you mean 'lora_r'"
    ):
        make_config(GenRetConfig, None, ["lora_rr=3"])


def test_every_setting_has_help_from_its_field() -> None:
    for cls in (StairConfig, DSIConfig, ZeroShotConfig):
        rows = describe(cls())
        assert rows and all(r.help for r in rows), [r.key for r in rows if not r.help]
    sections = {r.section: r.section_help for r in describe(StairConfig())}
    assert set(sections) == {"lm", "prompt", "lora", "training", "dev", "decoding"}
    assert all(sections.values())


def test_includes_resolve_with_one_precedence_rule(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text('lr = 0.1\nlora_r = 4\nmodel = "base"\n[lora]\nalpha = 7\n')
    (tmp_path / "mid.toml").write_text('include = "base.toml"\nlr = 0.2\n')
    (tmp_path / "top.toml").write_text('baseline = "stair"\ninclude = ["mid.toml"]\nlora_r = 5\n')
    file = read_config_file(tmp_path / "top.toml")
    assert file.baseline == "stair" and [p.name for p in file.includes] == ["mid.toml", "base.toml"]
    # defaults < base < mid < top < --set
    cfg = make_config(StairConfig, tmp_path / "top.toml", ["model=flag"], baseline="stair")
    assert (cfg.lr, cfg.lora_r, cfg.lora_alpha, cfg.model) == (0.2, 5, 7, "flag")
    assert cfg.max_epochs == StairConfig().max_epochs  # untouched keys keep the defaults
    # An include's own baseline is its own: a base declaring one does not make mid declare it.
    (tmp_path / "base.toml").write_text('baseline = "dsi"\nlr = 0.1\n')
    assert read_config_file(tmp_path / "mid.toml").baseline is None


def test_a_cycle_or_a_missing_include_is_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('include = "b.toml"\n')
    (tmp_path / "b.toml").write_text('include = "a.toml"\n')
    with pytest.raises(SearchTomeError, match=r"b\.toml: include cycle a\.toml -> b\.toml -> a"):
        read_config_file(tmp_path / "a.toml")
    (tmp_path / "c.toml").write_text('include = "nope.toml"\n')
    with pytest.raises(SearchTomeError, match=r"c\.toml: include 'nope\.toml' not found") as exc:
        make_config(StairConfig, tmp_path / "c.toml")
    assert "\n" not in str(exc.value)


def test_shipped_configs_declare_their_baseline_and_others_are_refused(
    tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    declared = {p.stem: read_config_file(p).baseline for p in CONFIG_DIR.glob("*.toml")}
    assert declared == {
        "stair-fast": "stair",
        "stair-mistral7b": "stair",
        "dsi-fast": "dsi",
        "dsi-mistral7b": "dsi",
        "zeroshot-endpoint": "zeroshot-llm",
        "zeroshot-mistral7b": "zeroshot-llm",
        "mistral7b": None,  # the base both Mistral configs include
    }
    # dsi-mistral7b is its base plus about ten lines, no longer a copy of stair-mistral7b
    settings = [ln for ln in config_path("dsi-mistral7b").read_text().splitlines() if ln[:1] != "#"]
    assert len(settings) <= 8
    assert main(["run", "stair", "--data", str(tiny_dataset), "--config", "dsi-mistral7b"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("searchtome: error: ")
    assert lines[0].endswith(
        "dsi-mistral7b.toml: this config is for dsi; use searchtome run dsi --config "
        f"{lines[0].split(': ')[2]}"
    )


def test_ls_config_prints_the_resolved_settings_with_their_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["ls", "config", "dsi-mistral7b"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("dsi-mistral7b: for dsi (") and "includes mistral7b.toml" in out[0]
    assert any(ln.startswith("[lora] LoRA:") for ln in out)
    lr = next(ln for ln in out if ln.startswith("* lr = "))  # * : from the file (its base)
    assert lr.split() == ["*", "lr", "=", "0.0002", "AdamW", "learning", "rate"]
    assert any(ln.split()[:3] == ["*", "decode", "="] and '"free"' in ln for ln in out)
    assert any(ln.split()[:3] == ["threads", "=", "0"] for ln in out)  # a default
    assert main(["ls", "config"]) == 0
    listing = capsys.readouterr().out
    assert "stair-mistral7b" in listing and "zeroshot-llm" in listing
    assert main(["ls", "config", "mistral7b"]) == 1  # a base: which baseline is not known
    assert "declares no baseline" in capsys.readouterr().err
    assert main(["ls", "config", "mistral7b", "--baseline", "dsi"]) == 0
