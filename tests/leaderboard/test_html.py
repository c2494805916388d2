"""The leaderboard page: self-contained, escaped, per-column best, links, costs, checks, and
really used in headless Chromium (sorting by a click, tabs, filter, no request, no error)."""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import http.server
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from searchtome.dataset.loader import Dataset, load
from searchtome.dataset.manifest import DatasetManifest
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.costs import Cost, fmt_count, fmt_mib, fmt_seconds
from searchtome.leaderboard.html import question_model_note, render_html
from searchtome.leaderboard.html_assets import CSP, SCRIPT
from searchtome.leaderboard.markdown import domain_table, render_markdown
from searchtome.leaderboard.results import LeaderboardResult
from searchtome.llm.local import SMOLLM2_LABEL, SMOLLM2_NOTE
from searchtome.submissions import make_meta, write_submission

from .chromium import Chromium, find_chromium
from .test_leaderboard import system_runs

EVIL_NAME = '<img src=x onerror=alert(1)> & "quotes"'
EVIL_DESCRIPTION = "</dd><script>alert('desc')</script>"
RUN_INFO = {
    "oracle": {"wall_time_s": 3725.0, "peak_rss_mib": 2048.0, "parameters": 135_000_000},
    "law-only": {"wall_time_s": 12.5, "peak_rss_mib": 100.0, "parameters": True},  # bool: ignored
    "guesser": None,
}
# law-only's R@1 is 0.5: outside 0.6 ± 0.05, so that check fails; oracle's passes.
EXPECTED = {
    "systems": {"oracle": {"R@1": 1.0}, "law-only": {"R@1": {"value": 0.6, "tolerance": 0.05}}}
}


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> LeaderboardResult:
    """A site root holding ``subs/`` (three submissions) and ``lb/`` (the built page)."""
    ds: Dataset = load(tiny_dataset)
    site = tmp_path_factory.mktemp("site")
    urls = {"oracle": "https://example.org/?a=1&b=<x>", "law-only": "javascript:alert(1)"}
    for folder, run in system_runs(ds).items():
        extra = {"url": urls[folder]} if folder in urls else {}
        if RUN_INFO[folder]:
            extra["run_info"] = RUN_INFO[folder]
        meta = make_meta(
            EVIL_NAME if folder == "guesser" else folder,
            description=EVIL_DESCRIPTION if folder == "guesser" else "plain",
            command="run <it> & done",
            dataset_revision="tiny",
            hardware="cpu" if folder != "law-only" else "1 GPU",
            date_="2025-01-31",
            **extra,
        )
        write_submission(site / "subs" / folder, run, meta)
    return build_leaderboard(
        ds,
        site / "subs",
        site / "lb",
        LeaderboardOptions(permutations=200, bootstrap=200),
        check=EXPECTED,
    )


@pytest.fixture(scope="module")
def html(board: LeaderboardResult) -> str:
    return (board.out_dir / "index.html").read_text()


def _rows(page: str, table_id: str) -> list[list[tuple[str, str]]]:
    """(attributes, inner HTML) of every body cell of one table, row by row."""
    table = re.search(rf'<table id="{table_id}"[^>]*>(.*?)</table>', page, re.S)
    assert table, table_id
    body = table.group(1).split("<tbody>")[1]
    return [re.findall(r"<td([^>]*)>(.*?)</td>", row) for row in body.split("</tr>")[:-1]]


def test_page_is_self_contained_and_escaped(html: str) -> None:
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert scripts == [SCRIPT]  # ours only: nothing a submission wrote became a script
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in CSP and "default-src 'none'" in CSP
    assert '<meta http-equiv="Content-Security-Policy"' in html
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &#34;quotes&#34;" in html
    assert "&lt;/dd&gt;&lt;script&gt;" in html
    assert 'href="javascript:' not in html
    assert '<a href="https://example.org/?a=1&amp;b=&lt;x&gt;"' in html
    srcs = re.findall(r'\bsrc="([^"]*)"', html)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert re.findall(r"<link[^>]*>", html) == ['<link rel="icon" href="data:,">']
    for external in ("@import", "url(", "<iframe", "<object"):
        assert external not in html.lower()


