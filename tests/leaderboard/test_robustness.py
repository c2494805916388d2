"""One bad submission never takes the leaderboard down: each is listed as rejected, with its
reason, and every other submission is scored and drawn (issue 21)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.dataset.loader import Dataset, load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.results import LeaderboardResult
from searchtome.submissions import make_meta, write_submission

from .test_leaderboard import system_runs, write_systems

MATH = "x$^^$"  # passes validate; matplotlib's mathtext cannot parse it


def _meta(system: str, **extra: object) -> dict:
    return make_meta(
        system,
        description="d",
        command="c",
        dataset_revision="tiny",
        hardware="cpu",
        date_="2025-01-31",
        **extra,
    )


def _hostile(root: Path, ds: Dataset) -> dict[str, str]:
    """Bad submissions next to good ones: folder → a phrase its rejection reason holds."""
    runs = system_runs(ds)
    write_submission(root / "mathtext", runs["guesser"], _meta(MATH))
    # Two folders claim "twin" and neither is named so: both go. "law-only-copy" claims the
    # name of the folder law-only, which keeps it.
    write_submission(root / "twin-a", runs["oracle"], _meta("twin"))
    write_submission(root / "twin-b", runs["guesser"], _meta("twin"))
    write_submission(root / "law-only-copy", runs["oracle"], _meta("law-only"))
    (root / "meta-only").mkdir()
    (root / "meta-only" / "meta.json").write_text(json.dumps(_meta("meta-only")))
    write_submission(root / "two-files", runs["oracle"], _meta("two-files"))
    shutil.copy(
        root / "two-files" / "predictions.jsonl", root / "two-files" / "predictions.jsonl.gz"
    )
    deep = root / "deep"
    write_submission(deep, runs["oracle"], _meta("deep"))
    with (deep / "predictions.jsonl").open("a") as fh:
        fh.write('{"query_id": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    for folder, digits in (("huge-int", "1" + "0" * 400), ("huger-int", "9" * 5000)):
        meta = _meta(folder, run_info={"parameters": "BIG", "wall_time_s": "BIG"})
        write_submission(root / folder, runs["oracle"], meta)
        text = (root / folder / "meta.json").read_text()
        (root / folder / "meta.json").write_text(text.replace('"BIG"', digits))
    deep_meta = root / "deep-meta"
    write_submission(deep_meta, runs["oracle"], _meta("deep-meta"))
    text = (deep_meta / "meta.json").read_text()
    nested = "[" * 100_000 + "]" * 100_000
    (deep_meta / "meta.json").write_text(text.replace('"tiny"', f'"tiny", "config": {nested}', 1))
    scored = root / "huge-score"
    write_submission(scored, runs["oracle"], _meta("huge-score"))
    lines = (scored / "predictions.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "scores": ["BIG"]}).replace('"BIG"', "1" + "0" * 400)
    (scored / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    return {
        "twin-a": "also the system name of twin-b",
        "twin-b": "also the system name of twin-a",
        "law-only-copy": "also the system name of law-only",
        "meta-only": "no predictions file",
        "two-files": "2 predictions files",
        "deep": "",
        "huge-int": "parameters",  # 10**400 in meta.json: the validator names the field
        "huger-int": "",
        "deep-meta": "",
        "huge-score": "",  # 10**400 as a score: past float
    }


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path
) -> tuple[LeaderboardResult, dict[str, str]]:
    ds = load(tiny_dataset)
    root = write_systems(tmp_path_factory.mktemp("subs"), ds)
    reasons = _hostile(root, ds)
    out = tmp_path_factory.mktemp("lb")
    return build_leaderboard(
        ds, root, out, LeaderboardOptions(permutations=200, bootstrap=100)
    ), reasons


def test_every_bad_submission_is_rejected_with_its_reason(built) -> None:
    result, reasons = built
    # 10**400 in run_info and 5000 digits (past Python's int parsing limit) are both refused by
    # the validator as out-of-range numbers: rejected with the field, never a crash.
    systems = ["oracle", "law-only", "guesser", MATH]
    assert sorted(e.system for e in result.entries) == sorted(systems)
    rejected = {Path(r.path).name: r for r in result.rejected}
    assert sorted(rejected) == sorted(reasons)
    for folder, phrase in reasons.items():
        errors = " ".join(str(p) for p in rejected[folder].errors)
        assert errors and phrase in errors, (folder, errors)
    data = json.loads((result.out_dir / "leaderboard.json").read_text())
    assert sorted(r["path"] for r in data["rejected"]) == sorted(reasons)
    assert all(r["errors"] for r in data["rejected"])
    md = (result.out_dir / "leaderboard.md").read_text()
    page = (result.out_dir / "index.html").read_text()
    for folder in reasons:
        assert folder in md and folder in page


def test_names_are_drawn_literally(built) -> None:
    result, _ = built
    for path in result.figures.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert MATH in (result.out_dir / "leaderboard.md").read_text().replace("\\", "")


def test_the_command_writes_everything_and_exits_1(
    tmp_path: Path, tiny_dataset: Path, capsys
) -> None:
    ds = load(tiny_dataset)
    root = write_systems(tmp_path / "subs", ds, ["oracle", "guesser"])
    _hostile(root, ds)
    out = tmp_path / "lb"
    args = ["leaderboard", "--data", str(tiny_dataset), "--submissions", str(root)]
    assert main([*args, "--out", str(out), "--permutations", "100", "--bootstrap", "0"]) == 1
    printed = capsys.readouterr().out
    assert "rejected:" in printed and "meta-only" in printed
    assert {p.name for p in out.iterdir()} >= {"index.html", "leaderboard.md", "leaderboard.json"}


def test_a_board_where_every_submission_is_rejected_still_renders(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    ds = load(tiny_dataset)
    root = tmp_path / "subs"
    (root / "meta-only").mkdir(parents=True)
    (root / "meta-only" / "meta.json").write_text(json.dumps(_meta("meta-only")))
    result = build_leaderboard(
        ds, root, tmp_path / "lb", LeaderboardOptions(permutations=100, bootstrap=0)
    )
    assert result.entries == [] and len(result.rejected) == 1
    assert "Rejected submissions" in (tmp_path / "lb" / "leaderboard.md").read_text()


def test_a_math_name_in_the_curves_legend_and_log_ticks_still_math() -> None:
    from searchtome.leaderboard.figures import plot_curves, plot_paired
    from searchtome.leaderboard.results import LearningCurve, PairedAnalysis, PairedTest

    curve = LearningCurve(MATH, [1, 2], [0.1, 0.2], [1.0, 0.01], [1.0, 2.0], 2, 10, "done", "a")
    assert plot_curves({MATH: curve})[:4] == b"\x89PNG"
    bucket = PairedTest("0", 3, 0.5, 0.2, 0.3, 0.1, 0.5, 0.04)
    paired = PairedAnalysis(MATH, "$\\frac{", "R@1", "two-sided", 5, buckets=[bucket])
    assert plot_paired(paired)[:4] == b"\x89PNG"
