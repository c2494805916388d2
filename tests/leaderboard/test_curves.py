"""Learning curves: read from meta.json, shared adapters shown once, malformed histories named,
and the figure, table and JSON written deterministically by the build."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from searchtome.dataset.loader import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.curves import curve_from_meta, curve_grid, learning_curves
from searchtome.leaderboard.results import Entry, LeaderboardResult, curve_groups
from searchtome.records import Run
from searchtome.submissions import make_meta, write_submission
from searchtome.submissions.meta import parse_run_meta

from .test_leaderboard import system_runs

WHERE = "subs/x/meta.json"
STAIR = [  # epoch 2 without a dev evaluation; epoch 3 kept
    {"epoch": 1, "train_loss": 0.9, "lr": 0.002, "dev_r1": 0.1, "seconds": 10.0},
    {"epoch": 2, "train_loss": 0.4, "lr": 0.001, "seconds": 20.5},
    {"epoch": 3, "train_loss": 0.2, "lr": 0.0, "dev_r1": 0.3, "seconds": 31.0},
]
DSI = [
    {"epoch": 1, "train_loss": 1.5, "dev_r1": 0.05, "seconds": 5.0},
    {"epoch": 2, "train_loss": 0.5, "dev_r1": 0.25, "seconds": 10.0},
    {"epoch": 3, "train_loss": 0.3, "dev_r1": 0.2, "seconds": 15.0},
    {"epoch": 4, "train_loss": 0.1, "dev_r1": None, "seconds": 4000.0},
]
DSI_ADAPTER = "/runs/home/baselines/dsi/adapters/6265bcbe97f9"


def training(history: Any, best_epoch: int, **extra: Any) -> dict[str, Any]:
    """``run_info.notes`` as the generative baselines write it."""
    adapter = extra.pop("adapter", "/runs/a/stair")
    report = {
        "best_epoch": best_epoch,
        "dev_queries": 50,
        "epochs": len(history) if isinstance(history, list) else 0,
        "history": history,
        "stopped": "reached max_epochs=3",
        **extra,
    }
    return {"adapter": adapter, "training": report}


def meta_with(notes: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"system": "x", "config": {"dev_decode": "greedy"}}
    if notes is not None:
        meta["run_info"] = {"wall_time_s": 1.0, "notes": notes}
    return meta


def test_curve_comes_from_the_training_history() -> None:
    curve = curve_from_meta("stair", meta_with(training(STAIR, 3)), WHERE)
    assert curve is not None
    assert curve.epochs == [1, 2, 3]
    assert curve.dev_r1 == [0.1, None, 0.3]
    assert curve.train_loss == [0.9, 0.4, 0.2]
    assert curve.seconds == [10.0, 20.5, 31.0]
    assert (curve.best_epoch, curve.best_dev_r1, curve.train_seconds) == (3, 0.3, 31.0)
    assert (curve.dev_queries, curve.dev_decode) == (50, "greedy")
    assert (curve.stopped, curve.adapter) == ("reached max_epochs=3", "/runs/a/stair")


@pytest.mark.parametrize(
    "notes",
    [
        None,  # no run_info at all (a ranker)
        {"tokenizer": "default"},  # notes, no training
        {"training": {"epochs": 0, "best_epoch": 0}},  # training without a history
        training([], 0),  # an empty history: nothing to draw
        {"training": "trained elsewhere"},  # free-form notes: not a training report
    ],
)
def test_runs_without_a_history_have_no_curve(notes: dict[str, Any] | None) -> None:
    assert curve_from_meta("x", meta_with(notes), WHERE) is None


@pytest.mark.parametrize(
    ("history", "field", "problem"),
    [
        ("epoch 1: 0.1", "history", 'expected a list of epochs, got "epoch 1: 0.1"'),
        (None, "history", "expected a list of epochs, got null"),
        ([{"dev_r1": 0.1}], "history[0].epoch", "missing"),
        ([{"epoch": "2"}], "history[0].epoch", 'expected an integer, got "2"'),
        ([{"epoch": True}], "history[0].epoch", "expected an integer, got true"),
        ([{"epoch": 1}, 3], "history[1]", "expected an object, got 3"),
        (
            [{"epoch": 2}, {"epoch": 2}],
            "history[1].epoch",
            "expected more than the previous epoch (2), got 2",
        ),
        ([{"epoch": 0}], "history[0].epoch", "expected more than 0, got 0"),
        ([{"epoch": 1, "dev_r1": "high"}], "history[0].dev_r1", 'expected a number, got "high"'),
        (
            [{"epoch": 1, "train_loss": float("nan")}],
            "history[0].train_loss",
            "expected a number, got NaN",
        ),
    ],
)
def test_a_malformed_history_names_the_file_and_the_field(
    history: Any, field: str, problem: str
) -> None:
    with pytest.raises(SearchTomeError) as info:
        curve_from_meta("x", meta_with(training(history, 1)), WHERE)
    assert str(info.value).startswith(f"{WHERE}: run_info.notes.training.{field}: {problem}")


def _entry(system: str, meta: dict[str, Any]) -> Entry:
    return Entry(1, system, {}, {}, {}, {}, parse_run_meta(meta), system, 0, {})


def test_learning_curves_name_the_submission_folder(tmp_path: Path) -> None:
    entries = [
        _entry("bm25", meta_with(None)),
        _entry("stair", meta_with(training(STAIR, 3))),
        _entry("dsi", meta_with(training([{"epoch": "one"}], 1))),
    ]
    with pytest.raises(SearchTomeError, match=re.escape(f"{tmp_path}/dsi/meta.json: ")) as info:
        learning_curves(entries, tmp_path)
    assert "run_info.notes.training.history[0].epoch" in str(info.value)
    assert list(learning_curves(entries[:2], tmp_path)) == ["stair"]


def test_a_shared_adapter_is_one_curve_unless_the_histories_differ() -> None:
    notes = training(DSI, 2, adapter=DSI_ADAPTER)
    entries = [_entry(s, meta_with(notes)) for s in ("dsi", "dsi-constrained")]
    entries.append(_entry("stair", meta_with(training(STAIR, 3))))
    curves = learning_curves(entries)
    assert curve_groups(curves) == [["dsi", "dsi-constrained"], ["stair"]]
    header, _ = curve_grid(curves)
    assert header == ["Epoch", "dsi = dsi-constrained", "stair"]
    # The same adapter path with another history is not the same training: two lines.
    other = training([{**DSI[0], "dev_r1": 0.5}, *DSI[1:]], 2, adapter=DSI_ADAPTER)
    entries[1] = _entry("dsi-constrained", meta_with(other))
    assert curve_groups(learning_curves(entries)) == [["dsi"], ["dsi-constrained"], ["stair"]]
    # No recorded adapter: nothing to share.
    bare = {**notes, "adapter": ""}
    entries = [_entry(s, meta_with(bare)) for s in ("dsi", "dsi-constrained")]
    assert curve_groups(learning_curves(entries)) == [["dsi"], ["dsi-constrained"]]


# -- the build ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ds(tiny_dataset: Path) -> Dataset:
    return load(tiny_dataset)


def write_board(root: Path, ds: Dataset, notes: dict[str, dict[str, Any] | None]) -> Path:
    """One submission per system in ``notes`` (its run_info.notes; None: none), tiny rankings."""
    rankings = [r.rankings for r in system_runs(ds).values()]
    for i, (system, note) in enumerate(notes.items()):
        extra: dict[str, Any] = {"config": {"dev_decode": "greedy"}}
        if note is not None:
            extra["run_info"] = {"wall_time_s": 1.0, "notes": note}
        meta = make_meta(
            system,
            description=f"{system} test system",
            command=f"make {system}",
            dataset_revision="tiny",
            hardware="cpu",
            date_="2025-01-31",
            **extra,
        )
        write_submission(root / system, Run(system, rankings[i % len(rankings)]), meta)
    return root


NOTES = {
    "stair": training(STAIR, 3),
    "dsi": training(DSI, 2, adapter=DSI_ADAPTER, stopped="early stop"),
    "dsi-constrained": training(DSI, 2, adapter=DSI_ADAPTER, stopped="early stop"),
    "bm25": None,
}


@pytest.fixture(scope="module")
def boards(
    tmp_path_factory: pytest.TempPathFactory, ds: Dataset
) -> tuple[LeaderboardResult, LeaderboardResult]:
    """The same submissions built twice, into two folders."""
    site = tmp_path_factory.mktemp("curves")
    root = write_board(site / "subs", ds, NOTES)
    return tuple(  # type: ignore[return-value]
        build_leaderboard(
            ds, root, site / name, LeaderboardOptions(permutations=200, bootstrap=200)
        )
        for name in ("lb1", "lb2")
    )


def test_build_reads_the_curves_and_skips_runs_without_one(boards) -> None:
    board = boards[0]
    assert set(board.curves) == {"stair", "dsi", "dsi-constrained"}  # not bm25
    assert board.curves["dsi"].dev_r1 == [0.05, 0.25, 0.2, None]
    assert board.figures["learning_curves"].name == "learning_curves.png"


def test_markdown_table_marks_the_kept_epoch(boards) -> None:
    md = (boards[0].out_dir / "leaderboard.md").read_text()
    section = md.split("## Learning curves (dev R@1 %, per epoch)")[1].split("## Submissions")[0]
    assert "![Dev R@1 and training loss per epoch of the trained baselines]" in section
    assert "(figures/learning_curves.png)" in section
    table = [line for line in section.splitlines() if line.startswith("|")]
    # The columns follow the leaderboard's ranks (oracle's rankings are stair's, then dsi's).
    assert table == [
        "| Epoch | stair | dsi = dsi-constrained |",
        "|---:|---:|---:|",
        "| 1 | 10.0 | 5.0 |",
        "| 2 | – | **25.0** |",
        "| 3 | **30.0** | 20.0 |",
        "| 4 |  | – |",
    ]
    assert (
        "- **stair**: 50 dev questions (greedy decoding), 3 epochs run, best epoch 3 "
        "(dev R@1 30.0); why it stopped: reached max\\_epochs=3; training wall time 31.0 s."
    ) in section
    assert (
        "- **dsi**: 50 dev questions (greedy decoding), 4 epochs run, best epoch 2 "
        "(dev R@1 25.0); why it stopped: early stop; training wall time 1 h 06 min."
    ) in section
    assert (
        "- **dsi-constrained**: same adapter as dsi (6265bcbe97f9): one training, the same curve."
    ) in section
    assert "bm25**:" not in section


def test_json_carries_the_curves(boards) -> None:
    data = json.loads((boards[0].out_dir / "leaderboard.json").read_text())
    curves = data["learning_curves"]
    assert list(curves) == ["dsi", "dsi-constrained", "stair"]  # sorted keys
    stair = curves["stair"]
    assert stair["epochs"] == [1, 2, 3] and stair["dev_r1"] == [0.1, None, 0.3]
    assert stair["best_epoch"] == 3 and stair["best_dev_r1"] == 0.3
    assert stair["train_seconds"] == 31.0 and stair["same_adapter_as"] is None
    assert curves["dsi-constrained"]["same_adapter_as"] == "dsi"
    assert curves["dsi-constrained"]["adapter"] == DSI_ADAPTER
    assert data["figures"]["learning_curves"] == "figures/learning_curves.png"


def test_figure_is_deterministic(boards) -> None:
    first, second = (b.out_dir / "figures" / "learning_curves.png" for b in boards)
    png = first.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert png == second.read_bytes()
    for name in ("leaderboard.md", "leaderboard.json", "index.html"):
        assert (boards[0].out_dir / name).read_bytes() == (boards[1].out_dir / name).read_bytes()


def test_html_shows_the_figure_and_the_table(boards) -> None:
    page = (boards[0].out_dir / "index.html").read_text()
    section = page.split('<h2 id="learning-curves">')[1].split('<h2 id="submissions">')[0]
    assert '<img id="fig-learning_curves" alt="Dev R@1' in section
    assert 'src="data:image/png;base64,' in section
    assert '<table id="curve-table">' in section  # not sortable: its rows are epochs
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section.split("<tbody>")[1])
    assert rows[1] == '<td>2</td><td>–</td><td class="best">25.0</td>'
    assert rows[2] == '<td>3</td><td class="best">30.0</td><td>20.0</td>'
    assert "<strong>dsi-constrained</strong>: same adapter as dsi" in section
    # Every image on the page is still a data: URI, as the page's policy demands.
    srcs = re.findall(r'\bsrc="([^"]*)"', page)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert page.count('id="fig-learning_curves"') == 1  # not repeated under Analyses


def test_no_history_no_figure_no_section(tmp_path: Path, ds: Dataset) -> None:
    root = write_board(tmp_path / "subs", ds, {"bm25": None, "dpr": {"encoder": "e5"}})
    board = build_leaderboard(
        ds, root, tmp_path / "lb", LeaderboardOptions(permutations=100, bootstrap=0)
    )
    assert board.curves == {} and "learning_curves" not in board.figures
    assert not (tmp_path / "lb" / "figures" / "learning_curves.png").exists()
    assert "Learning curves" not in (tmp_path / "lb" / "leaderboard.md").read_text()
    assert 'id="learning-curves"' not in (tmp_path / "lb" / "index.html").read_text()
    assert json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["learning_curves"] == {}


def test_a_malformed_history_rejects_its_submission(tmp_path: Path, ds: Dataset) -> None:
    bad = training([{"epoch": 1}, {"seconds": 3.0}], 1)
    root = write_board(tmp_path / "subs", ds, {"bm25": None, "stair": bad})
    result = build_leaderboard(
        ds, root, tmp_path / "lb", LeaderboardOptions(permutations=100, bootstrap=0)
    )
    assert [e.system for e in result.entries] == ["bm25"]
    assert [str(p) for p in result.rejected[0].errors] == [
        f"{root / 'stair' / 'meta.json'}: run_info: run_info.notes.training.history[1].epoch: "
        "missing"
    ]
