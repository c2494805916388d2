"""The document kernel (``searchtome.document``): read modes, what a reading keeps, the one
error line, versions and their upgrades, and the committed files read and written back byte for
byte through their owners."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from searchtome.document import (
    FieldError,
    Format,
    Mode,
    Reading,
    Record,
    all_problems,
    before_format,
    derive,
    read_document,
    read_record,
    unchanged,
    write_document,
)
from searchtome.errors import SearchTomeError
from searchtome.io import dumps

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, kw_only=True)
class Phase(Record):
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class Run(Record):
    NULLS: ClassVar[frozenset[str]] = frozenset({"seed"})

    name: str
    seed: int | None = None
    tags: tuple[str, ...] | None = None
    phases: Mapping[str, Phase] | None = None


@dataclass(frozen=True, kw_only=True)
class Submitted(Run):
    MODE: ClassVar[Mode] = Mode.LENIENT


GOOD = {"name": "bm25", "seed": 42, "tags": ["a"], "phases": {"train": {"seconds": 1.5}}}


# -- read modes ------------------------------------------------------------------------------------


def test_strict_reading_raises_on_the_first_wrong_value_naming_the_dotted_field() -> None:
    bad = {**GOOD, "phases": {"train": {"seconds": "abc"}}}
    with pytest.raises(FieldError) as err:
        Run.from_dict(bad)
    assert str(err.value) == 'phases.train.seconds: expected a number, got "abc"'
    assert err.value.where == "phases.train.seconds"


def test_lenient_reading_keeps_a_wrong_value_aside_and_lists_it() -> None:
    bad = {**GOOD, "seed": "42", "phases": {"train": {"seconds": "abc"}}}
    run = Submitted.from_dict(bad)
    assert run.seed is None and run.extra == {"seed": "42"}
    assert run.phases is not None and run.phases["train"].seconds is None
    assert all_problems(run) == [
        'seed: expected an integer, got "42"',
        'phases.train.seconds: expected a number, got "abc"',
    ]
    assert run.to_dict() == bad  # written back as it was read
    # The same class read strictly on demand (a file searchtome wrote) raises instead.
    with pytest.raises(FieldError, match="seed: expected an integer"):
        Submitted.from_dict(bad, mode=Mode.STRICT)


def test_a_missing_required_field_is_an_error_in_both_modes() -> None:
    for cls in (Run, Submitted):
        with pytest.raises(FieldError, match=r"^name: missing$"):
            cls.from_dict({"seed": 1})


def test_numbers_are_checked_exactly() -> None:
    with pytest.raises(FieldError, match="seed: expected an integer, got true"):
        Run.from_dict({"name": "x", "seed": True})
    with pytest.raises(FieldError, match=r"seed: expected an integer, got 1\.5"):
        Run.from_dict({"name": "x", "seed": 1.5})
    assert Phase.from_dict({"seconds": 3}).to_dict() == {"seconds": 3}  # an int stays an int
    with pytest.raises(FieldError, match="seconds: expected a number"):
        Phase.from_dict({"seconds": math.inf})

    # Where a file writes NaN as null (JSON has no NaN), a plain number field reads NaN.
    @dataclass(frozen=True)
    class Interval:
        low: float

    assert math.isnan(read_record(Interval, {"low": None}, "", Reading(nan=True)).low)
    with pytest.raises(FieldError, match="low: expected a number, got null"):
        read_record(Interval, {"low": None})


# -- what a reading keeps --------------------------------------------------------------------------


def test_unknown_keys_are_kept_and_written_back() -> None:
    raw = {**GOOD, "later": {"x": [1, 2]}, "phases": {"train": {"seconds": 1, "gpu": "none"}}}
    run = Run.from_dict(raw)
    assert run.extra == {"later": {"x": [1, 2]}}
    assert run.phases is not None and run.phases["train"].extra == {"gpu": "none"}
    assert run.to_dict() == raw and dumps(run.to_dict()) == dumps(raw)


def test_a_plain_dataclass_refuses_unknown_keys_unless_it_has_extra() -> None:
    @dataclass(frozen=True)
    class Closed:
        a: int

    @dataclass(frozen=True)
    class Open:
        a: int
        extra: dict[str, Any] = field(default_factory=dict)

    with pytest.raises(FieldError, match=r"^b: unknown field$"):
        read_record(Closed, {"a": 1, "b": 2})
    assert read_record(Open, {"a": 1, "b": 2}).extra == {"b": 2}


def test_null_and_missing_stay_apart() -> None:
    given_null = Run.from_dict({"name": "x", "seed": None, "tags": None})
    missing = Run.from_dict({"name": "x"})
    assert given_null.seed is None and missing.seed is None
    assert given_null.to_dict() == {"name": "x", "seed": None, "tags": None}
    assert missing.to_dict() == {"name": "x"}
    # A record made by code writes its NULLS keys (its writer always records them).
    assert Run(name="x").to_dict() == {"name": "x", "seed": None}


# -- versions and upgrades -------------------------------------------------------------------------


def _rename_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: ``title`` became ``name``."""
    out = {k: v for k, v in raw.items() if k != "title"}
    return {**out, "name": raw.get("title", "")}


def _seed_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """v2 → v3: ``seed`` recorded; older files mean 0 (derived: read, never written)."""
    return raw if "seed" in raw else derive(raw, seed=0)


