"""Every field from a submission is literal text in every renderer: markdown (rendered by a real
CommonMark parser), the terminal, LaTeX and the HTML page; leaderboard.json keeps it as data."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.results import LeaderboardResult
from searchtome.leaderboard.terminal import print_main_table
from searchtome.leaderboard.text import latex_escape, md_code, md_escape, term_text
from searchtome.submissions import make_meta, write_submission

from .test_leaderboard import system_runs

# A carriage return that would end the table row, a fake row, a heading, raw HTML, a Markdown
# image that would load from outside, emphasis, GitHub math and a terminal escape sequence.
EVIL = {
    "oracle": "ora\rcle | 1 | fake | 99.9 |",
    "law-only": "# Heading <img src=x onerror=alert(1)>",
    "guesser": "x$^^$ *bold* \x1b[31mred",
}
IMAGE = "![tracker](https://evil.example/pixel.png) [link](javascript:alert(1))"
REJECTED = ["# <img src=x onerror=alert(2)>", "two\rlines", "tick`\n<img src=x onerror=alert(4)>"]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> LeaderboardResult:
    ds = load(tiny_dataset)
    root = tmp_path_factory.mktemp("subs")
    for folder, run in system_runs(ds).items():
        meta = make_meta(
            EVIL[folder],
            description=f"{IMAGE} <script>alert(3)</script>",
            command="run `x` | tee",
            dataset_revision="tiny",
            hardware="cpu\nGPU",
            date_="2025-01-31",
        )
        write_submission(root / folder, run, meta)
    for name in REJECTED:
        (root / name).mkdir()
        (root / name / "meta.json").write_text("{}")
    return build_leaderboard(
        ds, root, tmp_path_factory.mktemp("lb"), LeaderboardOptions(permutations=100, bootstrap=50)
    )


def _rendered(board: LeaderboardResult) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    md = (board.out_dir / "leaderboard.md").read_text()
    return markdown_it.MarkdownIt("commonmark").enable("table").render(md)


def test_markdown_renders_every_field_literally(board: LeaderboardResult) -> None:
    html = _rendered(board)
    assert "<img" not in html.replace('<img src="figures/', "")  # only our own figures
    assert "evil.example" not in re.findall(r'<img[^>]*src="([^"]*)"', html).__str__()
    assert "<script" not in html and 'href="javascript' not in html
    assert "<em>" not in html and "<strong>bold" not in html
    headings = re.findall(r"<h(\d)>(.*?)</h\1>", html)
    assert not [h for _, h in headings if "Heading" in h and not h.startswith("# ")]
    assert "# Heading &lt;img src=x onerror=alert(1)&gt;" in html  # shown as written
    # The main table: one row per system, each with the main table's 10 cells.
    main = html.split("<table>")[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", main, re.S)[1:]
    assert len(rows) == 3 and all(r.count("<td") == 10 for r in rows)
    assert any("ora cle | 1 | fake | 99.9 |" in r for r in rows)
    assert "x$^^$ *bold*" in html
    for name in REJECTED:
        shown = re.sub("[\r\n]", " ", name).replace("<", "&lt;").replace(">", "&gt;")
        assert shown in html


def test_html_json_and_terminal(board: LeaderboardResult) -> None:
    page = (board.out_dir / "index.html").read_text()
    assert "<img src=x" not in page and "<script>alert" not in page
    assert "evil.example" not in " ".join(re.findall(r'src="([^"]*)"', page))
    data = json.loads((board.out_dir / "leaderboard.json").read_text())
    assert {s["system"] for s in data["systems"]} == set(EVIL.values())  # data, unchanged
    out = io.StringIO()
    print_main_table(board, out)
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text and "\\x1b[31mred" in text
    assert len(text.splitlines()) == 2 + 3


def test_helpers() -> None:
    assert md_escape("a|b\r\nc") == "a\\|b  c"
    assert md_escape("![i](u)") == "\\!\\[i\\](u)"
    assert md_escape("<b>&") == "&lt;b&gt;&amp;"
    assert md_code("a`b") == "`` a`b ``" and md_code("x\ry") == "`x y`"
    assert term_text("a\x1b[0m\u202eb") == "a\\x1b[0m\\u202eb".replace("\\u202e", "\\x202e")
    assert latex_escape("a_b\n\nc") == r"a\_b  c"
