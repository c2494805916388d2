"""``searchtome build``'s options: explicit flags are what the namespace holds, and
``--settings-from`` sits between the defaults and those flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import build_parser
from searchtome.commands.build import explicit_options, options_from_args
from searchtome.errors import SearchTomeError
from searchtome.generate.options import BuildOptions
from searchtome.generate.questions import FilterConfig, load_prompt


def _parse(*argv: str):
    return build_parser().parse_args(["build", "--out", "data", *argv])


def test_only_the_flags_given_are_explicit():
    assert explicit_options(_parse()) == {"out": Path("data")}
    given = explicit_options(
        _parse("--seed", "7", "--no-repair", "--min-question-chars", "5", "--stop", "a")
    )
    assert given == {
        "out": Path("data"),
        "seed": 7,
        "split_seed": None,  # --seed seeds the split too
        "repair": False,
        "filters.min_chars": 5,
        "stop": ["a"],
    }
    assert explicit_options(_parse("--base-url", "http://x/v1"))["endpoint"] == ["http://x/v1"]
    # Repeated, and with its alias: every endpoint kept, in the order given.
    many = _parse("--endpoint", "http://a/v1", "--base-url", "http://x/v1", "--endpoint", "b")
    assert explicit_options(many)["endpoint"] == ["http://a/v1", "http://x/v1", "b"]
    opts = options_from_args(_parse("--endpoint", "http://a/v1", "--endpoint", "http://b/v1"))
    assert opts.endpoint == ("http://a/v1", "http://b/v1")


def test_without_settings_from_the_flags_go_over_the_defaults():
    opts = options_from_args(_parse("--books", "a,b,a", "--stop", "x", "--stop", "y"))
    assert opts == BuildOptions(out=Path("data"), books=("a", "b"), stop=("x", "y"))
    assert opts.filters == FilterConfig() and opts.seed == 42 and opts.card
    # A flag's value is taken as typed: "none" is a name here, not a missing value.
    assert options_from_args(_parse("--name", "none")).name == "none"


def _manifest(tmp_path: Path) -> Path:
    manifest = {
        "name": "recorded",
        "generation": {
            "model": "m-recorded",
            "prompt_version": "questions-v1",
            "prompt_sha256": load_prompt("questions-v1").sha256,
            "seed": 9,
            "questions_per_unit": "auto",
            "sampling": {"temperature": 0.5, "max_tokens": 300, "stop": ["END"], "extra": {}},
            "filters": {"min_chars": 20, "drop_title_leakage": True},
            "units": {"min_chars": 111, "drop_below": 22},
        },
        "split": {"rule": "by-question", "seed": 9, "ratios": {"train": 1, "dev": 1, "test": 2}},
        "extraction": {"infer_toc": True},
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def test_recorded_settings_sit_between_defaults_and_flags(tmp_path):
    path = _manifest(tmp_path)
    opts = options_from_args(_parse("--settings-from", str(path), "--max-question-chars", "99"))
    assert (opts.model, opts.prompt, opts.seed, opts.split_seed) == (
        "m-recorded",
        "questions-v1",
        9,
        9,
    )
    assert (opts.questions_per_unit, opts.temperature, opts.max_tokens) == ("auto", 0.5, 300)
    assert (opts.stop, opts.unit_min_chars, opts.split_rule, opts.infer_toc) == (
        ("END",),
        111,
        "by-question",
        True,
    )
    # Recorded filters refine the defaults; a filter flag refines the recorded ones.
    assert opts.filters == FilterConfig(min_chars=20, max_chars=99, drop_title_leakage=True)
    assert opts.out == Path("data") and opts.endpoint is None  # not recorded: as given
    # Flags win; an explicit --seed moves the recorded split seed too.
    opts = options_from_args(
        _parse("--settings-from", str(path), "--model", "mine", "--seed", "3", "--name", "n")
    )
    assert (opts.model, opts.seed, opts.split_seed, opts.name) == ("mine", 3, None, "n")


def test_a_changed_prompt_template_is_caught(tmp_path):
    path = _manifest(tmp_path)
    data = json.loads(path.read_text())
    data["generation"]["prompt_sha256"] = "0" * 64
    path.write_text(json.dumps(data))
    with pytest.raises(SearchTomeError, match="different 'questions-v1' template"):
        options_from_args(_parse("--settings-from", str(path)))
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(SearchTomeError, match="not the manifest of a `searchtome build`"):
        options_from_args(_parse("--settings-from", str(tmp_path / "other.json")))