def test_best_is_bold_per_column_not_per_row(board: LeaderboardResult) -> None:
    # The case: the top system is not the best on every measure.
    # Ten-deep rankings here: the fixture's 1- and 2-deep systems would show R@3 as "—".
    top, second, *rest = (
        dataclasses.replace(e, aggregate=dict(e.aggregate), depth=10) for e in board.entries
    )
    top.aggregate["R@3"], second.aggregate["R@3"] = 0.9, 1.0
    result = dataclasses.replace(board, entries=[top, second, *rest])
    rows = _rows(render_html(result, {}), "main-table")
    bold = [[i for i, (attrs, _) in enumerate(r) if "best" in attrs] for r in rows]
    # columns: # System R@1 R@3 nDCG@3 Δ Non-leaf Invalid Empty micro Queries ...
    assert bold[0] == [2, 4, 9] and bold[1] == [3] and bold[2] == [3]  # guesser: R@3 1.0 too
    assert "tr.best" not in render_html(result, {})


def test_cells_beyond_a_ranking_are_marked_not_printed(html: str) -> None:
    # oracle answers one id per query: its R@3 and nDCG@3 would read past its ranking.
    rows = _rows(html, "main-table")
    assert [text for _, text in rows[0][3:5]] == ["—", "—"]
    assert 'title="oracle, R@3: ranking shorter than k (1 deep)"' in rows[0][3][0]
    assert rows[2][3][1] == "100.0"  # guesser is 3 deep: R@3 is shown
    assert "—: ranking shorter than k" in html and "oracle (1 deep: R@3, nDCG@3)" in html


def test_intervals_show_per_cell_and_in_the_delta_column(html: str) -> None:
    rows = _rows(html, "main-table")
    law = rows[1]
    assert re.search(r"paired-bootstrap CI \[[-+0-9.]+, [-+0-9.]+\]", law[2][0])  # R@1's hover
    assert "Holm–Bonferroni-adjusted p = " in law[2][0]
    assert re.fullmatch(r"-50\.0 \[[-+0-9.]+, [-+0-9.]+\]", law[5][1])  # 50.0 - 100.0 points
    assert rows[0][5][1] == "top" and "the top system" in rows[0][2][0]


def test_links_are_relative_and_reach_the_submission_files(
    board: LeaderboardResult, html: str
) -> None:
    hrefs = re.findall(r'href="([^"]+)"', html.split('id="cost-table"')[1].split("</table>")[0])
    assert len(hrefs) == 6
    for href in hrefs:
        assert href.startswith("../subs/") and "://" not in href, href
        assert (board.out_dir / href).resolve().is_file(), href
    assert {Path(h).name for h in hrefs} == {"predictions.jsonl", "meta.json"}


def test_cost_columns_come_from_run_info(html: str) -> None:
    rows = _rows(html, "cost-table")
    # columns: # System R@1 Prediction Wall-time Peak-memory Parameters Hardware Files; a run
    # that records no training spent its wall time predicting
    assert [c[1] for c in rows[0][3:8]] == ["1 h 02 min", "1 h 02 min", "2.0 GiB", "135M", "cpu"]
    assert [c[1] for c in rows[1][3:8]] == ["12.5 s", "12.5 s", "100 MiB", "–", "1 GPU"]
    assert [c[1] for c in rows[2][3:7]] == ["–", "–", "–", "–"]
    assert 'data-v="3725.0"' in rows[0][3][0] and 'data-v=""' in rows[2][3][0]
    assert (
        "Not recorded by any run here, so not shown: training, training peak memory, "
        "prediction peak memory, peak gpu memory." in html
    )


def test_costs_ignore_values_of_the_wrong_type() -> None:
    meta = {"hardware": 3, "run_info": {"wall_time_s": "1 h", "peak_rss_mib": float("nan")}}
    assert Cost.from_meta(meta) == Cost()
    assert Cost.from_meta({"run_info": {"peak_gpu_mib": -1, "parameters": 7}}).parameters == 7
    assert [fmt_seconds(x) for x in (9.94, 151.468, 3599.6, 3725)] == [
        "9.9 s",
        "2 min 31 s",
        "1 h 00 min",
        "1 h 02 min",
    ]
    assert [fmt_mib(x) for x in (164.3, 1023.6, 3741.8)] == ["164 MiB", "1.0 GiB", "3.7 GiB"]
    assert [fmt_count(x) for x in (950, 22_700_000, 135e6, 7.24e9)] == [
        "950",
        "22.7M",
        "135M",
        "7.2B",
    ]


