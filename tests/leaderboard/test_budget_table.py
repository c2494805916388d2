"""The token-budget table: on the page, in the markdown and in leaderboard.json, with the tests
of the main table's machinery; absent where a build (or an older file) has no budget values."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from searchtome.dataset.loader import Dataset, load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.budget import budget_note, p_cell, rows
from searchtome.leaderboard.comparison import OVERALL
from searchtome.leaderboard.html import render_html
from searchtome.leaderboard.markdown import render_markdown
from searchtome.leaderboard.results import LeaderboardResult
from searchtome.metrics.budget import section_tokens
from tests.leaderboard.test_leaderboard import write_systems


@pytest.fixture(scope="module")
def ds(tiny_dataset: Path) -> Dataset:
    return load(tiny_dataset)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, ds: Dataset) -> LeaderboardResult:
    root = write_systems(tmp_path_factory.mktemp("budget") / "subs", ds)
    out = root.parent / "board"
    return build_leaderboard(ds, root, out, LeaderboardOptions(permutations=999, bootstrap=100))


def test_the_table_is_on_every_output(built: LeaderboardResult, ds: Dataset) -> None:
    md = (built.out_dir / "leaderboard.md").read_text()
    assert "## Token budget" in md
    assert "| # | System | R@1 | p R@1 | InBudget@512 | p InBudget@512 |" in md
    html = (built.out_dir / "index.html").read_text()
    assert 'id="budget-table"' in html and 'id="token-budget"' in html
    data = json.loads((built.out_dir / "leaderboard.json").read_text())
    assert data["budget"]["tokenizer"]["name"] == "searchtome-words-1"
    assert data["budget"]["book_tokens"] == dict(section_tokens(ds).book)
    for system in data["systems"]:
        assert {"InBudget@512", "InBudget@2048"} <= set(system["aggregate"])
    tested = {t["measure"] for t in data["comparison"]["tests"]}
    assert {"InBudget@512", "InBudget@2048", "R@1"} <= tested


def test_p_cells_are_the_tests_holm_adjusted_p(built: LeaderboardResult) -> None:
    assert built.comparison is not None
    top, *others = built.entries
    assert p_cell(built, top, "InBudget@512") == "top"
    for e in others:
        for m in ("R@1", "InBudget@512"):
            t = built.comparison.test(top.system, e.system, m, OVERALL)
            assert p_cell(built, e, m) == f"{t.p_adjusted:.2g}"
    assert [r[1] for r in rows(built)] == [e.system for e in built.entries]


def test_the_note_states_the_ceiling_and_the_book(built: LeaderboardResult, ds: Dataset) -> None:
    note = budget_note(built)
    # Every tiny section is shorter than 512 tokens: a perfect ranking fits every gold.
    assert "InBudget@512 100.0, InBudget@2048 100.0" in note
    for book, n in section_tokens(ds).book.items():
        assert f"{book} has {n:,} tokens" in note


def test_without_budget_values_there_is_no_table(built: LeaderboardResult) -> None:
    older = replace(built, budget=None)
    assert "Token budget" not in render_markdown(older)
    assert 'id="budget-table"' not in render_html(older, {})
