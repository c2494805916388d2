"""``meta.json`` as a typed document: one reader, the upgrade of older shapes, one writer.

The committed runs and every older shape from the repository's history
(``tests/fixtures/meta_shapes/``: one file per distinct shape, named after the commit it was
taken from) are read and written back byte for byte.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from searchtome.baselines.registry import RunContext

from searchtome.document import all_problems
from searchtome.errors import SearchTomeError
from searchtome.leaderboard.costs import Cost
from searchtome.leaderboard.curves import curve_from_meta
from searchtome.leaderboard.runlist import read_run_list
from searchtome.submissions.meta import (
    META_VERSION,
    RunMeta,
    meta_dict,
    meta_text,
    parse_run_meta,
    read_run_meta,
    shape_version,
    shown_fields,
    write_meta,
)
from searchtome.submissions.runinfo import Epoch, RunInfo, RunReport, TrainingReport

ROOT = Path(__file__).resolve().parents[2]
# The project's runs (the committed board's list); a researcher's folder need not use every part.
COMMITTED = sorted(
    ROOT / "submissions" / name / "meta.json"
    for name in read_run_list(ROOT / "leaderboard" / "whole-child" / "runs.txt")
)
SHAPES = sorted((ROOT / "tests" / "fixtures" / "meta_shapes").glob("*.json"))


def test_there_are_committed_runs_and_older_shapes() -> None:
    assert len(COMMITTED) >= 14 and len(SHAPES) >= 7


@pytest.mark.parametrize("path", COMMITTED + SHAPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_meta_json_reads_typed_and_writes_back_byte_identical(
    path: Path, tmp_path: Path
) -> None:
    meta = read_run_meta(path)
    assert meta.version == META_VERSION
    assert meta.system and meta.run_info is not None and meta.info.wall_time_s is not None
    # Everything these runs recorded has a typed field: nothing left over, nothing misread.
    assert all_problems(meta) == []
    parts = [meta, meta.info, meta.report, meta.report.training or TrainingReport()]
    assert [p.extra for p in parts] == [{}, {}, {}, {}]
    assert meta_text(meta) == path.read_text(encoding="utf-8")
    write_meta(tmp_path / "meta.json", meta)
    assert (tmp_path / "meta.json").read_bytes() == path.read_bytes()


def test_version_1_runs_are_upgraded_and_still_written_as_they_were() -> None:
    path = ROOT / "submissions" / "stair" / "meta.json"
    meta = read_run_meta(path)
    assert meta.read_version == 1 == shape_version(meta_dict(meta))
    # Version 1 kept the training's time in the notes and the type only in `baseline`.
    info = meta.info
    assert info.training_wall_s == meta.report.train_seconds is not None
    assert info.prediction_wall_s == meta.report.predict_seconds is not None
    assert info.system_type == "generative"
    assert info.derived == {"training_wall_s", "prediction_wall_s", "system_type"}
    assert "training_wall_s" not in meta_dict(meta)["run_info"]
    current = read_run_meta(ROOT / "submissions" / "bm25" / "meta.json")
    assert current.read_version == 2 and current.info.derived == frozenset()
    assert current.info.training_wall_s is None and "training_wall_s" in current.info.null_keys


def test_the_training_history_is_typed() -> None:
    report = read_run_meta(ROOT / "submissions" / "stair" / "meta.json").report
    assert report.training is not None and report.training.history
    first = report.training.history[0]
    assert isinstance(first, Epoch) and first.epoch == 1
    assert report.training.best_epoch in [e.epoch for e in report.training.history]
    # The encoder fine-tuning's report (an older kind of history) reads too.
    finetune = read_run_meta(ROOT / "submissions" / "finetune" / "meta.json").report
    assert finetune.training is not None and finetune.training.dev_r1_per_epoch
    assert finetune.finetuned_model and finetune.model_reused is not None


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ('"seed": 42,\n  "split"', '"seed": "42",\n  "split"'),
        ('"models": []', '"models": "none"'),
        ('"system": "bm25",\n  "trained_on"', '"system": "a/b",\n  "trained_on"'),
        ('"n_queries": 1758', '"n_queries": "many"'),
    ],
)
def test_bad_input_is_one_line_naming_the_file_and_the_field(
    tmp_path: Path, edit: str, needle: str
) -> None:
    text = (ROOT / "submissions" / "bm25" / "meta.json").read_text()
    assert edit in text
    path = tmp_path / "meta.json"
    path.write_text(text.replace(edit, needle, 1))
    field = edit.split('"')[1]
    with pytest.raises(SearchTomeError) as info:
        read_run_meta(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}:")
    assert f": {field}: " in message or f": run_info.{field}: expected " in message


def test_the_reader_keeps_the_strict_json_limits(tmp_path: Path) -> None:
    from searchtome.submissions.lines import Limits

    path = tmp_path / "meta.json"
    path.write_text('{"system": "x", "system": "y"}')
    with pytest.raises(SearchTomeError, match="not valid JSON"):
        read_run_meta(path)
    path.write_text((ROOT / "submissions" / "bm25" / "meta.json").read_text())
    with pytest.raises(SearchTomeError, match="byte limit"):
        read_run_meta(path, Limits(max_meta_bytes=100))
    with pytest.raises(SearchTomeError, match="missing"):
        read_run_meta(tmp_path / "absent.json")


def test_a_value_of_the_wrong_type_reads_as_absent_and_is_kept() -> None:
    raw = {"run_info": {"parameters": "BIG", "phases": {}, "notes": {"training": "elsewhere"}}}
    meta = parse_run_meta(raw)
    assert meta.info.parameters is None and meta.report.training is None
    assert all_problems(meta) == [
        'run_info.parameters: expected a number, got "BIG"',
        'run_info.notes.training: expected an object, got "elsewhere"',
    ]
    assert meta_dict(meta) == raw  # written back as it was read


def test_the_runner_built_info_writes_its_nulls() -> None:
    info = RunInfo(wall_time_s=1.0, notes=RunReport(tokenizer="t"))
    written = info.to_dict()
    assert written["training_wall_s"] is None and written["parameters"] is None
    assert written["notes"] == {"tokenizer": "t"} and "peak_gpu_mib" not in written


def test_baselines_record_through_a_typed_report(tmp_path: Path) -> None:
    ctx = RunContext(cache_dir=tmp_path)
    ctx.record(tokenizer="words", parameters=3)
    ctx.record(models=("m",))
    assert ctx.report.tokenizer == "words" and ctx.report.models == ("m",)
    assert ctx.report.texts() == [("tokenizer", "words")]
    with pytest.raises(TypeError):
        ctx.record(tokeniser="typo")  # a misspelt fact fails at once


def test_costs_and_curves_read_the_typed_document() -> None:
    path = ROOT / "submissions" / "stair" / "meta.json"
    meta = read_run_meta(path)
    cost = Cost.from_meta(meta)
    assert cost == Cost.from_meta(meta_dict(meta))
    assert cost.training_s == meta.report.train_seconds  # a version-1 run: from its notes
    assert cost.prediction_s == meta.report.predict_seconds
    curve = curve_from_meta("stair", meta, str(path))
    assert curve is not None and curve.epochs == [e.epoch for e in meta.report.training.history]
    # A report whose history is replaced by a bad one stops the curve with the field.
    notes = dataclasses.replace(meta.report, training=None, extra={"training": {"history": [3]}})
    bad = dataclasses.replace(meta, run_info=dataclasses.replace(meta.info, notes=notes))
    with pytest.raises(SearchTomeError, match=r"history\[0\]: expected an object, got 3"):
        curve_from_meta("stair", meta_dict(bad), str(path))


def test_run_meta_is_a_frozen_document() -> None:
    meta = RunMeta(system="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.system = "y"  # type: ignore[misc]
    assert meta.info == RunInfo(null_keys=frozenset()) and meta.report == RunReport()


def test_the_shown_fields_are_in_order_lists_joined_absent_ones_left_out() -> None:
    meta = parse_run_meta(
        {
            "command": "searchtome run bm25",
            "models": [],
            "trained_on": ["a", "b"],
            "description": "lexical",
            "seed": 3,  # recorded but not one of the shown fields
        }
    )
    assert shown_fields(meta) == [
        ("description", "lexical"),
        ("models", "none"),
        ("trained_on", "a, b"),
        ("command", "searchtome run bm25"),
    ]
