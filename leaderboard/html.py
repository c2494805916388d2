"""``index.html``: the leaderboard as one self-contained page.

The page loads nothing from anywhere: CSS and the one small script are inline (admitted by the
page's Content-Security-Policy, see :mod:`~searchtome.leaderboard.html_assets`), figures are
``data:`` URIs. It reads fully without JavaScript; the script adds sorting, a filter and domain
tabs. Every string that comes from a submission or the dataset goes through :func:`html.escape`;
external links are made only from ``http(s)`` URLs, and the links to each submission's files are
relative to the page, so they work from a checkout and from a static host alike.
"""

from __future__ import annotations

import base64
import math
import os
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from searchtome.leaderboard.comparison import OVERALL, PairTest
from searchtome.leaderboard.costs import Cost, fmt_count, fmt_mib, fmt_seconds
from searchtome.leaderboard.curves import (
    CURVES_HEADING,
    TABLE_NOTE,
    curve_grid,
    curve_intro,
    curve_notes,
)
from searchtome.leaderboard.html_assets import CSP, CSS, SCRIPT
from searchtome.leaderboard.results import (
    CHECK_LEGEND,
    CURVES_KEY,
    MAIN_MEASURES,
    MARK,
    META_ORDER,
    SHORT,
    Entry,
    LeaderboardResult,
)
from searchtome.leaderboard.text import percent
from searchtome.submissions.schema import META_FILE, META_REQUIRED


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


@dataclass(frozen=True)
class Column:
    label: str
    first: Literal["asc", "desc", ""] = "desc"  # first click's order; "" = not sortable
    kind: Literal["num", "name", "text"] = "num"
    title: str = ""


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | None = None  # the numeric sort key (data-v); None = sort by text
    title: str = ""
    css: str = ""
    markup: str = ""  # trusted HTML built here (links); replaces the escaped text


def _th(col: Column) -> str:
    attrs = ' class="name"' if col.kind != "num" else ""
    attrs += f' data-first="{col.first}"' if col.first else ""
    attrs += f' title="{_e(col.title)}"' if col.title else ""
    return f"<th{attrs}>{_e(col.label)}</th>"


def _td(col: Column, cell: Cell) -> str:
    classes = [cell.css] if cell.css else []
    classes += {"name": ["name", "sys"], "text": ["text"], "num": []}[col.kind]
    attrs = f' class="{" ".join(classes)}"' if classes else ""
    if col.kind == "num" and col.first:
        attrs += f' data-v="{"" if cell.sort is None else repr(cell.sort)}"'
    attrs += f' title="{_e(cell.title)}"' if cell.title else ""
    return f"<td{attrs}>{cell.markup or _e(cell.text)}</td>"


