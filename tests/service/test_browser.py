"""The upload form in headless Chromium: a file chosen, submitted, the new row on the page.

The page runs under its strict CSP (scripts from the server only, no inline code); the test
also checks that it raised no error and set no cookie.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.leaderboard.chromium import Chromium, find_chromium
from tests.service.helpers import Server, add_team, blind_release, get, init_home, submission


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
        browser.click("button[type=submit]")
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
