"""The seed spread on the pages: the tables of :mod:`~searchtome.leaderboard.seeds`' report.

One table model (:class:`SeedTable`: header, cells as text, notes) for both pages, so
``leaderboard.md`` and ``index.html`` cannot disagree; nothing is shown without seed runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from searchtome.leaderboard.html_cells import Cell, Column, Table
from searchtome.leaderboard.results import MAIN_MEASURES, GroupComparison, SeedGroup, SeedReport
from searchtome.leaderboard.seeds import RARE_MEASURE
from searchtome.leaderboard.text import md_escape

HEADING = "Seed spread"


@dataclass
class SeedTable:
    """One table of the section, for both pages: its header, its cells as text, notes below."""

    id: str
    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    text_columns: tuple[int, ...] = ()  # columns of words, not numbers (the first is the name)


def _pm(group: SeedGroup, measure: str) -> str:
    sd = group.sd(measure)
    return f"{group.mean(measure) * 100:.1f}" + ("" if sd is None else f" ± {sd * 100:.1f}")


def _seeds_text(seeds: list[int | None]) -> str:
    return ", ".join("–" if s is None else str(s) for s in seeds)


INTRO = (
    "Systems trained with several seeds: each seed run is a folder <system>-seed<N> whose "
    "meta.json records seed N. The main table and the analyses above show the run named like "
    "the system (its seed is listed first); seed runs are scored on the same queries and take "
    "no rank. Values in %, mean ± sample sd over seeds."
)


def tables(report: SeedReport) -> list[SeedTable]:
    """The section's tables: spread per group, runs, differences, rare-leaf tests."""
    measures = report.groups[0].measures if report.groups else []
    out = [
        SeedTable(
            "seed-spread-table",
            "Mean ± sd over seeds",
            ["System", "Seeds", *measures],
            [
                [g.system, _seeds_text(g.seeds), *(_pm(g, m) for m in measures)]
                for g in report.groups
            ],
            text_columns=(1,),
        ),
        SeedTable(
            "seed-runs",
            "Every run",
            ["System", "Seed", "Folder", *MAIN_MEASURES, "Config differs in"],
            [
                [g.system, _seeds_text([r.seed]), r.path]
                + [f"{r.aggregate[m] * 100:.1f}" for m in MAIN_MEASURES]
                + ["; ".join(r.config_differences) or "–"]
                for g in report.groups
                for r in g.runs
            ],
            text_columns=(2, 3 + len(MAIN_MEASURES)),
        ),
    ]
    b = report.settings.bootstrap
    for c in report.comparisons:
        out += _comparison_tables(c, b)
    return out


def _comparison_tables(c: GroupComparison, replicates: int) -> list[SeedTable]:
    kind = "pre-declared pair" if c.pre_declared else "descriptive"
    rows = [
        [
            t.label,
            t.measure,
            str(t.n_queries),
            f"{t.mean_a * 100:.1f}",
            f"{t.mean_b * 100:.1f}",
            f"{t.diff * 100:+.1f}",
            f"{t.ci_low * 100:+.1f} to {t.ci_high * 100:+.1f}",
            t.p_text(replicates),
            f"{t.p_outperform:.2f}",
        ]
        for t in [*c.overall, *([c.rare_pooled] if c.rare_pooled else [])]
    ]
    notes = [
        f"{c.a} seeds {_seeds_text(c.seeds_a)}; {c.b} seeds {_seeds_text(c.seeds_b)}. Two-level "
        f"bootstrap over questions and seeds ({replicates:,} replicates), two-sided; the ≤ "
        f"{c.rare_max} row is the pre-declared rare-leaf test pooled over seeds. P(A > B): the "
        "share of run pairs in which A's run beats B's (ties ½)."
    ]
    if c.note:
        notes.append(f"Note: {c.note}.")
    diff = SeedTable(
        f"seed-diff-{c.a}-{c.b}",
        f"{c.a} − {c.b} over seeds ({kind})",
        ["Queries", "Measure", "n", c.a, c.b, "Difference", "95% CI", "p", "P(A > B)"],
        rows,
        notes,
        text_columns=(1, 6),
    )
    if not c.rare_runs:
        return [diff]
    seeds_b = list(dict.fromkeys((t.b, t.seed_b) for t in c.rare_runs))
    grid: dict[tuple[str, int | None], list[str]] = {}
    for t in c.rare_runs:
        cell = f"{t.test.diff * 100:+.1f} ({t.test.p_text()})"
        grid.setdefault((t.a, t.seed_a), []).append(cell)
    rare = SeedTable(
        f"seed-rare-{c.a}-{c.b}",
        f"Rare-leaf test per run pair: {c.a} − {c.b}, {RARE_MEASURE} on gold leaves with ≤ "
        f"{c.rare_max} training questions",
        [f"{c.a} (rows) − {c.b} (columns)", *(f"seed {_seeds_text([s])}" for _, s in seeds_b)],
        [[f"seed {_seeds_text([s])}", *cells] for (_, s), cells in grid.items()],
        [
            "Each cell: the difference in points and the two-sided paired randomization p of "
            "that pair of runs (the test the Analyses section runs on the main table's pair)."
        ],
    )
    return [diff, rare]


def markdown_lines(report: SeedReport | None) -> list[str]:
    """The section of ``leaderboard.md`` (nothing without seed runs)."""
    if report is None:
        return []
    lines = [f"## {HEADING}", "", md_escape(INTRO), ""]
    for t in tables(report):
        lines += [f"### {md_escape(t.title)}", ""]
        lines.append("| " + " | ".join(md_escape(h) for h in t.header) + " |")
        lines.append(
            "|"
            + "".join(
                "---|" if i in (0, *t.text_columns) else "---:|" for i in range(len(t.header))
            )
        )
        lines += ["| " + " | ".join(md_escape(x) for x in row) + " |" for row in t.rows]
        lines += ["", *[x for n in t.notes for x in (md_escape(n), "")]]
    return lines


def _kind(table: SeedTable, column: int) -> Literal["name", "text", "num"]:
    if column == 0:
        return "name"
    return "text" if column in table.text_columns else "num"


def html_section(
    report: SeedReport | None, colours: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """The section of ``index.html`` as plain values for the template (``None``: no section).

    ``colours``: each system's page-wide colour, the swatch before its name.
    """
    if report is None:
        return None
    colours = colours or {}
    blocks = []
    for t in tables(report):
        columns = [Column(h, "", _kind(t, i)) for i, h in enumerate(t.header)]
        rows = [
            [Cell(x, colour=colours.get(x, "") if i == 0 else "") for i, x in enumerate(row)]
            for row in t.rows
        ]
        blocks.append(
            {
                "title": t.title,
                "table": Table(t.id, columns, rows, sortable=False),
                "notes": t.notes,
            }
        )
    return {"heading": HEADING, "intro": INTRO, "blocks": blocks}
