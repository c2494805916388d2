"""``index.html``: the leaderboard as one self-contained page.

The HTML page loads nothing from anywhere: CSS is inline, figures are ``data:`` URIs, there is
no script. Every string that comes from a submission or the dataset goes through
:func:`html.escape`; links are made only from ``http(s)`` URLs.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from searchtome.leaderboard.results import MAIN_MEASURES, META_ORDER, LeaderboardResult
from searchtome.submissions.schema import META_REQUIRED

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:70rem;
padding:0 1rem;color:#1b1f23;line-height:1.45}
h1{margin-bottom:.2rem}
.sub{color:#57606a;margin-top:0}
table{border-collapse:collapse;margin:1rem 0;font-variant-numeric:tabular-nums}
th,td{padding:.3rem .7rem;border-bottom:1px solid #d0d7de;text-align:right}
th{background:#f6f8fa}
td.name,th.name,td.dom{text-align:left}
tr.best td{font-weight:600}
tr.group td{border-top:2px solid #8c959f}
figure{margin:1.5rem 0}
figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:.9rem}
dl{display:grid;grid-template-columns:max-content auto;gap:.1rem 1rem}
dt{font-weight:600}
dd{margin:0;word-break:break-word}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85rem}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto}
.note{color:#57606a;font-size:.9rem}
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _meta_value(key: str, value: Any) -> str:
    if isinstance(value, list):
        return _e(", ".join(str(v) for v in value) or "none")
    if (
        key == "url"
        and isinstance(value, str)
        and value.lower().startswith(("http://", "https://"))
    ):
        return f'<a href="{_e(value)}" rel="nofollow noopener">{_e(value)}</a>'
    if key == "command":
        return f"<code>{_e(value)}</code>"
    return _e(value)


def _table(
    header: list[str], rows: list[list[str]], table_id: str, classes: list[str] | None = None
) -> str:
    head = "".join(
        f'<th class="name">{_e(h)}</th>' if h in ("System", "Domain") else f"<th>{_e(h)}</th>"
        for h in header
    )
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(
            f'<td class="name">{_e(c)}</td>'
            if header[j] in ("System", "Domain")
            else f"<td>{_e(c)}</td>"
            for j, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f'<table id="{_e(table_id)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def render_html(result: LeaderboardResult, images: dict[str, bytes]) -> str:
    """The page; ``images`` are the figures' PNG bytes, embedded as ``data:`` URIs."""
    n = result.entries[0].n_queries if result.entries else 0
    main_rows = result.main_table_rows()
    main = _table(
        list(result.MAIN_HEADER),
        main_rows,
        "main-table",
        ["best" if i == 0 else "" for i in range(len(main_rows))],
    )
    domain_rows: list[list[str]] = []
    classes: list[str] = []
    for domain, rows in result.domain_table_rows():
        for i, row in enumerate(rows):
            domain_rows.append([domain if i == 0 else "", *row])
            classes.append("group" if i == 0 else "")
    per_domain = _table(["Domain", "System", *MAIN_MEASURES], domain_rows, "domain-table", classes)
    figures = []
    for key, png in images.items():
        title = result.analyses[key].title
        data = base64.b64encode(png).decode("ascii")
        figures.append(
            f'<figure><img id="fig-{_e(key)}" alt="{_e(title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(title)}</figcaption></figure>"
        )
    subs = []
    for e in result.entries:
        items = "".join(
            f"<dt>{_e(key)}</dt><dd>{_meta_value(key, e.meta[key])}</dd>"
            for key in META_ORDER
            if key in e.meta
        )
        subs.append(
            f'<section class="submission"><h3>{_e(e.system)}</h3><dl>{items}</dl></section>'
        )
    rejected = ""
    if result.rejected:
        items = "".join(
            f"<li><code>{_e(r.path)}</code>: {len(r.errors)} errors<pre>"
            + _e("\n".join(r.lines(10)))
            + "</pre></li>"
            for r in result.rejected
        )
        rejected = f'<h2 id="rejected">Rejected submissions</h2><ul>{items}</ul>'
    checks = ""
    if result.checks is not None:
        checks = f"<h2>Check against expectations</h2><pre>{_e(result.check_table())}</pre>"
    required = ", ".join(META_REQUIRED)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>SearchTome leaderboard</title>"
        f"<style>{CSS}</style></head><body>"
        "<h1>SearchTome leaderboard</h1>"
        f'<p class="sub">{_e(result.dataset_line())}, {_e(result.split)} split, {n:,} queries, '
        f"{len(result.domains)} domain{'s' if len(result.domains) != 1 else ''}; generated by searchtome {_e(result.settings['searchtome'])}</p>"
        f'<h2 id="main">Main table</h2>{main}'
        f'<p class="note">{_e(result.settings_text())}</p>'
        f'<h2 id="per-domain">Per domain</h2>{per_domain}'
        + (f'<h2 id="analyses">Analyses</h2>{"".join(figures)}' if figures else "")
        + (f'<h2 id="submissions">Submissions</h2>{"".join(subs)}' if subs else "")
        + rejected
        + checks
        + f'<p class="note">Each submission folder holds predictions.jsonl and meta.json ({_e(required)}).</p>'
        "</body></html>\n"
    )
