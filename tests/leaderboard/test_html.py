"""The rendered leaderboard page: self-contained, escaped, and really rendered by Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from searchtome.leaderboard import build_leaderboard
from searchtome.submissions import make_meta, write_submission

from searchtome.dataset.loader import Dataset, load

from .test_leaderboard import system_runs

EVIL_NAME = '<img src=x onerror=alert(1)> & "quotes"'
EVIL_DESCRIPTION = "</dd><script>alert('desc')</script>"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> Path:
    ds: Dataset = load(tiny_dataset)
    root = tmp_path_factory.mktemp("subs")
    runs = system_runs(ds)
    urls = {
        "oracle": "https://example.org/?a=1&b=<x>",
        "law-only": "javascript:alert(1)",
        "guesser": None,
    }
    for folder, run in runs.items():
        system = EVIL_NAME if folder == "guesser" else folder
        extra = {"url": urls[folder]} if urls[folder] else {}
        meta = make_meta(
            system,
            description=EVIL_DESCRIPTION if folder == "guesser" else "plain",
            command="run <it> & done",
            dataset_revision="tiny",
            hardware="cpu",
            date_="2025-01-31",
            **extra,
        )
        write_submission(root / folder, run, meta)
    out = tmp_path_factory.mktemp("lb")
    build_leaderboard(ds, root, out, permutations=200, bootstrap=0)
    return out / "index.html"


def test_page_is_self_contained_and_escaped(page: Path) -> None:
    html = page.read_text()
    assert "<script" not in html.lower()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quotes&quot;" in html
    assert "&lt;/dd&gt;&lt;script&gt;" in html
    assert 'href="javascript:' not in html
    assert '<a href="https://example.org/?a=1&amp;b=&lt;x&gt;"' in html
    srcs = re.findall(r'\bsrc="([^"]*)"', html)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for external in ("<link", "@import", "url(", "<iframe", "<object"):
        assert external not in html.lower()


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


PROBE = """
<pre id="probe"></pre>
<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.map.call(document.images, function (i) {
    return {id: i.id, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight};
  });
  var rows = document.querySelectorAll("#main-table tbody tr");
  var names = Array.prototype.map.call(rows, function (r) { return r.cells[1].textContent; });
  document.getElementById("probe").textContent = JSON.stringify({
    images: imgs,
    main_rows: rows.length,
    main_cols: document.querySelectorAll("#main-table thead th").length,
    names: names,
    domain_rows: document.querySelectorAll("#domain-table tbody tr").length,
    title: document.title,
    scripts_in_page: document.scripts.length
  });
});
</script>
"""


def test_page_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    # An instrumented copy: the published page has no script, the probe reports what rendered.
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert match, f"chromium printed no probe (rc={result.returncode}): {result.stderr[-2000:]}"
    import html as html_lib

    data = json.loads(html_lib.unescape(match.group(1)))
    assert data["title"] == "SearchTome leaderboard"
    assert data["main_rows"] == 3 and data["main_cols"] == 9
    assert data["names"] == ["oracle", "law-only", EVIL_NAME]  # escaped markup shows as text
    assert data["domain_rows"] == 3 * 3  # Law, Natural Sciences, Average
    assert data["scripts_in_page"] == 1  # only the probe: nothing injected by a submission
    assert len(data["images"]) == 3
    for image in data["images"]:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image
