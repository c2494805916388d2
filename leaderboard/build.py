"""Building the leaderboard: validate, score, test, plot, render, check.

``build_leaderboard(data, submissions, out)`` validates every ``submissions/<system>/`` folder,
scores the valid ones on the split, tests every system against the top one (R@1 order) and
writes ``leaderboard.md``, ``leaderboard.json``, ``index.html`` and ``figures/*.png`` into
``out``. Nothing in the outputs depends on the clock, so regenerating from the same inputs and
seed gives the same bytes.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from searchtome.leaderboard.figures import Breakdown, analyses, plot
from searchtome.leaderboard.scoring import STRUCTURE_MEASURES, score_runs
from searchtome.leaderboard.significance import OVERALL, ComparisonReport, compare
from searchtome.submissions.format import META_FILE, PREDICTION_FILES
from searchtome.submissions.validate import ValidationReport, validate_submission

from searchtome.dataset.layout import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write, dumps, read_json, write_json
from searchtome.metrics.measures import TIE_RULE
from searchtome.version import __version__

log = logging.getLogger(__name__)

FORMAT = "searchtome-leaderboard-v1"
MAIN_MEASURES: tuple[str, ...] = ("R@1", "R@3", "nDCG@3")
SCORED_MEASURES: tuple[str, ...] = ("R@1", "R@3", "R@5", "nDCG@3", "RR@10")
MARK = "†"
FIGURE_FILES = {
    "r1_by_training_questions": "r1_by_training_questions.png",
    "invalid_by_training_questions": "invalid_by_training_questions.png",
    "r1_by_depth": "r1_by_depth.png",
}
EXACT = 1e-9


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


def _fmt(value: float) -> str:
    return f"{value * 100:.1f}"


@dataclass
class LeaderboardResult:
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

    # -- tables --
    @property
    def best(self) -> str | None:
        return self.entries[0].system if self.entries else None

    def _cell(self, entry: Entry, measure: str, value: float, marked: bool) -> str:
        return f"{_fmt(value)}{MARK}" if marked else _fmt(value)

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
                    _fmt(e.micro["R@1"]),
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
        from searchtome.leaderboard.significance import _md_escape

        lines = [
            "| " + " | ".join(self.MAIN_HEADER) + " |",
            "|---:|---|" + "---:|" * (len(self.MAIN_HEADER) - 2),
        ]
        for row in self.main_table_rows():
            row[1] = _md_escape(row[1])
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
        from searchtome.leaderboard.significance import _md_escape

        lines = [
            "| Domain | System | " + " | ".join(MAIN_MEASURES) + " |",
            "|---|---|" + "---:|" * len(MAIN_MEASURES),
        ]
        for domain, rows in self.domain_table_rows():
            for i, row in enumerate(rows):
                label = f"**{domain}**" if i == 0 else ""
                lines.append(f"| {label} | {_md_escape(row[0])} | " + " | ".join(row[1:]) + " |")
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
                e.system: {m: e.aggregate[m] for m in (*SCORED_MEASURES, *STRUCTURE_MEASURES)}
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


def _rejected_dict(report: ValidationReport, root: str) -> dict[str, Any]:
    return {
        "path": _rel(report.path, root),
        "system": report.system,
        "errors": [str(p).replace(str(Path(root)) + "/", "") for p in report.errors],
        "n_errors": len(report.errors),
    }


def _rel(path: PathLike, root: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def discover(submissions_dir: PathLike) -> list[Path]:
    """Submission folders: children holding a predictions file or ``meta.json`` (sorted)."""
    root = Path(submissions_dir)
    if not root.is_dir():
        raise SearchTomeError(f"{root}: no such submissions folder")
    out = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue
        if (child / META_FILE).exists() or any((child / n).exists() for n in PREDICTION_FILES):
            out.append(child)
    return out


def run_checks(expected: Mapping[str, Any], entries: list[Entry]) -> list[CheckResult]:
    default_tol = float(expected.get("tolerance", 0.005))
    systems = expected.get("systems")
    if not isinstance(systems, dict):
        raise SearchTomeError(
            "expectations file: 'systems' must map system names to {measure: value}"
        )
    by_name = {e.system: e for e in entries}
    results = []
    for system in sorted(systems):
        wanted = systems[system]
        entry = by_name.get(system)
        for measure in wanted:
            spec = wanted[measure]
            if isinstance(spec, dict):
                value, tol = spec.get("value"), float(spec.get("tolerance", default_tol))
            else:
                value, tol = spec, default_tol
            if not isinstance(value, int | float):
                raise SearchTomeError(
                    f"expectations file: {system}/{measure}: value must be a number"
                )
            actual = None if entry is None else entry.aggregate.get(measure)
            if actual is None:
                status = "FAIL"
            elif abs(actual - value) <= EXACT:
                status = "OK"
            elif abs(actual - value) <= tol + EXACT:
                status = "within tolerance"
            else:
                status = "FAIL"
            results.append(CheckResult(system, measure, float(value), actual, tol, status))
    return results


def build_leaderboard(
    data_dir: Dataset | PathLike,
    submissions_dir: PathLike,
    out_dir: PathLike,
    *,
    split: str = "test",
    permutations: int = 10_000,
    bootstrap: int = 2_000,
    seed: int = 0,
    alpha: float = 0.05,
    check: PathLike | Mapping[str, Any] | None = None,
) -> LeaderboardResult:
    """Validate, score, test and render every submission; see the module docstring."""
    from searchtome.settings import progress

    dataset = data_dir if isinstance(data_dir, Dataset) else load(data_dir)
    out = Path(out_dir)
    folders = discover(submissions_dir)
    if not folders:
        raise SearchTomeError(
            f"{submissions_dir}: no submission folders (each needs meta.json and predictions.jsonl)"
        )
    accepted, rejected = [], []
    for folder in progress(folders, desc="validating", unit="submission"):
        report = validate_submission(folder, dataset, split)
        if report.ok and report.submission is not None:
            accepted.append((report, report.submission))
        else:
            log.warning("%s: rejected with %d errors", folder, len(report.errors))
            rejected.append(report)
    board = score_runs(
        [s for _, s in accepted], data=dataset, split=split, measures=SCORED_MEASURES
    )

    def sort_key(system: str) -> tuple[Any, ...]:
        agg = board.aggregate(system)
        return (-agg["R@1"], -agg["R@3"], -agg["nDCG@3"], system)

    order = sorted((s.system for s in board.systems), key=sort_key)
    reports = {s.system: r for r, s in accepted}
    submissions_root = str(Path(submissions_dir))
    entries = []
    for rank, system in enumerate(order, 1):
        scores = board.get(system)
        entries.append(
            Entry(
                rank=rank,
                system=system,
                aggregate=board.aggregate(system),
                micro=board.micro(system),
                per_domain=board.per_domain(system),
                per_book=board.per_book(system),
                meta=dict(scores.meta),
                path=_rel(scores.path or "", submissions_root),
                n_queries=len(board.query_ids),
                validation=reports[system].counts.to_dict(),
            )
        )
    comparison = None
    if len(order) >= 2:
        arrays = board.per_query_arrays(MAIN_MEASURES)
        comparison = compare(
            {s: arrays[s] for s in order},
            measures=list(MAIN_MEASURES),
            groups=board.groups(),
            control=order[0],
            permutations=permutations,
            bootstrap=bootstrap,
            seed=seed,
            alpha=alpha,
        )
        for e in entries[1:]:
            for t in comparison.tests:
                if t.b != e.system:
                    continue
                if t.scope == OVERALL:
                    e.marks[t.measure] = t.significant
                else:
                    e.domain_marks.setdefault(t.scope, {})[t.measure] = t.significant
    breakdowns = analyses(board, order)
    figures: dict[str, Path] = {}
    images: dict[str, bytes] = {}
    for key, breakdown in breakdowns.items():
        images[key] = plot(breakdown)
        path = out / "figures" / FIGURE_FILES[key]
        with atomic_write(path, "wb") as fh:
            fh.write(images[key])
        figures[key] = path
    manifest = {k: v for k, v in dataset.manifest.items() if k != "files"}
    settings = {
        "searchtome": __version__,
        "permutations": permutations,
        "bootstrap": bootstrap,
        "seed": seed,
        "alpha": alpha,
        "correction": "holm",
        "control": order[0] if order else None,
        "tie_rule": TIE_RULE,
        "aggregate": "macro mean over domains (each domain weighs the same)",
        "submissions_root": submissions_root,
    }
    result = LeaderboardResult(
        out_dir=out,
        split=split,
        dataset=manifest,
        entries=entries,
        rejected=rejected,
        comparison=comparison,
        analyses=breakdowns,
        figures=figures,
        settings=settings,
        domains=sorted(set(board.queries.domain.tolist())) if board.queries is not None else [],
    )
    if check is not None:
        expected = read_json(check) if not isinstance(check, Mapping) else check
        result.checks = run_checks(expected, entries)
    from searchtome.leaderboard.html import render_html, render_markdown

    data = result.to_dict()
    if result.checks is not None:
        data["checks"] = [c.to_dict() for c in result.checks]
    with atomic_write(out / "leaderboard.json") as fh:
        fh.write(dumps(_finite(data)))
    with atomic_write(out / "leaderboard.md") as fh:
        fh.write(render_markdown(result))
    with atomic_write(out / "index.html") as fh:
        fh.write(render_html(result, images))
    return result


def _finite(obj: Any) -> Any:
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj
