"""The check against expectations: each recorded value against the built one, and its report.

:func:`run_checks` compares; the rest is the report every output shares: a system × measure
grid (``leaderboard.md`` and ``index.html`` lay it out as a table), each cell's text, the legend,
the summary line and the terminal's one line per check.
"""

from __future__ import annotations

from collections.abc import Sequence

from searchtome.leaderboard.expectations import Expectations
from searchtome.leaderboard.results import SHORT, CheckResult, CheckStatus, Entry, scorer_order
from searchtome.leaderboard.text import term_text

EXACT = 1e-9  # "equal": float noise between machines is not a difference
MARKS = {CheckStatus.OK: "✓", CheckStatus.WITHIN: "≈", CheckStatus.FAIL: "✗"}
CHECK_LEGEND = (
    "Each cell is the built value (a fraction); ✓ equals the expected value, ≈ lies within its "
    "tolerance, ✗ lies beyond it or is missing (FAIL). An empty cell was not checked."
)
Grid = list[tuple[str, list[CheckResult | None]]]


def status(actual: float | None, expected: float, tolerance: float) -> CheckStatus:
    if actual is None:
        return CheckStatus.FAIL
    if abs(actual - expected) <= EXACT:
        return CheckStatus.OK
    if abs(actual - expected) <= tolerance + EXACT:
        return CheckStatus.WITHIN
    return CheckStatus.FAIL


def run_checks(expected: Expectations, entries: Sequence[Entry]) -> list[CheckResult]:
    """Each recorded value against the built one, systems in name order."""
    by_name = {e.system: e for e in entries}
    results = []
    for system in sorted(expected.systems):
        entry = by_name.get(system)
        for measure, x in expected.systems[system].items():
            actual = None if entry is None else entry.aggregate.get(measure)
            results.append(
                CheckResult(
                    system,
                    measure,
                    x.value,
                    actual,
                    x.tolerance,
                    status(actual, x.value, x.tolerance),
                )
            )
    return results


def passed(checks: Sequence[CheckResult] | None) -> bool:
    """No check failed (or none was run)."""
    return checks is None or all(c.status is not CheckStatus.FAIL for c in checks)


def summary(checks: Sequence[CheckResult] | None) -> str:
    """``check: OK (0 of 63 failed)``: the last line of every check report."""
    checks = checks or []
    n_fail = sum(c.status is CheckStatus.FAIL for c in checks)
    return f"check: {'FAIL' if n_fail else 'OK'} ({n_fail} of {len(checks)} failed)"


def cell(check: CheckResult, short: bool = False) -> str:
    """The check as one table cell: the value and its mark, the expectation when they differ.

    ``short``: the measure's cut-off lies beyond the system's ranking depth, so the value is
    shown as :data:`SHORT` (the check itself still compares it).
    """
    mark = MARKS[check.status]
    actual = "–" if check.actual is None else f"{check.actual:.4f}"
    if check.status is CheckStatus.OK:
        return f"{SHORT if short else actual} {mark}"
    expected = "–" if check.expected is None else f"{check.expected:.4f}"
    return f"{actual} {mark} (expected {expected} ± {check.tolerance:g})"


def is_short(check: CheckResult, entries: Sequence[Entry]) -> bool:
    """Whether a check's measure lies beyond its system's ranking depth."""
    entry = next((e for e in entries if e.system == check.system), None)
    return entry is not None and entry.short(check.measure)


def grid(checks: Sequence[CheckResult]) -> tuple[list[str], Grid]:
    """The checks as a system × measure grid: (measures, [(system, result or None per measure)])."""
    cells: dict[str, dict[str, CheckResult]] = {}
    for c in checks:
        cells.setdefault(c.system, {})[c.measure] = c
    measures = scorer_order(c.measure for c in checks)
    return measures, [(s, [cells[s].get(m) for m in measures]) for s in cells]


def check_table(checks: Sequence[CheckResult]) -> str:
    """The terminal's report: one line per check, then the summary."""
    lines = ["system  measure  expected  actual  diff  tolerance  status"]
    for c in checks:
        exp = "–" if c.expected is None else f"{c.expected:.4f}"
        act = "–" if c.actual is None else f"{c.actual:.4f}"
        diff = "–" if c.expected is None or c.actual is None else f"{c.actual - c.expected:+.4f}"
        lines.append(
            f"{term_text(c.system)}  {c.measure}  {exp}  {act}  {diff}  {c.tolerance:g}  {c.status}"
        )
    lines.append(summary(checks))
    return "\n".join(lines)
