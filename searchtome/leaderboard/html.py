"""``index.html``: the leaderboard as one self-contained page, rendered by jinja2.

The page loads nothing from anywhere: CSS and the one small script are inline (admitted by the
page's Content-Security-Policy, see :mod:`~searchtome.leaderboard.html_assets`), figures are
``data:`` URIs. It reads fully without JavaScript; the script adds sorting, a filter and domain
tabs. This module turns a result into plain values (strings, :class:`Cell` s, :class:`Link` s);
``templates/page.html.j2`` lays them out with autoescaping on, so every string is escaped unless
this package marked it safe (only the stylesheet, the script and the figures' base64 are).
External links are made only from ``http(s)`` URLs, and the links to each submission's files are
relative to the page, so they work from a checkout and from a static host alike.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from searchtome.dataset.manifest import DatasetManifest
from searchtome.leaderboard import budget
from searchtome.leaderboard.checks import CHECK_LEGEND, cell, grid, is_short, summary
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
from searchtome.leaderboard.html_cells import (
    Cell,
    Column,
    Link,
    Table,
    bold_best,
    td_attrs,
    th_attrs,
)
from searchtome.leaderboard.results import (
    CURVES_KEY,
    MAIN_MEASURES,
    MARK,
    SHORT,
    CheckStatus,
    Entry,
    LeaderboardResult,
    dataset_facts,
)
from searchtome.leaderboard.seed_pages import html_section
from searchtome.leaderboard.tables import headline, settings_text, short_note
from searchtome.leaderboard.text import fmt_p, percent, points
from searchtome.submissions.meta import shown_fields
from searchtome.submissions.schema import META_FILE, META_REQUIRED

TEMPLATES = Path(__file__).parent / "templates"  # package data (pyproject's package-data)


# -- the bootstrap intervals: every test is "top system vs this one" ------------------------


def _finite(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


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
    if t is None or result.comparison is None:
        return head
    settings = result.comparison.settings
    text = f"{head}: {points(-t.diff)} points vs {result.best}"
    if _finite(t.ci_low) and _finite(t.ci_high):
        level = round(settings.ci_level * 100)
        text += f", {level}% paired-bootstrap CI [{points(-t.ci_high)}, {points(-t.ci_low)}]"
    else:
        text += " (no bootstrap interval: built with --bootstrap 0)"
    text += f"; {settings.correction_name}-adjusted p = {t.p_adjusted:.2g}"
    if t.p_at_floor:
        text += f"; p {result.comparison.p_text(t)} (the floor of its sign flips)"
        if t.mcnemar_p is not None:
            text += f", exact McNemar p = {fmt_p(t.mcnemar_p)}"
    return text


def _delta_cell(result: LeaderboardResult, e: Entry, measure: str) -> Cell:
    """The compact interval column: difference from the top system and its bootstrap CI."""
    if e.system == result.best:
        return Cell("top", 0.0, "the top system: the differences are from it")
    t = _pair(result, e.system, measure, OVERALL)
    if t is None:
        return Cell("–")
    text = points(-t.diff)
    if _finite(t.ci_low) and _finite(t.ci_high):
        text += f" [{points(-t.ci_high)}, {points(-t.ci_low)}]"
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


def _system(result: LeaderboardResult, e: Entry) -> Cell:
    """A system's name with its swatch: the colour its bars and lines have in every figure."""
    return Cell(e.system, colour=result.colours.get(e.system, ""))


TYPE_TITLE = "lexical, dense, hybrid, generative or zero-shot (run_info.system_type)"