def test_check_report_is_a_table(board: LeaderboardResult, html: str) -> None:
    md = render_markdown(board)
    assert "| System | R@1 |\n|---|---:|" in md
    assert "| law-only | 0.5000 ✗ (expected 0.6000 ± 0.05) |" in md
    assert "| oracle | 1.0000 ✓ |" in md
    assert "**check: FAIL (1 of 2 failed)**" in md
    cells = _rows(html, "check-table")
    assert [(a, t) for a, t in cells[0][1:]] == [
        (' class="fail"', "0.5000 ✗ (expected 0.6000 ± 0.05)")
    ]
    assert "check: FAIL (1 of 2 failed)" in html


def test_one_domain_is_not_repeated_as_its_average(board: LeaderboardResult) -> None:
    two = render_html(board, {})
    assert two.count('role="tab"') == 2 and "one-domain" not in two
    one = dataclasses.replace(board, domains=["Law"])
    page = render_html(one, {})
    assert 'role="tab"' not in page and "Every query is in one domain, Law" in page
    assert "Average" not in domain_table(one) and "Average" in domain_table(board)


def test_banner_when_a_small_local_model_wrote_the_questions(board: LeaderboardResult) -> None:
    assert 'id="question-model"' not in render_html(board, {})
    smol = {"name": "demo", "generation": {"model": SMOLLM2_LABEL, "note": SMOLLM2_NOTE}}
    page = render_html(dataclasses.replace(board, dataset=DatasetManifest.from_dict(smol)), {})
    assert 'class="banner" id="question-model"' in page
    assert "<code>searchtome build --endpoint local</code>" in page
    mixtral = {
        "generation": {"model": "casperhansen/mixtral-instruct-awq", "endpoint_kind": "vllm"}
    }
    assert question_model_note(mixtral) is None
    local = {"model": "/models/tiny", "endpoint_kind": "local"}  # an older, flat manifest
    assert (
        question_model_note(local)
        == "Questions were generated offline by the local model /models/tiny."
    )


# -- in a real browser ---------------------------------------------------------------------

NAMES = "Array.from(document.querySelectorAll('#{} tbody tr')).filter(r => !r.hidden).map(r => r.cells[1].textContent)"


