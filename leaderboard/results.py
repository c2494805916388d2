"""The leaderboard's result types: what a build produced, before any file is written.

Everything below this module renders these types (``markdown``, ``html``, ``figures``, and
:meth:`LeaderboardResult.to_json`); ``build`` fills them. The small markdown tables live here
because the page, the HTML page and the terminal all print the same rows.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from searchtome.leaderboard.comparison import ComparisonReport
from searchtome.leaderboard.text import finite, md_escape, percent
from searchtome.submissions.validate import ValidationReport

from searchtome.io import PathLike, dumps, write_json
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.structure import STRUCTURE_MEASURES

FORMAT = "searchtome-leaderboard-v1"
MAIN_MEASURES: tuple[str, ...] = ("R@1", "R@3", "nDCG@3")  # the main table's columns and tests
MARK = "†"  # differs significantly from the top system
# Submission metadata shown on the pages, in this order.
META_ORDER = (
    "description",
    "url",
    "models",
    "trained_on",
    "hardware",
    "date",
    "dataset_revision",
    "license",
    "command",
)


@dataclass
class Entry:
    rank: int
    system: str
    aggregate: dict[str, float]
    micro: dict[str, float]
    per_domain: dict[str, dict[str, float]]
    per_book: dict[str, dict[str, float]]
    meta: dict[str, Any]
    path: str
    n_queries: int
    validation: dict[str, Any]
    marks: dict[str, bool] = field(default_factory=dict)  # measure → differs from the top system
    domain_marks: dict[str, dict[str, bool]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CheckResult:
    system: str
    measure: str
    expected: float | None
    actual: float | None
    tolerance: float
    status: str  # "OK", "within tolerance", "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Breakdown:
    """Rates of one quantity per bucket per system, with the bucket sizes."""

    title: str
    xlabel: str
    ylabel: str
    buckets: list[str]
    n_queries: list[int]
    values: dict[str, list[float]]  # system → value per bucket

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "xlabel": self.xlabel,
            "ylabel": self.ylabel,
            "buckets": list(self.buckets),
            "n_queries": list(self.n_queries),
            "values": {k: list(v) for k, v in self.values.items()},
        }


@dataclass
class LeaderboardResult:
    """Everything one leaderboard build produced: ranked entries, tests, analyses, checks."""

    out_dir: Path
    split: str
    dataset: dict[str, Any]
    entries: list[Entry]
    rejected: list[ValidationReport]
    comparison: ComparisonReport | None
    analyses: dict[str, Breakdown]
    figures: dict[str, Path]
    settings: dict[str, Any]
    domains: list[str]
    checks: list[CheckResult] | None = None

    # -- text --
    def dataset_line(self) -> str:
        """The dataset's name and revision, for the page headers."""
        ds = self.dataset
        name = ds.get("name") or "dataset"
        rev = ds.get("revision") or ds.get("version")
        return f"{name}{f' (revision {rev})' if rev else ''}"

    def settings_text(self) -> str:
        """How the values were computed and tested, in one paragraph."""
        s = self.settings
        return (
            f"Values are macro averages over domains, in %. {MARK} marks a value that differs "
            f"significantly from the top system ({self.best}): two-sided paired randomization test, "
            f"{s['permutations']:,} sign flips, seed {s['seed']}, Holm–Bonferroni correction within each "
            f"measure (overall tests and per-domain tests are separate families), alpha = {s['alpha']}. "
            "Non-leaf@1: the top answer is a ToC node that is not a leaf; Invalid@1: the top answer "
            f"exists nowhere in the book. Tie rule: {s['tie_rule']}."
        )

    # -- tables --
    @property
    def best(self) -> str | None:
        return self.entries[0].system if self.entries else None

    def _cell(self, entry: Entry, measure: str, value: float, marked: bool) -> str:
        return f"{percent(value)}{MARK}" if marked else percent(value)

    def main_table_rows(self) -> list[list[str]]:
        rows = []
        for e in self.entries:
            rows.append(
                [
                    str(e.rank),
                    e.system,
                    *(
                        self._cell(e, m, e.aggregate[m], e.marks.get(m, False))
                        for m in MAIN_MEASURES
                    ),
                    f"{e.aggregate['NonLeaf@1'] * 100:.2f}",
                    f"{e.aggregate['Invalid@1'] * 100:.2f}",
                    percent(e.micro["R@1"]),
                    str(e.n_queries),
                ]
            )
        return rows

    MAIN_HEADER = (
        "#",
        "System",
        "R@1",
        "R@3",
        "nDCG@3",
        "Non-leaf@1",
        "Invalid@1",
        "R@1 micro",
        "Queries",
    )

    def main_table(self) -> str:
        """The main table as markdown (values: macro average over domains, in %)."""
        lines = [
            "| " + " | ".join(self.MAIN_HEADER) + " |",
            "|---:|---|" + "---:|" * (len(self.MAIN_HEADER) - 2),
        ]
        for row in self.main_table_rows():
            row[1] = md_escape(row[1])
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines) + "\n"

    def domain_table_rows(self) -> list[tuple[str, list[list[str]]]]:
        """Groups (domain, rows) like the paper's Table 4, the macro average last."""
        groups = []
        for domain in [*self.domains, "Average"]:
            rows = []
            for e in self.entries:
                values = e.aggregate if domain == "Average" else e.per_domain.get(domain)
                if values is None:
                    continue
                marks = e.marks if domain == "Average" else e.domain_marks.get(domain, {})
                rows.append(
                    [
                        e.system,
                        *(self._cell(e, m, values[m], marks.get(m, False)) for m in MAIN_MEASURES),
                    ]
                )
            groups.append((domain, rows))
        return groups

    def domain_table(self) -> str:
        lines = [
            "| Domain | System | " + " | ".join(MAIN_MEASURES) + " |",
            "|---|---|" + "---:|" * len(MAIN_MEASURES),
        ]
        for domain, rows in self.domain_table_rows():
            for i, row in enumerate(rows):
                label = f"**{domain}**" if i == 0 else ""
                lines.append(f"| {label} | {md_escape(row[0])} | " + " | ".join(row[1:]) + " |")
        return "\n".join(lines) + "\n"

    def print_main_table(self, file: IO[str] | None = None) -> None:
        out = file or sys.stdout
        header = list(self.MAIN_HEADER)
        rows = self.main_table_rows()
        widths = [
            max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
            for i, h in enumerate(header)
        ]
        print(
            f"SearchTome leaderboard, {self.split} split (macro average over domains, %; "
            f"{MARK} = differs significantly from {self.best})",
            file=out,
        )
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), file=out)
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)), file=out)

    # -- checks --
    @property
    def check_ok(self) -> bool:
        return self.checks is None or all(c.status != "FAIL" for c in self.checks)

    def check_table(self) -> str:
        if self.checks is None:
            return ""
        lines = ["system  measure  expected  actual  diff  tolerance  status"]
        for c in self.checks:
            exp = "–" if c.expected is None else f"{c.expected:.4f}"
            act = "–" if c.actual is None else f"{c.actual:.4f}"
            diff = (
                "–" if c.expected is None or c.actual is None else f"{c.actual - c.expected:+.4f}"
            )
            lines.append(
                f"{c.system}  {c.measure}  {exp}  {act}  {diff}  {c.tolerance:g}  {c.status}"
            )
        n_fail = sum(c.status == "FAIL" for c in self.checks)
        lines.append(f"check: {'FAIL' if n_fail else 'OK'} ({n_fail} of {len(self.checks)} failed)")
        return "\n".join(lines)

    def expected(self, tolerance: float = 0.005) -> dict[str, Any]:
        return {
            "tolerance": tolerance,
            "split": self.split,
            "systems": {
                e.system: {m: e.aggregate[m] for m in (*DEFAULT_MEASURES, *STRUCTURE_MEASURES)}
                for e in self.entries
            },
        }

    def write_expected(self, path: PathLike, tolerance: float = 0.005) -> Path:
        return write_json(path, self.expected(tolerance))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "dataset": self.dataset,
            "split": self.split,
            "settings": self.settings,
            "domains": self.domains,
            "systems": [e.to_dict() for e in self.entries],
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "analyses": {k: b.to_dict() for k, b in self.analyses.items()},
            "figures": {k: f"figures/{p.name}" for k, p in self.figures.items()},
            "rejected": [
                _rejected_dict(r, self.settings["submissions_root"]) for r in self.rejected
            ],
        }

    def to_json(self) -> str:
        """``leaderboard.json``: :meth:`to_dict`, with the checks when there were any."""
        data = self.to_dict()
        if self.checks is not None:
            data["checks"] = [c.to_dict() for c in self.checks]
        return dumps(finite(data))


def _rejected_dict(report: ValidationReport, root: str) -> dict[str, Any]:
    return {
        "path": relative(report.path, root),
        "system": report.system,
        "errors": [str(p).replace(str(Path(root)) + "/", "") for p in report.errors],
        "n_errors": len(report.errors),
    }


def relative(path: PathLike, root: str) -> str:
    """``path`` relative to ``root`` when it lies below it, else as given."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
