"""The page's new parts: what each system is (type, model, parameters, training data, date,
link), domains side by side, a download link, one colour per system everywhere, no empty figure."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from searchtome.dataset.loader import load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.results import LeaderboardResult
from searchtome.leaderboard.systems import SystemCard, palette
from searchtome.submissions import make_meta, write_submission

from .test_html import _rows
from .test_leaderboard import system_runs

N = 12  # more systems than matplotlib's ten default colours


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> LeaderboardResult:
    ds = load(tiny_dataset)
    oracle = system_runs(ds)["oracle"]
    root = tmp_path_factory.mktemp("subs")
    for i in range(N):
        info = (
            {"system_type": "dense", "parameters": 22_700_000} if i == 0 else {"baseline": "bm25"}
        )
        meta = make_meta(
            f"s{i:02d}",
            description="d",
            command="c",
            dataset_revision="tiny",
            hardware="cpu",
            date_="2025-01-31T10:00:00+00:00",
            models=["m/one", "m/two"] if i == 0 else [],
            trained_on=["train"] if i == 0 else [],
            url="https://example.org/paper/x.pdf#s2" if i == 0 else "javascript:alert(1)",
            run_info=info,
        )
        write_submission(root / f"s{i:02d}", oracle, meta)
    bad = make_meta("typo", description="d", command="c", dataset_revision="tiny",
                    run_info={"system_type": "neural"})  # fmt: skip
    write_submission(root / "typo", oracle, bad)
    return build_leaderboard(
        ds, root, tmp_path_factory.mktemp("lb"), LeaderboardOptions(permutations=50, bootstrap=0)
    )


def test_main_table_says_what_each_system_is(board: LeaderboardResult) -> None:
    page = (board.out_dir / "index.html").read_text()
    head = re.search(r'<table id="main-table".*?</thead>', page, re.S).group(0)
    labels = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", head)
    assert labels[-6:] == ["Type", "Model", "Parameters", "Trained on", "Date", "Paper / code"]
    first, other = _rows(page, "main-table")[0], _rows(page, "main-table")[1]
    texts = [t for _, t in first[-6:]]
    assert texts[:5] == ["dense", "one, two", "22.7M", "train", "2025-01-31"]  # full in title
    assert 'title="m/one, m/two"' in first[-5][0]
    assert (
        texts[5]
        == '<a href="https://example.org/paper/x.pdf#s2" rel="nofollow noopener">example.org: x.pdf#s2</a>'
    )
    # A run that records no type gets its baseline's; a javascript: URL is no link.
    assert [t for _, t in other[-6:]] == ["lexical", "none", "–", "none", "2025-01-31", "–"]
    md = (board.out_dir / "leaderboard.md").read_text()
    assert (
        "| s00 | dense | m/one, m/two | 22.7M | train | 2025-01-31 | [example.org: x.pdf\\#s2](https://example.org/paper/x.pdf#s2) |"
        in md
    )
    assert "javascript" not in md.split("## Systems")[1].split("##")[0]


def test_an_unknown_system_type_rejects_the_submission(board: LeaderboardResult) -> None:
    (typo,) = board.rejected
    assert (
        "'neural' is not a system type; use one of lexical, dense, hybrid, generative, zero-shot"
        in str(typo.errors[0])
    )


def test_domains_side_by_side_and_a_download_link(board: LeaderboardResult) -> None:
    page = (board.out_dir / "index.html").read_text()
    head = re.search(r'<table id="domain-side-by-side".*?</thead>', page, re.S).group(0)
    labels = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", head)
    assert labels == ["#", "System"] + [
        f"{d} {m}" for d in ("Law", "Natural Sciences") for m in ("R@1", "R@3", "nDCG@3")
    ]
    assert len(_rows(page, "domain-side-by-side")) == N
    assert '<a href="leaderboard.json" download>leaderboard.json</a>' in page
    assert "[leaderboard.json](leaderboard.json)" in (board.out_dir / "leaderboard.md").read_text()


def test_one_colour_per_system_on_the_page_and_in_every_figure(board: LeaderboardResult) -> None:
    import matplotlib.image

    colours = board.colours
    assert len(set(colours.values())) == N == len(colours)
    page = (board.out_dir / "index.html").read_text()
    for system, colour in colours.items():  # every table's swatch for a system: its colour
        swatches = set(
            re.findall(
                rf'style="background:(#[0-9a-f]{{6}})" aria-hidden="true"></span>{system}<', page
            )
        )
        assert swatches == {colour}, system
    assert json.loads((board.out_dir / "leaderboard.json").read_text())["colours"] == colours
    png = matplotlib.image.imread(io.BytesIO(board.figures["r1_by_depth"].read_bytes()))
    pixels = {tuple(p) for p in (png[..., :3] * 255).round().astype(int).reshape(-1, 3)}
    for colour in colours.values():
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in pixels, colour


def test_no_empty_figure(board: LeaderboardResult) -> None:
    # Every system answers the gold leaf: no invalid output anywhere, so no invalid-rate chart.
    assert "invalid_by_training_questions" not in board.figures
    assert "invalid_by_training_questions" in board.analyses  # still in leaderboard.json
    assert not (board.out_dir / "figures" / "invalid_by_training_questions.png").exists()
    page = (board.out_dir / "index.html").read_text()
    assert page.count("<img ") == len(board.figures)


def test_palette_never_repeats() -> None:
    many = palette([f"s{i}" for i in range(1000)])
    assert len(set(many.values())) == 1000
    assert palette(["a", "b"]) == {"a": "#1f77b4", "b": "#ff7f0e"}  # matplotlib's first two
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in many.values())
    assert np.all([SystemCard.from_meta({}).system_type == ""])