RUN = Format("test-run", 3, upgrades=(_rename_v1, _seed_v2))


def test_older_versions_upgrade_step_by_step_on_reading() -> None:
    old = read_document(RUN, Run, {"format": "test-run-v1", "title": "t"}, "run.json", "fix")
    assert (old.name, old.seed, old.read_version) == ("t", 0, 1)
    assert write_document(RUN, old) == {"format": "test-run-v3", "name": "t"}  # seed: derived
    current = read_document(RUN, Run, {"format": "test-run-v3", "name": "t", "seed": 5}, "r", "")
    assert (current.seed, current.read_version) == (5, 3)
    assert write_document(RUN, current) == {"format": "test-run-v3", "name": "t", "seed": 5}


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (
            {"format": "test-run-v4", "name": "t"},
            "run.json: format: test-run-v4 is newer than this searchtome reads (test-run-v3, "
            "upgrade searchtome); write it again",
        ),
        (
            {"format": "test-run-v0", "name": "t"},
            "run.json: format: test-run-v0 is older than this searchtome reads; write it again",
        ),
        (
            {"format": "other-v1", "name": "t"},
            'run.json: format: expected "test-run-vN", got "other-v1"; write it again',
        ),
        ({"name": "t"}, 'run.json: format: expected "test-run-vN", got nothing; write it again'),
        (
            {"format": "test-run-v3", "name": 5},
            "run.json: name: expected a string, got 5; write it again",
        ),
        ({"format": "test-run-v3"}, "run.json: name: missing; write it again"),
        ([1], "run.json: expected a JSON object, got a list; write it again"),
    ],
)
def test_one_error_line_names_the_file_and_the_field(raw: Any, line: str) -> None:
    with pytest.raises(SearchTomeError) as err:
        read_document(RUN, Run, raw, "run.json", "write it again")
    assert str(err.value) == line


def test_documents_that_predate_the_format_key() -> None:
    # Gained "format" at version 1: a file without it is version 0.
    report = Format("test-report", 1, upgrades=(unchanged,), shape=before_format)
    old = read_document(report, Run, {"name": "r"}, "report.json", "")
    assert old.read_version == 0 and write_document(report, old)["format"] == "test-report-v1"
    # Never keyed (a closed schema): no "format" read or written.
    closed = Format("test-closed", 1, keyed=False)
    doc = read_document(closed, Run, {"name": "c", "format": "kept"}, "c.json", "")
    assert doc.extra == {"format": "kept"} and write_document(closed, doc) == {
        "name": "c",
        "format": "kept",
    }


# -- the committed documents -------------------------------------------------------------------


def test_every_committed_document_round_trips_byte_for_byte() -> None:
    from searchtome.leaderboard.document import read_document as read_board
    from searchtome.leaderboard.document import to_json
    from searchtome.leaderboard.expectations import read_expectations
    from searchtome.submissions.meta import meta_text, read_run_meta

    metas = sorted((ROOT / "submissions").glob("*/meta.json"))
    assert len(metas) >= 20
    for path in metas:
        assert meta_text(read_run_meta(path)) == path.read_text(encoding="utf-8"), path
    board = ROOT / "leaderboard" / "whole-child"
    assert to_json(read_board(board / "leaderboard.json")) == (
        board / "leaderboard.json"
    ).read_text(encoding="utf-8")
    expected = read_expectations(board / "expected.json")
    assert dumps(expected.to_dict()) == (board / "expected.json").read_text(encoding="utf-8")


def test_a_leaderboard_entry_keeps_keys_it_does_not_know() -> None:
    from searchtome.leaderboard.document import from_dict, to_json

    raw = json.loads((ROOT / "leaderboard" / "whole-child" / "leaderboard.json").read_text())
    raw["systems"][0]["energy_kwh"] = 1.25
    doc = from_dict(raw)
    assert doc.systems[0].extra == {"energy_kwh": 1.25}
    assert json.loads(to_json(doc)) == raw


def test_blind_json_and_report_json_are_typed(tmp_path: Path) -> None:
    from searchtome.baselines.finetune import read_report, write_report

    from searchtome.dataset.blind import BLIND_FORMAT, read_private

    blind = tmp_path / "blind.json"
    blind.write_text(json.dumps({"format": BLIND_FORMAT, "split": 5}))
    with pytest.raises(SearchTomeError) as err:
        read_private(tmp_path)
    assert str(err.value).startswith(f"{blind}: split: expected a string, got 5; ")
    # A fine-tuned model's report.json from before version 1 (no format) reads as version 0.
    old = {"seconds": 12.5, "best_epoch": 1, "dev_r1_per_epoch": [0.5], "seed": 3}
    (tmp_path / "report.json").write_text(json.dumps(old))
    report = read_report(tmp_path)
    assert report.read_version == 0 and report.dev_r1_per_epoch == (0.5,)
    write_report(tmp_path, report)
    assert json.loads((tmp_path / "report.json").read_text()) == {
        **old,
        "format": "searchtome-training-report-v1",
    }
    (tmp_path / "report.json").write_text(json.dumps({**old, "seed": "3"}))
    with pytest.raises(SearchTomeError, match=r'report\.json: seed: expected an integer, got "3"'):
        read_report(tmp_path)
