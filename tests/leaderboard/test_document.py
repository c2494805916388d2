"""``leaderboard.json`` as a typed document: the one reader loads every file there is (the
committed board and older v1 shapes, through the upgrade step), the one writer gives back the
same bytes, and check statuses are an enum that prints as before."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from searchtome.dataset.manifest import DatasetManifest
from searchtome.errors import SearchTomeError
from searchtome.io import dumps
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.checks import cell, passed, run_checks, status, summary
from searchtome.leaderboard.document import (
    complete,
    document_of,
    from_dict,
    read_document,
    to_json,
)
from searchtome.leaderboard.expectations import Expectations, read_expectations
from searchtome.leaderboard.results import (
    CheckResult,
    CheckStatus,
    DatasetFacts,
    Entry,
    LeaderboardSettings,
    PairedTest,
    dataset_facts,
)
from searchtome.leaderboard.seeds import (
    GroupComparison,
    GroupTest,
    RunPairTest,
    SeedGroup,
    SeedReport,
    SeedRun,
    SeedSettings,
)
from searchtome.submissions.meta import RunMeta

from .test_leaderboard import write_systems

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "leaderboard" / "whole-child"
# Trimmed copies of leaderboard/whole-child/leaderboard.json as committed at these commits:
# the first v1 file (no ranking depth, no checks, no curves, no colours, no system cards) and
# one with learning curves but no colours, cards or empty rankings.
OLD = sorted((Path(__file__).parent / "fixtures").glob("leaderboard-v1-*.json"))


def test_the_committed_board_reads_and_writes_back_byte_identical() -> None:
    text = (COMMITTED / "leaderboard.json").read_text(encoding="utf-8")
    doc = read_document(COMMITTED / "leaderboard.json")
    assert to_json(doc) == text
    assert isinstance(doc.settings, LeaderboardSettings) and doc.settings.permutations == 10_000
    assert doc.settings.control == doc.systems[0].system
    assert all(isinstance(e, Entry) for e in doc.systems) and doc.extra == {}
    assert doc.checks and all(isinstance(c.status, CheckStatus) for c in doc.checks)
    assert doc.comparison is not None and doc.comparison.settings.correction == "holm"
    assert doc.paired is not None and doc.paired.a == "stair"
    assert set(doc.curves) <= {e.system for e in doc.systems}


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.stem)
def test_older_v1_files_load_through_the_upgrade(path: Path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert "colours" not in raw and "card" not in raw["systems"][0]  # an older shape indeed
    doc = read_document(path)
    assert [e.system for e in doc.systems] == [s["system"] for s in raw["systems"]]
    assert doc.colours == {} and all(e.n_empty == 0 and e.empty == 0.0 for e in doc.systems)
    if "depth" not in raw["systems"][0]:
        assert all(e.depth == 0 and e.predictions == "" for e in doc.systems)
        assert doc.curves == {} and doc.checks is None
    # Written back in the current shape, which reads again to the same document.
    again = json.loads(to_json(doc))
    added = {"card", "beyond_depth", "depth", "predictions", "empty", "n_empty"}
    assert set(again["systems"][0]) == set(raw["systems"][0]) | added
    assert from_dict(again) == doc
    assert {"colours", "learning_curves"} <= set(complete(raw))


def test_a_fresh_build_round_trips(tmp_path: Path, tiny_dataset: Path) -> None:
    ds = load(tiny_dataset)
    root = write_systems(tmp_path / "subs", ds)
    expected = {"systems": {"oracle": {"R@1": 1.0}, "law-only": {"R@1": 0.9}}}
    options = LeaderboardOptions(permutations=99, bootstrap=50)
    result = build_leaderboard(ds, root, tmp_path / "lb", options, check=expected)
    written = (tmp_path / "lb" / "leaderboard.json").read_text(encoding="utf-8")
    doc = read_document(tmp_path / "lb" / "leaderboard.json")
    assert doc == document_of(result)
    assert to_json(doc) == written
    assert [c.status for c in doc.checks or []] == [CheckStatus.FAIL, CheckStatus.OK]
    assert '"status": "FAIL"' in written


def test_nan_intervals_are_null_in_the_file_and_nan_in_the_document(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    ds = load(tiny_dataset)
    root = write_systems(tmp_path / "subs", ds)
    options = LeaderboardOptions(permutations=99, bootstrap=0)  # no intervals at all
    build_leaderboard(ds, root, tmp_path / "lb", options)
    path = tmp_path / "lb" / "leaderboard.json"
    assert json.loads(path.read_text())["comparison"]["tests"][0]["ci_low"] is None
    doc = read_document(path)
    assert doc.comparison is not None and math.isnan(doc.comparison.tests[0].ci_low)
    assert to_json(doc) == path.read_text(encoding="utf-8")


def test_a_later_section_is_kept_verbatim() -> None:
    raw = json.loads((COMMITTED / "leaderboard.json").read_text(encoding="utf-8"))
    raw["seed_groups"] = {"stair": {"seeds": [0, 1]}}
    doc = from_dict(raw)
    assert doc.extra == {"seed_groups": {"stair": {"seeds": [0, 1]}}}
    assert json.loads(to_json(doc)) == raw


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"format": "searchtome-server-v1"},
            'format: expected "searchtome-leaderboard-vN", got "searchtome-server-v1"',
        ),
        ({"format": None}, 'format: expected "searchtome-leaderboard-vN", got null'),
        ({"format": "searchtome-leaderboard-v2"}, "newer than this searchtome reads"),
        ({"settings": {"seed": 0}}, r"settings\.searchtome: missing"),
        ({"systems": [{"rank": 1}]}, r"systems\[0\]\.system: missing"),
        ({"split": 5}, "split: expected a string, got 5"),
        ({"domains": ["a", None]}, r"domains\[1\]: expected a string, got null"),
    ],
)
def test_what_is_not_a_leaderboard_is_refused_in_one_line(
    tmp_path: Path, change: dict, message: str
) -> None:
    raw = json.loads((COMMITTED / "leaderboard.json").read_text(encoding="utf-8"))
    path = tmp_path / "leaderboard.json"
    path.write_text(dumps({**raw, **change}))
    with pytest.raises(SearchTomeError, match=message) as err:
        read_document(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


def test_a_json_array_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "leaderboard.json"
    path.write_text("[]")
    with pytest.raises(SearchTomeError, match="expected a JSON object, got a list"):
        read_document(path)


# -- the check status ------------------------------------------------------------------------


def test_check_status_is_an_enum_that_prints_as_its_text() -> None:
    assert [s.value for s in CheckStatus] == ["OK", "within tolerance", "FAIL"]
    assert f"{CheckStatus.WITHIN}" == "within tolerance" and str(CheckStatus.FAIL) == "FAIL"
    assert json.dumps({"status": CheckStatus.OK}) == '{"status": "OK"}'
    assert CheckStatus("within tolerance") is CheckStatus.WITHIN
    with pytest.raises(ValueError):
        CheckStatus("ok")


def test_status_bounds() -> None:
    assert status(None, 0.5, 0.1) is CheckStatus.FAIL
    assert status(0.5 + 1e-12, 0.5, 0.1) is CheckStatus.OK
    assert status(0.6, 0.5, 0.1) is CheckStatus.WITHIN  # at the tolerance, float noise allowed
    assert status(0.6001, 0.5, 0.1) is CheckStatus.FAIL


def test_run_checks_and_the_report() -> None:
    entry = Entry(1, "a", {"R@1": 0.5, "R@5": 0.7}, {}, {}, {}, RunMeta(), "a", 10, {}, depth=3)
    wanted = Expectations.from_dict(
        {
            "tolerance": 0.01,
            "systems": {"b": {"R@1": 0.3}, "a": {"R@1": 0.505, "R@5": {"value": 0.7}}},
        }
    )
    checks = run_checks(wanted, [entry])
    assert checks == [
        CheckResult("a", "R@1", 0.505, 0.5, 0.01, CheckStatus.WITHIN),
        CheckResult("a", "R@5", 0.7, 0.7, 0.01, CheckStatus.OK),
        CheckResult("b", "R@1", 0.3, None, 0.01, CheckStatus.FAIL),  # no such system
    ]
    assert not passed(checks) and passed(checks[:2]) and passed(None)
    assert summary(checks) == "check: FAIL (1 of 3 failed)"
    assert cell(checks[0]) == "0.5000 ≈ (expected 0.5050 ± 0.01)"
    assert cell(checks[1], short=True) == "— ✓"
    assert cell(checks[2]) == "– ✗ (expected 0.3000 ± 0.01)"


def test_the_committed_expectations_read_and_write_back_byte_identical() -> None:
    text = (COMMITTED / "expected.json").read_text(encoding="utf-8")
    expected = read_expectations(COMMITTED / "expected.json")
    assert dumps(expected.to_dict()) == text
    own = Expectations.from_dict({"tolerance": 0.01, "systems": {"a": {"R@1": {"value": 1}}}})
    assert own.systems["a"]["R@1"].value == 1.0
    both = {
        "tolerance": 0.01,
        "split": None,
        "systems": {"a": {"R@1": 1.0, "R@3": {"value": 0.5, "tolerance": 0.1}}},
    }
    assert Expectations.from_dict(both).to_dict() == both
    with pytest.raises(SearchTomeError, match=r"systems\.a\.R@1: expected a number or an object"):
        Expectations.from_dict({"systems": {"a": {"R@1": "high"}}})


def test_the_dataset_facts_are_read_through_the_manifest_old_flat_records_included() -> None:
    record = read_document(COMMITTED / "leaderboard.json").dataset
    typed = DatasetManifest.from_dict(record)
    assert dataset_facts(record) == dataset_facts(typed)
    assert dataset_facts(typed).name == record["name"] and typed.to_dict(files=False) == record
    flat = {"name": "old", "version": "0.3", "model": "m", "endpoint_kind": "local"}
    assert dataset_facts(flat) == DatasetFacts("old", "0.3", "m", "local", "")
    assert dataset_facts({}) == DatasetFacts("dataset", "", "", "", "")
    with pytest.raises(SearchTomeError, match=r"dataset record: generation\.model"):
        dataset_facts({"generation": {"model": 5}})


def _seed_report(nan: float) -> SeedReport:
    """Two groups, one comparison with a pooled rare-leaf test and one run pair; ``nan`` in the
    places a ``--bootstrap 0`` build leaves without a value."""
    agg = {"R@1": 0.5, "R@3": 0.75, "nDCG@3": 0.625}
    runs = [SeedRun("a", 42, "a", agg), SeedRun("a-seed1", 1, "a-seed1", agg, ["lr: 1 → 2"])]
    groups = [SeedGroup("a", runs), SeedGroup("b", [SeedRun("b", None, "b", dict(agg))])]
    overall = GroupTest("all queries", "R@1", 10, 0.5, 0.25, 0.25, nan, nan, nan, False, 0.75)
    pooled = GroupTest("≤ 5", "R@1", 3, 0.5, 0.0, 0.5, 0.1, 0.9, 0.02, True, 1.0)
    pair = PairedTest("≤ 5", 3, 0.5, 0.0, 0.5, nan, nan, 0.25, mcnemar_p=0.5)
    comparison = GroupComparison(
        "a", "b", True, [42, 1], [None], [overall], 5, pooled,
        [RunPairTest("a", 42, "b", None, pair)], note="b has one run",
    )  # fmt: skip
    return SeedReport(groups, [comparison], SeedSettings(0, 10, 7))


def test_the_seeds_section_is_typed_and_round_trips_byte_identical() -> None:
    committed = read_document(COMMITTED / "leaderboard.json")
    # The committed board's own section (DSI's seed runs) reads back to the very same bytes.
    assert committed.seeds is not None
    assert to_json(committed) == (COMMITTED / "leaderboard.json").read_text(encoding="utf-8")
    doc = dataclasses.replace(committed, seeds=_seed_report(math.nan))
    text = to_json(doc)
    raw = json.loads(text)
    group = raw["seeds"]["groups"][0]
    assert group["seeds"] == [42, 1] and group["sd"]["R@1"] == 0.0 and group["n_seeds"] == 2
    assert raw["seeds"]["comparisons"][0]["overall"][0]["p_value"] is None  # NaN as null
    assert raw["seeds"]["comparisons"][0]["rare_runs"][0]["seed_b"] is None
    again = from_dict(raw)
    assert isinstance(again.seeds, SeedReport) and again.extra == {}
    assert to_json(again) == text
    # NaN aside (it equals nothing), the typed report read back is the one written.
    assert math.isnan(again.seeds.comparisons[0].overall[0].p_value)
    same = dataclasses.replace(committed, seeds=_seed_report(0.0))
    assert from_dict(json.loads(to_json(same))).seeds == same.seeds


def test_a_seeds_section_with_an_unknown_field_is_refused_in_one_line() -> None:
    raw = json.loads((COMMITTED / "leaderboard.json").read_text(encoding="utf-8"))
    doc = dataclasses.replace(from_dict(raw), seeds=_seed_report(0.0))
    bad = json.loads(to_json(doc))
    bad["seeds"]["groups"][0]["spread"] = 1
    with pytest.raises(SearchTomeError, match=r"seeds\.groups\[0\]\.spread: unknown field"):
        from_dict(bad)