def _table(table_id: str, columns: list[Column], rows: list[list[Cell]]) -> str:
    """A table whose sortable columns the page's script turns into buttons."""
    head = "".join(_th(c) for c in columns)
    body = "".join(
        f'<tr data-i="{i}">'
        + "".join(_td(c, x) for c, x in zip(columns, row, strict=True))
        + "</tr>"
        for i, row in enumerate(rows)
    )
    return (
        f'<div class="scroll"><table id="{_e(table_id)}" class="sortable">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _bold_best(rows: list[list[Cell]], columns: list[int]) -> list[list[Cell]]:
    """Mark each column's highest value ``best`` (every tied one), unless all values are equal."""
    for j in columns:
        values = [r[j].sort for r in rows if r[j].sort is not None]
        if not values or max(values) == min(values):
            continue
        top = max(values)
        for r in rows:
            if r[j].sort is not None and r[j].sort >= top - 1e-12:
                r[j] = Cell(r[j].text, r[j].sort, r[j].title, f"{r[j].css} best".strip())
    return rows


# -- the bootstrap intervals: every test is "top system vs this one" ------------------------


def _finite(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def _points(fraction: float) -> str:
    """A signed difference in points; ``0.0`` rather than ``-0.0`` when it rounds to nothing."""
    text = f"{fraction * 100:+.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text


def _pair(result: LeaderboardResult, system: str, measure: str, scope: str) -> PairTest | None:
    if result.comparison is None or system == result.best or result.best is None:
        return None
    try:
        return result.comparison.test(result.best, system, measure, scope)
    except KeyError:
        return None


def _ci_title(result: LeaderboardResult, e: Entry, measure: str, scope: str, value: float) -> str:
    """A cell's hover text: its difference from the top system with the 95% bootstrap interval."""
    head = f"{e.system}, {measure} {percent(value)}"
    if e.system == result.best:
        return f"{head}: the top system; the other rows show their difference from it."
    t = _pair(result, e.system, measure, scope)
    if t is None:
        return head
    settings = result.comparison.settings if result.comparison else {}
    text = f"{head}: {_points(-t.diff)} points vs {result.best}"
    if _finite(t.ci_low) and _finite(t.ci_high):
        level = round(settings.get("ci_level", 0.95) * 100)
        text += f", {level}% paired-bootstrap CI [{_points(-t.ci_high)}, {_points(-t.ci_low)}]"
    else:
        text += " (no bootstrap interval: built with --bootstrap 0)"
    correction = settings.get("correction_name", "Holm–Bonferroni")
    return text + f"; {correction}-adjusted p = {t.p_adjusted:.2g}"


def _delta_cell(result: LeaderboardResult, e: Entry, measure: str) -> Cell:
    """The compact interval column: difference from the top system and its bootstrap CI."""
    if e.system == result.best:
        return Cell("top", 0.0, "the top system: the differences are from it")
    t = _pair(result, e.system, measure, OVERALL)
    if t is None:
        return Cell("–")
    text = _points(-t.diff)
    if _finite(t.ci_low) and _finite(t.ci_high):
        text += f" [{_points(-t.ci_high)}, {_points(-t.ci_low)}]"
    return Cell(text, -t.diff, css="ci")


def _measure_cell(
    result: LeaderboardResult, e: Entry, measure: str, values: dict[str, float], scope: str
) -> Cell:
    marks = e.marks if scope == OVERALL else e.domain_marks.get(scope, {})
    value = values[measure]
    if e.short(measure):
        return Cell(SHORT, None, f"{e.system}, {measure}: ranking shorter than k ({e.depth} deep)")
    text = f"{percent(value)}{MARK if marks.get(measure) else ''}"
    return Cell(text, value, _ci_title(result, e, measure, scope, value))


# -- the tables ----------------------------------------------------------------------------

RANK = Column("#", "asc")
SYSTEM = Column("System", "asc", "name")
DELTA_TITLE = (
    "R@1 minus the top system's, in points, with its 95% paired-bootstrap interval "
    "(hover any measure for its own)"
)


def _main_table(result: LeaderboardResult) -> str:
    columns = [
        RANK,
        SYSTEM,
        *(Column(m) for m in MAIN_MEASURES),
        Column("Δ R@1 vs top [95% CI]", title=DELTA_TITLE),
        Column("Non-leaf@1", "asc", title="top answer is a ToC node that is not a leaf (%)"),
        Column("Invalid@1", "asc", title="top answer exists nowhere in the book (%)"),
        Column("R@1 micro", title="mean over queries, not over domains"),
        Column("Queries"),
    ]
    rows = []
    for e in result.entries:
        agg = e.aggregate
        rows.append(
            [
                Cell(str(e.rank), e.rank),
                Cell(e.system),
                *(_measure_cell(result, e, m, agg, OVERALL) for m in MAIN_MEASURES),
                _delta_cell(result, e, "R@1"),
                Cell(f"{agg['NonLeaf@1'] * 100:.2f}", agg["NonLeaf@1"]),
                Cell(f"{agg['Invalid@1'] * 100:.2f}", agg["Invalid@1"]),
                Cell(percent(e.micro["R@1"]), e.micro["R@1"]),
                Cell(str(e.n_queries), e.n_queries),
            ]
        )
    best_columns = [2, 3, 4, 8]  # R@1, R@3, nDCG@3, R@1 micro: higher is better
    note = result.short_note(MAIN_MEASURES)
    table = _table("main-table", columns, _bold_best(rows, best_columns))
    return table + (f'<p class="note">{_e(note)}</p>' if note else "")


def _domain_section(result: LeaderboardResult) -> str:
    """Tabs (plain in-page links without the script), one table per domain."""
    if len(result.domains) < 2:
        if not result.domains:
            return ""
        return (
            f'<p class="note" id="one-domain">Every query is in one domain, '
            f"{_e(result.domains[0])}: the main table is its table.</p>"
        )
    tabs, panels = [], []
    columns = [RANK, SYSTEM, *(Column(m) for m in MAIN_MEASURES)]
    for i, domain in enumerate(result.domains):
        rows = [
            [
                Cell(str(e.rank), e.rank),
                Cell(e.system),
                *(_measure_cell(result, e, m, e.per_domain[domain], domain) for m in MAIN_MEASURES),
            ]
            for e in result.entries
            if domain in e.per_domain
        ]
        table = _table(f"domain-table-{i}", columns, _bold_best(rows, [2, 3, 4]))
        tabs.append(
            f'<a href="#domain-{i}" id="tab-{i}" role="tab" aria-controls="domain-{i}">'
            f"{_e(domain)}</a>"
        )
        panels.append(
            f'<section id="domain-{i}" class="domain" role="tabpanel" aria-labelledby="tab-{i}">'
            f"<h3>{_e(domain)}</h3>{table}</section>"
        )
    return (
        '<p class="note">The main table is the macro average over these domains; '
        f"{MARK} here comes from the per-domain tests.</p>"
        f'<nav class="tabs" role="tablist" aria-label="Domain">{"".join(tabs)}</nav>'
        + "".join(panels)
    )


def submission_href(result: LeaderboardResult, e: Entry, name: str) -> str:
    """The URL of a file in ``e``'s submission folder, relative to the page's folder."""
    folder = Path(result.settings["submissions_root"]) / e.path
    rel = os.path.relpath(folder.resolve(), Path(result.out_dir).resolve())
    return quote(Path(rel, name).as_posix())


def _file_links(result: LeaderboardResult, e: Entry) -> str:
    names = [n for n in (e.predictions, META_FILE) if n]
    return " · ".join(f'<a href="{_e(submission_href(result, e, n))}">{_e(n)}</a>' for n in names)


COST_COLUMNS: list[tuple[str, Column, Any]] = [
    (
        "wall_time_s",
        Column("Wall time", "asc", title="run_info.wall_time_s: the baseline call"),
        fmt_seconds,
    ),
    (
        "peak_rss_mib",
        Column(
            "Peak memory", "asc", title="run_info.peak_rss_mib: the process's RSS high-water mark"
        ),
        fmt_mib,
    ),
    (
        "peak_gpu_mib",
        Column("Peak GPU memory", "asc", title="run_info.peak_gpu_mib"),
        fmt_mib,
    ),
    ("parameters", Column("Parameters", "asc", title="run_info.parameters"), fmt_count),
]


def _cost_section(result: LeaderboardResult) -> str:
    """Cost columns from each run's ``meta.json`` (those no run records are left out)."""
    costs = {e.system: Cost.from_meta(e.meta) for e in result.entries}
    present = [
        (key, col, fmt)
        for key, col, fmt in COST_COLUMNS
        if any(getattr(c, key) is not None for c in costs.values())
    ]
    columns = [RANK, SYSTEM, Column("R@1"), *(col for _, col, _ in present)]
    columns += [Column("Hardware", "asc", "text"), Column("Files", "", "text")]
    rows = []
    for e in result.entries:
        cost = costs[e.system]
        cells = [
            Cell(str(e.rank), e.rank),
            Cell(e.system),
            Cell(percent(e.aggregate["R@1"]), e.aggregate["R@1"]),
        ]
        for key, _, fmt in present:
            value = getattr(cost, key)
            cells.append(Cell("–") if value is None else Cell(fmt(value), value))
        cells.append(Cell(cost.hardware or "–"))
        cells.append(Cell("", markup=_file_links(result, e)))
        rows.append(cells)
    shown = {key for key, _, _ in present}
    missing = [col.label.lower() for key, col, _ in COST_COLUMNS if key not in shown]
    note = (
        "From each submission's meta.json: run_info (wall time of the baseline call, not dataset "
        "loading; the process's peak RSS) and hardware; – where a run does not record it."
    )
    if missing:
        names = ", ".join(missing)
        note += f" Not recorded by any run here, so not shown: {_e(names)}."
    return _table("cost-table", columns, rows) + f'<p class="note">{note}</p>'


# -- the other sections --------------------------------------------------------------------


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


def _submissions(result: LeaderboardResult) -> str:
    subs = []
    for e in result.entries:
        items = f"<dt>files</dt><dd>{_file_links(result, e)}</dd>"
        items += "".join(
            f"<dt>{_e(key)}</dt><dd>{_meta_value(key, e.meta[key])}</dd>"
            for key in META_ORDER
            if key in e.meta
        )
        subs.append(
            f'<section class="submission"><h3>{_e(e.system)}</h3><dl>{items}</dl></section>'
        )
    return f'<h2 id="submissions">Submissions</h2>{"".join(subs)}' if subs else ""


def _rejected(result: LeaderboardResult) -> str:
    if not result.rejected:
        return ""
    items = "".join(
        f"<li><code>{_e(r.path)}</code>: {len(r.errors)} error{'s' if len(r.errors) != 1 else ''}"
        f"<pre>{_e(chr(10).join(r.lines(10)))}</pre></li>"
        for r in result.rejected
    )
    return f'<h2 id="rejected">Rejected submissions</h2><ul>{items}</ul>'


CHECK_CSS = {"OK": "ok", "within tolerance": "near", "FAIL": "fail"}


def _checks(result: LeaderboardResult) -> str:
    """The check report as a system × measure table, like ``leaderboard.md``'s."""
    if result.checks is None:
        return ""
    measures, grid = result.check_grid()
    columns = [Column("System", "", "name"), *(Column(m, "") for m in measures)]
    rows = [
        [Cell(system)]
        + [
            Cell("") if c is None else Cell(c.cell(result.check_short(c)), css=CHECK_CSS[c.status])
            for c in cells
        ]
        for system, cells in grid
    ]
    table = _table("check-table", columns, rows).replace(' class="sortable"', "")
    note = result.short_note(measures)
    return (
        f'<h2 id="checks">Check against expectations</h2>{table}'
        + (f'<p class="note">{_e(note)}</p>' if note else "")
        + f'<p class="note">{_e(CHECK_LEGEND)}</p><p><strong>{_e(result.check_summary())}</strong></p>'
    )


def question_model_note(dataset: dict[str, Any]) -> str | None:
    """Why this dataset's questions are weak, when a small local model wrote them; else None.

    The build records the question writer in the manifest's ``generation`` (``model``,
    ``endpoint_kind``, and for a local model a ``note``; older manifests keep them flat).
    """
    gen = dataset.get("generation")
    gen = gen if isinstance(gen, dict) else {}
    model = str(gen.get("model") or dataset.get("model") or "")
    kind = str(gen.get("endpoint_kind") or dataset.get("endpoint_kind") or "")
    if "smollm" not in model.lower() and kind != "local":
        return None
    note = gen.get("note")
    if isinstance(note, str) and note:
        return note
    return f"Questions were generated offline by the local model {model or '(not recorded)'}."


def _banner(result: LeaderboardResult) -> str:
    note = question_model_note(result.dataset)
    if note is None:
        return ""
    # The recorded note marks commands with backticks; show them as code.
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(note))
    return (
        '<p class="banner" id="question-model" role="note"><strong>Demo-quality questions.</strong> '
        f"{text} These scores show the pipeline working, not how well a system reads a book.</p>"
    )


def _figure(result: LeaderboardResult, key: str, png: bytes) -> str:
    """One figure as a ``data:`` URI (the page's policy admits no other image)."""
    title = result.figure_title(key)
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img id="fig-{_e(key)}" alt="{_e(title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_e(title)}</figcaption></figure>"
    )


