"""The competition page in headless Chromium: the upload form, the team's own runs, final
marking, the filter, the competition's words and its times in the visitor's zone.

The page runs under its strict CSP (scripts from the server only, no inline code); the tests
also check that it raised no error and set no cookie. Set SEARCHTOME_SCREENSHOTS=DIR to keep
the screenshot (docs/server.md shows one).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.leaderboard.chromium import Chromium, find_chromium
from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    get,
    init_home,
    submission,
    upload,
    wait_scored,
)


def _set_file(browser: Chromium, selector: str, path: str) -> None:
    root = browser.call("DOM.getDocument")["root"]["nodeId"]
    node = browser.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
    browser.call("DOM.setFileInputFiles", nodeId=node, files=[path])


def test_the_upload_form_adds_a_row(tmp_path) -> None:
    found = find_chromium()
    if found is None:
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    public, private = blind_release(tmp_path)
    home = tmp_path / "srv"
    init_home(home, public, private)
    token = add_team(home, "browsers")
    folder = submission(tmp_path / "browser-run", private, "browser-run", right=0.6)
    with Server(home) as server, Chromium(found, tmp_path / "profile") as browser:
        for domain in ("Page", "Runtime", "Log", "Network", "DOM"):
            browser.call(f"{domain}.enable")
        browser.call("Page.navigate", url=server.url + "/")
        browser.wait_for("Page.loadEventFired")
        assert "browser-run" not in browser.evaluate("document.body.innerText")
        browser.evaluate(f"document.getElementById('token').value = {json.dumps(token)}")
        _set_file(browser, "#predictions", str(folder / "predictions.jsonl"))
        _set_file(browser, "#meta", str(folder / "meta.json"))
        browser.click("#upload button[type=submit]")
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            try:
                text = browser.evaluate(
                    "(document.getElementById('board-public') || {innerText: ''}).innerText"
                )
            except RuntimeError:  # the page is reloading
                text = ""
            if "browser-run" in text:
                break
            time.sleep(0.3)
        assert "browser-run" in text and "browsers" in text, browser.evaluate(
            "document.getElementById('status').textContent"
        )
        row = browser.evaluate("document.querySelector('#board-public tbody tr').innerText")
        r_at_1 = get(server.url + "/api/leaderboard")[1]["public"]["rows"][0]["aggregate"]["R@1"]
        assert 0 < r_at_1 < 1 and f"\t{r_at_1 * 100:.1f}\t" in row
        assert browser.problems() == []
        assert browser.evaluate("document.cookie") == ""
        # The board was refreshed in place: the token is still in the page, the run is listed.
        assert browser.evaluate("document.getElementById('token').value") == token
        _wait_text(browser, "my-runs", "browser-run")


def _wait_text(browser: Chromium, element: str, text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        seen = browser.evaluate(
            f"(document.getElementById({json.dumps(element)}) || {{innerText: ''}}).innerText"
        )
        if text in seen:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"#{element} never showed {text!r}: {seen!r}")


def test_the_competition_page_a_participant_reads(tmp_path) -> None:
    found = find_chromium()
    if found is None:
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    public, private = blind_release(tmp_path)
    home = tmp_path / "srv"
    rules = tmp_path / "rules.txt"
    rules.write_text("Two final runs per team.\n\nNo hand labelling of test questions.\n")
    init_home(
        home, public, private, "--title", "Tiny Cup <2026>", "--description",
        "Name the section that answers each question.", "--rules", str(rules),
    )  # fmt: skip
    alpha = add_team(home, "alpha")
    beta = add_team(home, "beta")
    with Server(home) as server:
        ids = {}
        for token, name, right in (
            (alpha, "alpha-one", 0.8),
            (alpha, "alpha-two", 0.8),
            (beta, "beta-one", 0.4),
        ):
            folder = submission(tmp_path / name, private, name, right=right)
            status, raw, _ = upload(
                server.url, token, (folder / "predictions.jsonl").read_bytes(),
                (folder / "meta.json").read_bytes(),
            )  # fmt: skip
            assert status == 202, raw
            ids[name] = json.loads(raw)["id"]
            wait_scored(server.url, token, ids[name])
        first = ids["alpha-one"]
        with Chromium(found, tmp_path / "profile") as browser:
            for domain in ("Page", "Runtime", "Log", "Network", "DOM"):
                browser.call(f"{domain}.enable")
            browser.call("Page.navigate", url=server.url + "/")
            browser.wait_for("Page.loadEventFired")
            text = browser.evaluate("document.body.innerText")
            # The competition's own words, escaped: the title is text, not markup.
            assert browser.evaluate("document.title") == "Tiny Cup <2026>"
            assert "Name the section that answers each question." in text
            browser.click("#rules summary")
            assert "No hand labelling of test questions." in browser.evaluate(
                "document.getElementById('rules').innerText"
            )
            assert "no deadline" in browser.evaluate("document.getElementById('phase').innerText")
            # Identical runs differ by exactly zero: never "-0.0".
            board = browser.evaluate("document.getElementById('board-public').innerText")
            assert "-0.0" not in board and "alpha-two" in board and "beta-one" in board
            assert browser.evaluate("document.querySelectorAll('#board-public svg').length") == 2
            # The filter hides the other team's rows.
            browser.evaluate(
                "(() => { const f = document.getElementById('filter'); f.value = 'beta';"
                " f.dispatchEvent(new Event('input')); })()"
            )
            shown = browser.evaluate(
                "[...document.querySelectorAll('#board-public tbody tr')]"
                ".filter(r => !r.hidden).map(r => r.dataset.id)"
            )
            assert len(shown) == 1
            browser.evaluate(
                "(() => { const f = document.getElementById('filter'); f.value = '';"
                " f.dispatchEvent(new Event('input')); })()"
            )
            # The team's own runs, after the token: only alpha's, and a final mark by button.
            browser.evaluate(f"document.getElementById('token').value = {json.dumps(alpha)}")
            browser.click("#show-runs")
            mine = _wait_text(browser, "my-runs", "alpha-one")
            assert "alpha-two" in mine and "beta-one" not in mine
            browser.click(f"#my-runs tr[data-id='{first}'] button.final")
            _wait_text(browser, "my-runs", "final: unmark")
            owned = get(server.url + f"/api/submissions/{first}", token=alpha)[1]
            assert owned["final"] is True
            assert browser.problems() == []
            assert browser.evaluate("document.cookie") == ""
            assert browser.evaluate("window.localStorage.length") == 0
            browser.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280, height=900, deviceScaleFactor=1, mobile=False,
            )  # fmt: skip
            browser.evaluate("window.scrollTo(0, 0)")
            shots = os.environ.get("SEARCHTOME_SCREENSHOTS")
            target = Path(shots) if shots else tmp_path
            target.mkdir(parents=True, exist_ok=True)
            assert browser.screenshot(target / "server-page.png").stat().st_size > 10_000