def _card_cells(e: Entry, with_parameters: bool) -> list[Cell]:
    """Type, model, parameters, training data, date and link: what the system is."""
    card = e.card
    params = card.parameters
    link = (Link(card.url, card.url_text, external=True),) if card.url else ()
    nw = "nw"  # short values, kept on one line
    model = Cell(card.model_short, title=card.model, css=nw) if card.model else Cell("–")
    cells = [Cell(card.system_type or "–", css=nw), model]
    if with_parameters:
        cells.append(Cell("–") if params is None else Cell(fmt_count(params), params))
    return [
        *cells,
        Cell(card.trained_on or "–", css=nw),
        Cell(card.date or "–", css=nw),
        Cell("–" if not link else "", links=link, title=card.url, css=nw),
    ]


def _card_columns(result: LeaderboardResult) -> list[Column]:
    """The card's columns; Parameters only when some run records them (like the cost table)."""
    if any(e.card.parameters is not None for e in result.entries):
        return CARD_COLUMNS
    return [c for c in CARD_COLUMNS if c.label != "Parameters"]


CARD_COLUMNS = [
    Column("Type", "asc", "text", TYPE_TITLE),
    Column("Model", "asc", "text", "meta.json models"),
    Column("Parameters", "asc", title="run_info.parameters: learned parameters, a count"),
    Column("Trained on", "asc", "text", "meta.json trained_on: the splits it learned from"),
    Column("Date", "asc", "text", "meta.json date: when the predictions were made"),
    Column("Paper / code", "", "text", "meta.json url"),
]


def _main_table(result: LeaderboardResult) -> Table:
    card_columns = _card_columns(result)
    with_parameters = len(card_columns) == len(CARD_COLUMNS)
    columns = [
        RANK,
        SYSTEM,
        *(Column(m) for m in MAIN_MEASURES),
        Column("Δ R@1 vs top [95% CI]", title=DELTA_TITLE),
        Column("Non-leaf@1", "asc", title="top answer is a ToC node that is not a leaf (%)"),
        Column("Invalid@1", "asc", title="top answer exists nowhere in the book (%)"),
        Column("Empty", "asc", title="queries answered with an empty ranking: no id at all (%)"),
        Column("R@1 micro", title="mean over queries, not over domains"),
        Column("Queries"),
        *card_columns,
    ]
    rows = []
    for e in result.entries:
        agg = e.aggregate
        rows.append(
            [
                Cell(str(e.rank), e.rank),
                _system(result, e),
                *(_measure_cell(result, e, m, agg, OVERALL) for m in MAIN_MEASURES),
                _delta_cell(result, e, "R@1"),
                Cell(f"{agg['NonLeaf@1'] * 100:.2f}", agg["NonLeaf@1"]),
                Cell(f"{agg['Invalid@1'] * 100:.2f}", agg["Invalid@1"]),
                Cell(
                    f"{e.empty * 100:.2f}", e.empty, f"{e.n_empty} of {e.n_queries} rankings empty"
                ),
                Cell(percent(e.micro["R@1"]), e.micro["R@1"]),
                Cell(str(e.n_queries), e.n_queries),
                *_card_cells(e, with_parameters),
            ]
        )
    best_columns = [2, 3, 4, 9]  # R@1, R@3, nDCG@3, R@1 micro: higher is better
    return Table("main-table", columns, bold_best(rows, best_columns))


def _domains(result: LeaderboardResult) -> dict[str, Any] | None:
    """Tabs (plain in-page links without the script), one table per domain."""
    if not result.domains:
        return None
    if len(result.domains) < 2:
        return {
            "one": f"Every query is in one domain, {result.domains[0]}: the main table is its table."
        }
    columns = [RANK, SYSTEM, *(Column(m) for m in MAIN_MEASURES)]
    panels = []
    for i, domain in enumerate(result.domains):
        rows = [
            [
                Cell(str(e.rank), e.rank),
                _system(result, e),
                *(_measure_cell(result, e, m, e.per_domain[domain], domain) for m in MAIN_MEASURES),
            ]
            for e in result.entries
            if domain in e.per_domain
        ]
        panels.append(
            {
                "name": domain,
                "table": Table(f"domain-table-{i}", columns, bold_best(rows, [2, 3, 4])),
            }
        )
    note = (
        "The main table is the macro average over these domains; "
        f"{MARK} here comes from the per-domain tests. Side by side first, then one tab per domain."
    )
    return {"one": "", "note": note, "side": _side_by_side(result), "panels": panels}


