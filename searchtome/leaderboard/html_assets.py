"""The leaderboard page's inline stylesheet and script, and the content policy that admits them.

The script only enhances a page that already reads fully without it: it makes column headers
sort their table, adds a system filter, and turns the per-domain sections (all shown, one after
another, without it) into tabs. The page's Content-Security-Policy admits this one script by
its hash and nothing else: no other script, no request to any other address.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:118rem;
padding:0 1rem;color:#1b1f23;line-height:1.45}
h1{margin-bottom:.2rem}
.sub{color:#57606a;margin-top:0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:1rem 0;font-variant-numeric:tabular-nums}
th,td{padding:.3rem .6rem;border-bottom:1px solid #d0d7de;text-align:right}
th{background:#f6f8fa;vertical-align:bottom}
td.name,th.name,td.text{text-align:left}
td.sys,td.nw,td[data-v]{white-space:nowrap}
td.best{font-weight:700}
td.ci{color:#57606a;white-space:nowrap}
td[title]{cursor:help}
th button{font:inherit;font-weight:600;background:none;border:0;padding:0;color:inherit;
cursor:pointer;text-align:inherit}
th[aria-sort=ascending] button::after{content:" \\25B2"}
th[aria-sort=descending] button::after{content:" \\25BC"}
.banner{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:.6rem .9rem}
.tabs{display:flex;flex-wrap:wrap;gap:.3rem;border-bottom:1px solid #d0d7de;margin-top:1rem}
.tabs a{padding:.3rem .8rem;border:1px solid transparent;border-bottom:0;color:#0969da;
text-decoration:none;border-radius:6px 6px 0 0}
.tabs a[aria-selected=true]{border-color:#d0d7de;background:#fff;color:#1b1f23;font-weight:600;
margin-bottom:-1px}
.filter{margin:.5rem 0}
td.ok{color:#1a7f37}
td.near{color:#9a6700}
td.fail{color:#cf222e;font-weight:700}
figure{margin:1.5rem 0}
figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:.9rem}
dl{display:grid;grid-template-columns:max-content auto;gap:.1rem 1rem}
dt{font-weight:600}
dd{margin:0;word-break:break-word}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85rem}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto}
.note{color:#57606a;font-size:.9rem}
.swatch{display:inline-block;width:.7em;height:.7em;margin-right:.35em;border-radius:2px;
vertical-align:baseline}
.downloads{margin:.2rem 0 1rem}
"""

# Plain ES2015, no library. Sort keys: a cell's data-v (a number; empty = no value, always
# last) or else its text; ties keep the leaderboard's rank order (data-i), so a sort is stable.
SCRIPT = """
(function () {
  "use strict";
  function key(cell) {
    var v = cell.getAttribute("data-v");
    if (v === null) return cell.textContent.trim().toLowerCase();
    return v === "" ? null : parseFloat(v);
  }
  function sortTable(table, col, th) {
    var now = th.getAttribute("aria-sort");
    var asc = now ? now === "descending" : th.getAttribute("data-first") === "asc";
    var sign = asc ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      var order = a.getAttribute("data-i") - b.getAttribute("data-i");
      if (x === null || y === null) return x === y ? order : (x === null ? 1 : -1);
      return x < y ? -sign : (x > y ? sign : order);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, col) {
      if (!th.hasAttribute("data-first")) return;
      var button = document.createElement("button");
      button.type = "button";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", function () { sortTable(table, col, th); });
    });
  });
  var main = document.getElementById("main-table");
  if (main) {
    var label = document.createElement("label");
    label.className = "filter";
    label.textContent = "Filter systems: ";
    var input = document.createElement("input");
    input.type = "search";
    input.id = "system-filter";
    label.appendChild(input);
    main.parentNode.parentNode.insertBefore(label, main.parentNode);
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      document.querySelectorAll("table.sortable tbody tr").forEach(function (r) {
        var name = r.querySelector("td.sys");
        r.hidden = !!q && !!name && name.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  }
  var tabs = document.querySelectorAll(".tabs a[role=tab]");
  function select(tab) {
    tabs.forEach(function (t) {
      var on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    });
  }
  tabs.forEach(function (t) {
    t.addEventListener("click", function (ev) { ev.preventDefault(); select(t); });
  });
  if (tabs.length) select(tabs[0]);
})();
"""


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


# Figures are data: URIs; the one script is admitted by hash; everything else is refused.
CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{_sha256(SCRIPT)}'; base-uri 'none'; form-action 'none'"
)