@pytest.fixture
def site(board: LeaderboardResult) -> Iterator[tuple[str, list[str]]]:
    """The site root over real HTTP on a free local port: (base URL, paths requested)."""
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            requested.append(self.path)

    handler = functools.partial(Handler, directory=str(board.out_dir.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()


def test_page_works_in_headless_chromium(
    board: LeaderboardResult, site: tuple[str, list[str]], tmp_path: Path
) -> None:
    browser = find_chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    base, requested = site
    url = f"{base}/lb/index.html"
    with Chromium(browser, tmp_path / "profile") as c:
        for domain in ("Page", "Runtime", "Log", "Network"):
            c.call(f"{domain}.enable")
        c.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        c.call("Page.navigate", url=url)
        c.wait_for("Page.loadEventFired")
        _sorting(c)
        _new_parts(c)
        _tabs_and_filter(c)
        images = c.evaluate(
            "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
        )
        assert images == [True, True, True]
        assert c.problems() == []
        assert [u for u in c.requested_urls() if not u.startswith("data:")] == [url]
        assert requested == ["/lb/index.html"]
        assert c.screenshot(tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        _links(c, board)
        _blocked(c, base, requested)
        _without_javascript(c)


def _sorting(c: Chromium) -> None:
    evil = EVIL_NAME
    assert c.evaluate(NAMES.format("main-table")) == ["oracle", "law-only", evil]
    c.click("#main-table thead th:nth-child(7) button")  # Non-leaf@1, lowest first
    assert c.evaluate(NAMES.format("main-table")) == ["oracle", evil, "law-only"]
    assert (
        c.evaluate(
            "document.querySelector('#main-table thead th:nth-child(7)').getAttribute('aria-sort')"
        )
        == "ascending"
    )
    c.click("#main-table thead th:nth-child(7) button")
    assert c.evaluate(NAMES.format("main-table")) == ["law-only", "oracle", evil]
    c.click("#cost-table thead th:nth-child(4) button")  # wall time; guesser has none: last
    assert c.evaluate(NAMES.format("cost-table")) == ["law-only", "oracle", evil]
    c.click("#cost-table thead th:nth-child(4) button")
    assert c.evaluate(NAMES.format("cost-table")) == ["oracle", "law-only", evil]


def _new_parts(c: Chromium) -> None:
    """The columns of issue 22 are there and sort; the side-by-side table and the download."""
    heads = "Array.from(document.querySelectorAll('#main-table thead th')).map(h => h.textContent)"
    assert c.evaluate(heads)[-6:] == [
        "Type",
        "Model",
        "Parameters",
        "Trained on",
        "Date",
        "Paper / code",
    ]
    c.click("#main-table thead th:nth-child(14) button")  # Parameters; unrecorded ones last
    assert c.evaluate(NAMES.format("main-table"))[0] == "oracle"
    assert c.evaluate("document.querySelector('#downloads a').getAttribute('href')") == (
        "leaderboard.json"
    )
    assert c.evaluate(NAMES.format("domain-side-by-side")) == ["oracle", "law-only", EVIL_NAME]
    swatch = "getComputedStyle(document.querySelector('#main-table .swatch')).backgroundColor"
    assert c.evaluate(swatch) == "rgb(31, 119, 180)"  # the first system's colour: CSP let it be


def _tabs_and_filter(c: Chromium) -> None:
    hidden = "['domain-0', 'domain-1'].map(i => document.getElementById(i).hidden)"
    assert c.evaluate(hidden) == [False, True]
    c.click("#tab-1")
    assert c.evaluate(hidden) == [True, False]
    c.click("#system-filter")
    c.call("Input.insertText", text="LAW")
    assert c.evaluate(NAMES.format("main-table")) == ["law-only"]
    assert c.evaluate(NAMES.format("domain-table-1")) == ["law-only"]
    assert c.evaluate(NAMES.format("domain-side-by-side")) == ["law-only"]


def _links(c: Chromium, board: LeaderboardResult) -> None:
    """Every file link, resolved by the browser, is served by the static host."""
    links = c.evaluate("Array.from(document.querySelectorAll('#cost-table a')).map(a => a.href)")
    assert len(links) == 6
    for link in links:
        with urllib.request.urlopen(link, timeout=10) as response:
            path = board.out_dir.parent / link.split("/", 3)[3]
            assert response.read() == path.read_bytes(), link


def _blocked(c: Chromium, base: str, requested: list[str]) -> None:
    """The control: a request the page did not make is refused by its policy, and seen."""
    c.evaluate(f"document.body.appendChild(new Image()).src = '{base}/probe.png'")
    deadline = time.monotonic() + 30
    while not c.problems() and time.monotonic() < deadline:
        time.sleep(0.05)
        c.evaluate("0")  # the console message arrives as an event between replies
    assert any("Content Security Policy" in p for p in c.problems())
    assert f"{base}/probe.png" in c.requested_urls() and "/probe.png" not in requested


def _without_javascript(c: Chromium) -> None:
    c.call("Emulation.setScriptExecutionDisabled", value=True)
    c.call("Page.reload")
    c.wait_for("Page.loadEventFired")
    state = c.evaluate(
        "[document.querySelectorAll('th button').length, !!document.getElementById('system-filter'),"
        " Array.from(document.querySelectorAll('section.domain')).map(s => s.offsetHeight > 0),"
        " document.querySelectorAll('#main-table tbody tr').length]"
    )
    assert state == [0, False, [True, True], 3]


def test_training_and_prediction_apart_new_and_old_runs() -> None:
    from searchtome.leaderboard.costs import cost_text

    new = {
        "run_info": {
            "wall_time_s": 100.0,
            "training_wall_s": 3 * 3600.0,  # the adapter's whole training, resumed sessions too
            "prediction_wall_s": 60.0,
            "phases": {"training": {"peak_rss_mib": 4096}, "prediction": {"peak_rss_mib": 900}},
            "notes": {"adapter_reused": True},
        }
    }
    old = {
        "run_info": {
            "wall_time_s": 1417.1,
            "notes": {"train_seconds": 10862.2, "predict_seconds": 887.4},
        }
    }
    c = Cost.from_meta(new)
    assert (c.training_s, c.prediction_s, c.training_rss_mib, c.prediction_rss_mib) == (
        10800.0,
        60.0,
        4096,
        900,
    )
    assert c.reused_training
    assert (Cost.from_meta(old).training_s, Cost.from_meta(old).prediction_s) == (10862.2, 887.4)
    text = cost_text([("stair-free", new), ("stair", old)]).splitlines()
    assert text[0].split() == [
        "System",
        "Training",
        "Prediction",
        "Train",
        "peak",
        "Predict",
        "peak",
        "Run",
        "peak",
    ]
    for shown in ("stair-free", "3 h 00 min (reused)", "1 min 00 s", "4.0 GiB", "900 MiB"):
        assert shown in text[1]
    assert "3 h 01 min" in text[2] and "14 min 47 s" in text[2]