def _budget(result: LeaderboardResult) -> dict[str, Any] | None:
    """The token-budget table (values hover like the main table's) and its note."""
    if not budget.shown(result):
        return None
    columns = [RANK, SYSTEM]
    for m in budget.TABLE_MEASURES:
        title = f"Holm-adjusted p of {m} against the top system"
        columns += [Column(m), Column(f"p {m}", "asc", title=title)]
    rows = []
    for e in result.entries:
        row = [Cell(str(e.rank), e.rank), _system(result, e)]
        for m in budget.TABLE_MEASURES:
            p = budget.p_cell(result, e, m)
            sort = None if p in ("top", "–") else _pvalue(result, e, m)
            row += [_measure_cell(result, e, m, e.aggregate, OVERALL), Cell(p, sort)]
        rows.append(row)
    best = [2 + 2 * i for i in range(len(budget.TABLE_MEASURES))]
    table = Table("budget-table", columns, bold_best(rows, best))
    return {"table": table, "note": budget.budget_note(result)}


def _pvalue(result: LeaderboardResult, e: Entry, measure: str) -> float | None:
    t = _pair(result, e.system, measure, OVERALL)
    return None if t is None else t.p_adjusted


def _side_by_side(result: LeaderboardResult) -> Table:
    """Every domain's R@1, R@3 and nDCG@3 in one row per system, domain after domain."""
    columns = [RANK, SYSTEM]
    columns += [
        Column(f"{d} {m}", title=f"{m} on {d}'s queries")
        for d in result.domains
        for m in MAIN_MEASURES
    ]
    rows = []
    for e in result.entries:
        row = [Cell(str(e.rank), e.rank), _system(result, e)]
        for domain in result.domains:
            values = e.per_domain.get(domain)
            row += [
                Cell("–") if values is None else _measure_cell(result, e, m, values, domain)
                for m in MAIN_MEASURES
            ]
        rows.append(row)
    best = list(range(2, len(columns)))
    return Table("domain-side-by-side", columns, bold_best(rows, best))


def submission_href(result: LeaderboardResult, e: Entry, name: str) -> str:
    """The URL of a file in ``e``'s submission folder, relative to the page's folder."""
    folder = Path(result.settings.submissions_root) / e.path
    rel = os.path.relpath(folder.resolve(), Path(result.out_dir).resolve())
    return quote(Path(rel, name).as_posix())


def _file_links(result: LeaderboardResult, e: Entry) -> tuple[Link, ...]:
    names = [n for n in (e.predictions, META_FILE) if n]
    return tuple(Link(submission_href(result, e, n), n) for n in names)


COST_COLUMNS: list[tuple[str, Column, Any]] = [
    (
        "training_s",
        Column(
            "Training",
            "asc",
            title="run_info.training_wall_s (or notes.train_seconds): "
            "the training's wall time, every session of it",
        ),
        fmt_seconds,
    ),
    (
        "prediction_s",
        Column(
            "Prediction",
            "asc",
            title="run_info.prediction_wall_s (or notes.predict_seconds; "
            "the whole wall time of a run that trains nothing)",
        ),
        fmt_seconds,
    ),
    (
        "wall_time_s",
        Column("Wall time", "asc", title="run_info.wall_time_s: the baseline call"),
        fmt_seconds,
    ),
    (
        "training_rss_mib",
        Column("Training peak memory", "asc", title="run_info.phases.training.peak_rss_mib"),
        fmt_mib,
    ),
    (
        "prediction_rss_mib",
        Column("Prediction peak memory", "asc", title="run_info.phases.prediction.peak_rss_mib"),
        fmt_mib,
    ),
    (
        "peak_rss_mib",
        Column("Peak memory", "asc", title="run_info.peak_rss_mib: the run's RSS high-water mark"),
        fmt_mib,
    ),
    (
        "peak_gpu_mib",
        Column("Peak GPU memory", "asc", title="run_info.peak_gpu_mib"),
        fmt_mib,
    ),
    ("parameters", Column("Parameters", "asc", title="run_info.parameters"), fmt_count),
]
REUSED = "trained by another run whose adapter this one loaded (notes.adapter_reused)"