def _figures(result: LeaderboardResult, images: dict[str, bytes]) -> str:
    figures = [_figure(result, key, png) for key, png in images.items() if key != CURVES_KEY]
    if result.paired is not None:  # the pre-declared rare-leaf test, in one sentence
        figures.append(f'<p class="note" id="rare-leaf">{_e(result.paired.rare_sentence())}</p>')
    return f'<h2 id="analyses">Analyses</h2>{"".join(figures)}' if figures else ""


def _curves(result: LeaderboardResult, images: dict[str, bytes]) -> str:
    """The learning-curve figure, the per-epoch table (kept epoch bold) and a line per system."""
    if not result.curves:
        return ""
    header, grid = curve_grid(result.curves)
    columns = [Column(h, "") for h in header]
    rows = [[Cell(text, css="best" if best else "") for text, best in row] for row in grid]
    table = _table("curve-table", columns, rows).replace(' class="sortable"', "")
    figure = _figure(result, CURVES_KEY, images[CURVES_KEY]) if CURVES_KEY in images else ""
    items = "".join(
        f"<li><strong>{_e(system)}</strong>: {_e(text)}</li>"
        for system, text in curve_notes(result.curves)
    )
    return (
        f'<h2 id="learning-curves">{_e(CURVES_HEADING)}</h2>'
        f'<p class="note">{_e(curve_intro(result.split))}</p>{figure}{table}'
        f'<p class="note">{_e(TABLE_NOTE)}</p><ul class="curves">{items}</ul>'
    )


