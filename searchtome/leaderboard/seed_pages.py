"""The seed spread on the pages: the tables of :mod:`~searchtome.leaderboard.seeds`' report.

One table model (:class:`SeedTable`: header, cells as text, notes) for both pages, so
``leaderboard.md`` and ``index.html`` cannot disagree; nothing is shown without seed runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from searchtome.leaderboard.html_cells import Cell, Column, Table
from searchtome.leaderboard.results import (
    MAIN_MEASURES,
    GroupComparison,
    GroupTest,
    RunPairTest,
    SeedGroup,
    SeedReport,
)
from searchtome.leaderboard.seeds import RARE_MEASURE
from searchtome.leaderboard.text import md_escape, points

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
            ["System", "Seed", "Folder", *MAIN_MEASURES, "Dtype, CPU", "Config differs in"],
            [
                [g.system, _seeds_text([r.seed]), r.path]
                + [f"{r.aggregate[m] * 100:.1f}" for m in MAIN_MEASURES]
                + [r.platform or "–", "; ".join(r.config_differences) or "–"]
                for g in report.groups
                for r in g.runs
            ],
            [
                "Dtype, CPU: as each run's meta.json records them (run_info). Runs that differ "
                "there differ in more than their seed: a group difference can hold the platform "
                "as well."
            ],
            text_columns=(2, 3 + len(MAIN_MEASURES), 4 + len(MAIN_MEASURES)),
        ),
    ]
    b = report.settings.bootstrap
    for c in report.comparisons:
        out += _comparison_tables(c, b)
    return out


def _relation(p: str) -> str:
    """``= 0.012`` or ``< 1.0e-03``: a p's text after the letter p."""
    return p if p.startswith("<") else f"= {p}"


def _ci(low: float, high: float) -> str:
    return f"{points(low)} to {points(high)}"


def _test_row(t: GroupTest, replicates: int, label: str = "", n: str = "") -> list[str]:
    return [
        label or t.label,
        t.measure,
        n or str(t.n_queries),
        f"{t.mean_a * 100:.1f}",
        f"{t.mean_b * 100:.1f}",
        points(t.diff),
        _ci(t.ci_low, t.ci_high),
        t.p_text(replicates),
        t.p_runs_text(),
        f"{t.p_outperform:.2f}",
    ]


def _comparison_tables(c: GroupComparison, replicates: int) -> list[SeedTable]:
    kind = "pre-declared pair" if c.pre_declared else "descriptive"
    rows = [_test_row(t, replicates) for t in [*c.overall, c.rare_pooled] if t is not None]
    if c.rare_pooled and c.rare_leaves:
        leaves = c.rare_leaves
        row = _test_row(
            c.rare_pooled,
            replicates,
            f"≤ {c.rare_max}, gold leaves resampled",
            f"{c.rare_pooled.n_queries} ({leaves.n_leaves} leaves)",
        )
        row[6:8] = [_ci(leaves.ci_low, leaves.ci_high), leaves.p_text(replicates)]
        rows.append(row)
    relabellings = c.overall[0].relabellings if c.overall else 0
    notes = [
        f"{c.a} seeds {_seeds_text(c.seeds_a)}; {c.b} seeds {_seeds_text(c.seeds_b)}. 95% CI and "
        f"p: two-level bootstrap over questions and seeds ({replicates:,} replicates), "
        f"two-sided; the ≤ {c.rare_max} row is the pre-declared rare-leaf test pooled over "
        f"seeds, and the row below it resamples whole gold leaves instead of questions "
        f"(questions on one leaf are not independent). p over runs: exact permutation test "
        f"over the runs alone, each run one value ({relabellings} relabellings; its smallest "
        f"possible p is {2 / relabellings if relabellings else float('nan'):.2f}, marked "
        "floor). P(A > B): the share of run pairs in which A's run beats B's (ties ½)."
    ]
    if c.note:
        notes.append(f"Note: {c.note}.")
    diff = SeedTable(
        f"seed-diff-{c.a}-{c.b}",
        f"{c.a} − {c.b} over seeds ({kind})",
        [
            "Queries",
            "Measure",
            "n",
            c.a,
            c.b,
            "Difference",
            "95% CI",
            "p",
            "p over runs",
            "P(A > B)",
        ],
        rows,
        notes,
        text_columns=(1, 6),
    )
    out = [diff]
    if c.overall_runs:
        out.append(
            _grid(
                c,
                c.overall_runs,
                f"seed-runs-{c.a}-{c.b}",
                f"{RARE_MEASURE} per run pair, all queries: {c.a} − {c.b}",
                "Each cell: the difference in points and the two-sided paired randomization p of "
                "that pair of runs over all queries (one run pair: it holds the questions' "
                "variation, not the seeds').",
                replicates,
            )
        )
    if c.rare_runs:
        out.append(
            _grid(
                c,
                c.rare_runs,
                f"seed-rare-{c.a}-{c.b}",
                f"Rare-leaf test per run pair: {c.a} − {c.b}, {RARE_MEASURE} on gold leaves "
                f"with ≤ {c.rare_max} training questions",
                "Each cell: the difference in points and the two-sided paired randomization p of "
                "that pair of runs (the test the Analyses section runs on the main table's pair), "
                "which treats every question as independent; then the 95% interval and p with "
                f"whole gold leaves resampled ({replicates:,} replicates).",
                replicates,
            )
        )
    return out


def _grid(
    c: GroupComparison,
    pairs: list[RunPairTest],
    table_id: str,
    title: str,
    note: str,
    replicates: int,
) -> SeedTable:
    """One cell per pair of runs: ``a``'s seeds down, ``b``'s across."""
    seeds_b = list(dict.fromkeys((t.b, t.seed_b) for t in pairs))
    grid: dict[tuple[str, int | None], list[str]] = {}
    for t in pairs:
        cell = f"{points(t.test.diff)} ({t.test.p_text()})"
        if t.leaves is not None:
            cell += (
                f"; by leaf {_ci(t.leaves.ci_low, t.leaves.ci_high)}, "
                f"p {_relation(t.leaves.p_text(replicates))}"
            )
        grid.setdefault((t.a, t.seed_a), []).append(cell)
    return SeedTable(
        table_id,
        title,
        [f"{c.a} (rows) − {c.b} (columns)", *(f"seed {_seeds_text([s])}" for _, s in seeds_b)],
        [[f"seed {_seeds_text([s])}", *cells] for (_, s), cells in grid.items()],
        [note],
    )


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