def _cost_cell(cost: Cost, key: str, fmt: Any) -> Cell:
    value = getattr(cost, key)
    if value is None:
        return Cell("–")
    if key == "training_s" and cost.reused_training:
        return Cell(f"{fmt(value)} (reused)", value, REUSED)
    return Cell(fmt(value), value)


def _cost_section(result: LeaderboardResult) -> tuple[Table, str]:
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
            _system(result, e),
            Cell(percent(e.aggregate["R@1"]), e.aggregate["R@1"]),
        ]
        cells += [_cost_cell(cost, key, fmt) for key, _, fmt in present]
        cells.append(Cell(cost.hardware or "–"))
        cells.append(Cell("", links=_file_links(result, e)))
        rows.append(cells)
    shown = {key for key, _, _ in present}
    missing = [col.label.lower() for key, col, _ in COST_COLUMNS if key not in shown]
    note = (
        "From each submission's meta.json: training and prediction apart (run_info.phases, "
        "written by the baseline runner: each phase's wall time and its own RSS high-water "
        "mark; runs written before it recorded the training's time in notes.train_seconds and "
        "the decoding's in notes.predict_seconds), the baseline call's wall time (not dataset "
        "loading), the run's peak RSS (older runs: the process's) and hardware; – where a run "
        "does not record it. (reused): the adapter was trained by another run and loaded here."
    )
    if missing:
        note += f" Not recorded by any run here, so not shown: {', '.join(missing)}."
    return Table("cost-table", columns, rows), note


# -- the other sections --------------------------------------------------------------------


@dataclass(frozen=True)
class MetaValue:
    text: str
    kind: Literal["text", "link", "code", "links"] = "text"
    links: tuple[Link, ...] = ()


def _meta_value(label: str, text: str) -> MetaValue:
    if label == "url" and text.lower().startswith(("http://", "https://")):
        return MetaValue(text, "link")
    if label == "command":
        return MetaValue(text, "code")
    return MetaValue(text)


def _submissions(result: LeaderboardResult) -> list[dict[str, Any]]:
    subs = []
    for e in result.entries:
        links = _file_links(result, e)
        items = [("files", MetaValue("", "links", links))]
        items += [(label, _meta_value(label, text)) for label, text in shown_fields(e.meta)]
        subs.append({"system": e.system, "fields": items})
    return subs


def _rejected(result: LeaderboardResult) -> list[dict[str, str]]:
    return [
        {
            "path": str(r.path),
            "count": f"{len(r.errors)} error{'s' if len(r.errors) != 1 else ''}",
            "lines": "\n".join(r.lines(10)),
        }
        for r in result.rejected
    ]


CHECK_CSS = {CheckStatus.OK: "ok", CheckStatus.WITHIN: "near", CheckStatus.FAIL: "fail"}


def _checks(result: LeaderboardResult) -> dict[str, Any] | None:
    """The check report as a system × measure table, like ``leaderboard.md``'s."""
    if result.checks is None:
        return None
    measures, rows_of = grid(result.checks)
    columns = [Column("System", "", "name"), *(Column(m, "") for m in measures)]
    rows = [
        [Cell(system)]
        + [
            Cell("")
            if c is None
            else Cell(cell(c, is_short(c, result.entries)), css=CHECK_CSS[c.status])
            for c in cells
        ]
        for system, cells in rows_of
    ]
    return {
        "table": Table("check-table", columns, rows, sortable=False),
        "short": short_note(result.entries, measures),
        "legend": CHECK_LEGEND,
        "summary": summary(result.checks),
    }