def render_html(result: LeaderboardResult, images: dict[str, bytes]) -> str:
    """The page; ``images`` are the figures' PNG bytes, embedded as ``data:`` URIs."""
    n = result.entries[0].n_queries if result.entries else 0
    n_dom = len(result.domains)
    head = (
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # no favicon request
        f"<title>SearchTome leaderboard</title><style>{CSS}</style></head>"
    )
    domains = _domain_section(result)
    return (
        f"<!DOCTYPE html>\n{head}<body><h1>SearchTome leaderboard</h1>"
        f'<p class="sub">{_e(result.dataset_line())}, {_e(result.split)} split, {n:,} queries, '
        f"{n_dom} domain{'s' if n_dom != 1 else ''}; generated by searchtome "
        f"{_e(result.settings['searchtome'])}</p>{_banner(result)}"
        f'<h2 id="main">Main table</h2>{_main_table(result)}'
        f'<p class="note">{_e(result.settings_text())} Bold: the best value in its column. '
        "Hover a value for its difference from the top system and its bootstrap interval; "
        "click a column header to sort.</p>"
        + (f'<h2 id="per-domain">Per domain</h2>{domains}' if domains else "")
        + f'<h2 id="cost">Cost and files</h2>{_cost_section(result)}'
        + _figures(result, images)
        + _curves(result, images)
        + _submissions(result)
        + _rejected(result)
        + _checks(result)
        + '<p class="note">Each submission folder holds a predictions file and meta.json '
        f"({_e(', '.join(META_REQUIRED))}).</p>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