def question_model_note(manifest: DatasetManifest | Mapping[str, Any]) -> str | None:
    """Why this dataset's questions are weak, when a small local model wrote them; else None."""
    facts = dataset_facts(manifest)
    model = facts.question_model
    if "smollm" not in model.lower() and facts.endpoint_kind != "local":
        return None
    if facts.question_note:
        return facts.question_note
    return f"Questions were generated offline by the local model {model or '(not recorded)'}."


def _banner(result: LeaderboardResult) -> list[tuple[str, bool]]:
    """The banner's note as (text, is code) pieces: the recorded note marks commands with backticks."""
    note = question_model_note(result.dataset)
    if note is None:
        return []
    parts = re.split(r"`([^`]+)`", note)
    return [(text, i % 2 == 1) for i, text in enumerate(parts) if text]


def _figure(result: LeaderboardResult, key: str, png: bytes) -> dict[str, str]:
    """One figure as a ``data:`` URI (the page's policy admits no other image)."""
    return {
        "key": key,
        "title": result.figure_title(key),
        "data": base64.b64encode(png).decode("ascii"),
    }


def _curves(result: LeaderboardResult, images: dict[str, bytes]) -> dict[str, Any] | None:
    """The learning-curve figure, the per-epoch table (kept epoch bold) and a line per system."""
    if not result.curves:
        return None
    header, grid = curve_grid(result.curves)
    columns = [Column(h, "") for h in header]
    rows = [[Cell(text, css="best" if best else "") for text, best in row] for row in grid]
    figure = _figure(result, CURVES_KEY, images[CURVES_KEY]) if CURVES_KEY in images else None
    return {
        "heading": CURVES_HEADING,
        "intro": curve_intro(result.split),
        "figure": figure,
        "table": Table("curve-table", columns, rows, sortable=False),
        "table_note": TABLE_NOTE,
        "notes": curve_notes(result.curves),
    }


def _page(result: LeaderboardResult, images: dict[str, bytes]) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    cost, cost_note = _cost_section(result)
    return {
        "subtitle": f"{headline(result)}; generated by searchtome {result.settings.searchtome}",
        "banner": _banner(result),
        "main": _main_table(result),
        "main_note": short_note(result.entries, MAIN_MEASURES),
        "settings_note": f"{settings_text(result)} Bold: the best value in its column. "
        "Hover a value for its difference from the top system and its bootstrap interval; "
        "click a column header to sort.",
        "domains": _domains(result),
        "budget": _budget(result),
        "cost": cost,
        "cost_note": cost_note,
        "figures": [_figure(result, k, png) for k, png in images.items() if k != CURVES_KEY],
        "rare": result.paired.rare_sentence() if result.paired is not None else "",
        "curves": _curves(result, images),
        "seeds": html_section(result.seeds, result.colours),  # docs/seeds.md; None: no seeds
        "submissions": _submissions(result),
        "rejected": _rejected(result),
        "checks": _checks(result),
        "footer": "Each submission folder holds a predictions file and meta.json "
        f"({', '.join(META_REQUIRED)}).",
    }


@functools.cache
def template() -> Any:
    """The page's jinja2 template (autoescape on, undefined names are errors)."""
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every value is text unless marked safe here
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals.update(
        zip=zip,
        th_attrs=th_attrs,
        td_attrs=td_attrs,
        # Ours, not a submitter's: the stylesheet and the script the CSP admits by its hash.
        css=Markup(CSS),
        script=Markup(SCRIPT),
        csp=CSP,
    )
    return env.get_template("page.html.j2")


def render_html(result: LeaderboardResult, images: dict[str, bytes]) -> str:
    """The page; ``images`` are the figures' PNG bytes, embedded as ``data:`` URIs."""
    return template().render(page=_page(result, images))
