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
from searchtome.leaderboard.scoring import beyond_depth
from searchtome.leaderboard.systems import SystemCard
from searchtome.leaderboard.text import finite, fmt_p, md_escape, percent, term_text
from searchtome.submissions.validate import ValidationReport

from searchtome.io import PathLike, dumps, write_json
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.structure import STRUCTURE_MEASURES

FORMAT = "searchtome-leaderboard-v1"
MAIN_MEASURES: tuple[str, ...] = ("R@1", "R@3", "nDCG@3")  # the main table's columns and tests
MARK = "†"  # differs significantly from the top system
PAIRED_KEY = "paired_by_training_questions"  # the a − b analysis in leaderboard.json and figures
CURVES_KEY = "learning_curves"  # dev R@1 per epoch: leaderboard.json's key and the figure's
CURVES_TITLE = "Dev R@1 and training loss per epoch of the trained baselines"
SHORT = "—"  # shown instead of a value whose cut-off lies beyond the system's ranking depth
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
    predictions: str = ""  # the predictions file's name inside the submission folder
    depth: int = 0  # the most ids it returned for one query; 0 = unknown
    empty: float = 0.0  # share of queries answered with an empty ranking (macro over domains)
    n_empty: int = 0  # how many

    def short(self, measure: str) -> bool:
        """Whether ``measure``'s cut-off lies beyond this system's ranking depth."""
        return beyond_depth(measure, self.depth)

    @property
    def card(self) -> SystemCard:
        """Type, model, parameters, training data, date and link, from ``meta.json``."""
        return SystemCard.from_meta(self.meta)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["card"] = self.card.to_dict()
        # Values kept for machines, but named: a 3-deep run's R@5 is its R@3.
        out["beyond_depth"] = [m for m in self.aggregate if self.short(m)]
        return out


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

    @property
    def mark(self) -> str:
        """✓ equal, ≈ within tolerance, ✗ FAIL (see :data:`CHECK_LEGEND`)."""
        return {"OK": "✓", "within tolerance": "≈"}.get(self.status, "✗")

    def cell(self, short: bool = False) -> str:
        """The check as one table cell: the value and its mark, the expectation when they differ.

        ``short``: the measure's cut-off lies beyond the system's ranking depth, so the value is
        shown as :data:`SHORT` (the check itself still compares it).
        """
        actual = "–" if self.actual is None else f"{self.actual:.4f}"
        if short and self.status == "OK":
            return f"{SHORT} {self.mark}"
        if self.status == "OK":
            return f"{actual} {self.mark}"
        expected = "–" if self.expected is None else f"{self.expected:.4f}"
        return f"{actual} {self.mark} (expected {expected} ± {self.tolerance:g})"


CHECK_LEGEND = (
    "Each cell is the built value (a fraction); ✓ equals the expected value, ≈ lies within its "
    "tolerance, ✗ lies beyond it or is missing (FAIL). An empty cell was not checked."
)


@dataclass
class Breakdown:
    """Rates of one quantity per bucket per system, with the bucket sizes."""

    title: str
    xlabel: str
    ylabel: str
    buckets: list[str]
    n_queries: list[int]
    values: dict[str, list[float]]  # system → value per bucket
    # Percentile bootstrap interval per system and bucket (empty: not computed).
    ci_low: dict[str, list[float]] = field(default_factory=dict)
    ci_high: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "title": self.title,
            "xlabel": self.xlabel,
            "ylabel": self.ylabel,
            "buckets": list(self.buckets),
            "n_queries": list(self.n_queries),
            "values": {k: list(v) for k, v in self.values.items()},
        }
        if self.ci_low:
            out["ci_low"] = {k: list(v) for k, v in self.ci_low.items()}
            out["ci_high"] = {k: list(v) for k, v in self.ci_high.items()}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class PairedTest:
    """System ``a`` minus system ``b`` on R@1 in one set of queries: the difference and its test."""

    label: str
    n_queries: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_at_floor: bool = False  # at 1/(B+1): no sign flip was as extreme
    mcnemar_p: float | None = None  # exact McNemar p (R@1 is 0/1)
    floor: str = ""  # how a p at its floor is shown: "< 1e-4"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def p_text(self) -> str:
        """``p = 0.012``, or ``p < 1e-4 (exact McNemar p = 3e-12)`` at the floor."""
        if not self.p_at_floor:
            return f"p = {self.p_value:.3g}"
        extra = "" if self.mcnemar_p is None else f" (exact McNemar p = {fmt_p(self.mcnemar_p)})"
        return f"p {self.floor}{extra}"


@dataclass
class PairedAnalysis:
    """``a`` − ``b`` per training-question bucket and on the pre-declared rare-leaf set.

    ``skipped`` says why there is no comparison (a system is missing); then the lists are empty.
    """

    a: str
    b: str
    measure: str
    alternative: str  # "two-sided"
    rare_max: int  # rare leaves: at most this many training questions
    buckets: list[PairedTest] = field(default_factory=list)
    rare: PairedTest | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    skipped: str = ""

    @property
    def title(self) -> str:
        return f"{self.measure}: {self.a} − {self.b} by training questions of the gold leaf"

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "measure": self.measure,
            "alternative": self.alternative,
            "rare_max": self.rare_max,
            "buckets": [t.to_dict() for t in self.buckets],
            "rare": self.rare.to_dict() if self.rare else None,
            "settings": dict(self.settings),
            "skipped": self.skipped,
        }

    def rare_sentence(self) -> str:
        """The rare-leaf test in one sentence (or why it was skipped)."""
        if self.skipped:
            return f"Rare-leaf test not run: {self.skipped}."
        t = self.rare
        if t is None or t.n_queries == 0:
            return f"Rare-leaf test not run: no query's gold leaf has ≤ {self.rare_max} training questions."
        return (
            f"Rare-leaf test (pre-declared; gold leaves with ≤ {self.rare_max} training questions, "
            f"{t.n_queries} queries): {self.measure} {self.a} {t.mean_a * 100:.1f} vs {self.b} "
            f"{t.mean_b * 100:.1f}, difference {t.diff * 100:+.1f} points "
            f"(95% bootstrap CI {t.ci_low * 100:+.1f} to {t.ci_high * 100:+.1f}), "
            f"{self.alternative} paired randomization {t.p_text()}."
        )


@dataclass
class LearningCurve:
    """One trained system's history from its ``meta.json`` (``run_info.notes.training``).

    The lists run per epoch, in epoch order, ``None`` where that epoch recorded no value (dev R@1
    is evaluated every ``eval_every`` epochs only). ``best_epoch`` is the epoch whose adapter the
    run kept for its test predictions. ``adapter`` is the trained adapter's path or cache key:
    systems that name the same one reused one training, so they have one curve between them.
    """

    system: str
    epochs: list[int]
    dev_r1: list[float | None]
    train_loss: list[float | None]
    seconds: list[float | None]  # cumulative wall time at the end of each epoch
    best_epoch: int | None
    dev_queries: int | None
    stopped: str
    adapter: str
    dev_decode: str = ""  # how the dev questions were decoded (config.dev_decode)

    @property
    def best_dev_r1(self) -> float | None:
        """Dev R@1 of the kept epoch (None when it was not evaluated or is not in the history)."""
        by_epoch = dict(zip(self.epochs, self.dev_r1, strict=True))
        return by_epoch.get(self.best_epoch) if self.best_epoch is not None else None

    @property
    def train_seconds(self) -> float | None:
        """Training wall time: the last cumulative time recorded (resumed runs included)."""
        return next((s for s in reversed(self.seconds) if s is not None), None)

    def same_training(self, other: LearningCurve) -> bool:
        """Whether ``other`` reused this adapter: same adapter, same recorded curve."""
        return (
            bool(self.adapter)
            and self.adapter == other.adapter
            and (self.epochs, self.dev_r1) == (other.epochs, other.dev_r1)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "best_dev_r1": self.best_dev_r1,
            "train_seconds": self.train_seconds,
        }


def curve_groups(curves: dict[str, LearningCurve]) -> list[list[str]]:
    """The distinct curves: systems that share one training grouped, in ``curves``' order.

    dsi and dsi-constrained reuse one adapter; plotting or tabulating them apart would show one
    training twice as if it were two.
    """
    groups: list[list[str]] = []
    for system, curve in curves.items():
        group = next((g for g in groups if curves[g[0]].same_training(curve)), None)
        if group is None:
            groups.append([system])
        else:
            group.append(system)
    return groups


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
    paired: PairedAnalysis | None = None
    curves: dict[str, LearningCurve] = field(default_factory=dict)  # system → its training
    colours: dict[str, str] = field(default_factory=dict)  # system → its colour, page-wide
    seeds: Any = None  # a seeds.SeedReport when some system has seed runs (docs/seeds.md)

    def figure_title(self, key: str) -> str:
        """The title of the figure stored under ``key``."""
        if key in self.analyses:
            return self.analyses[key].title
        if key == CURVES_KEY:
            return CURVES_TITLE
        return self.paired.title if self.paired is not None else key

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
            "exists nowhere in the book; Empty: the ranking is empty (no id at all). "
            f"Tie rule: {s['tie_rule']}."
        )

    # -- tables --
    @property
    def best(self) -> str | None:
        return self.entries[0].system if self.entries else None

    def _cell(self, entry: Entry, measure: str, value: float, marked: bool) -> str:
        if entry.short(measure):
            return SHORT
        return f"{percent(value)}{MARK}" if marked else percent(value)

    def short_note(self, measures: tuple[str, ...] | list[str]) -> str:
        """The footnote for :data:`SHORT` cells among ``measures``; empty when there are none."""
        short = [
            f"{e.system} ({e.depth} deep: {', '.join(m for m in measures if e.short(m))})"
            for e in self.entries
            if any(e.short(m) for m in measures)
        ]
        if not short:
            return ""
        return (
            f"{SHORT}: ranking shorter than k, the measure's cut-off; the system returned fewer "
            f"ids per query than the measure reads, so no value is shown: {'; '.join(short)}."
        )

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
                    f"{e.empty * 100:.2f}",
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
        "Empty",
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
        note = self.short_note(MAIN_MEASURES)
        return "\n".join(lines) + "\n" + (f"\n{md_escape(note)}\n" if note else "")

    def domain_table(self) -> str:
        """Every domain side by side, one row per system, the macro average last (markdown).

        With one domain the main table is that domain's table: a sentence says so instead.
        """
        if len(self.domains) == 1:
            return f"Every query is in one domain, {md_escape(self.domains[0])}: the main table is its table.\n"
        scopes = [*self.domains, "Average"]
        header = [f"{md_escape(d)} {m}" for d in scopes for m in MAIN_MEASURES]
        lines = [
            "| # | System | " + " | ".join(header) + " |",
            "|---:|---|" + "---:|" * len(header),
        ]
        for e in self.entries:
            cells = []
            for scope in scopes:
                values = e.aggregate if scope == "Average" else e.per_domain.get(scope)
                marks = e.marks if scope == "Average" else e.domain_marks.get(scope, {})
                cells += [
                    "–" if values is None else self._cell(e, m, values[m], marks.get(m, False))
                    for m in MAIN_MEASURES
                ]
            lines.append(f"| {e.rank} | {md_escape(e.system)} | " + " | ".join(cells) + " |")
        note = self.short_note(MAIN_MEASURES)
        return "\n".join(lines) + "\n" + (f"\n{md_escape(note)}\n" if note else "")

    def print_main_table(self, file: IO[str] | None = None) -> None:
        out = file or sys.stdout
        header = list(self.MAIN_HEADER)
        rows = [[term_text(c) for c in r] for r in self.main_table_rows()]
        widths = [
            max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
            for i, h in enumerate(header)
        ]
        print(
            f"SearchTome leaderboard, {self.split} split (macro average over domains, %; "
            f"{MARK} = differs significantly from {term_text(self.best)})",
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
                f"{term_text(c.system)}  {c.measure}  {exp}  {act}  {diff}  {c.tolerance:g}  {c.status}"
            )
        lines.append(self.check_summary())
        return "\n".join(lines)

    def check_grid(self) -> tuple[list[str], list[tuple[str, list[CheckResult | None]]]]:
        """The checks as a system × measure grid: (measures, [(system, result or None per measure)])."""
        cells: dict[str, dict[str, CheckResult]] = {}
        for c in self.checks or []:
            cells.setdefault(c.system, {})[c.measure] = c
        seen = {c.measure for c in self.checks or []}
        # The scorer's order (R@1 … RR@10, then the structure rates), then any other measure.
        known = [m for m in (*DEFAULT_MEASURES, *STRUCTURE_MEASURES) if m in seen]
        measures = known + sorted(seen - set(known))
        return measures, [(s, [cells[s].get(m) for m in measures]) for s in cells]

    def check_short(self, check: CheckResult) -> bool:
        """Whether a check's measure lies beyond its system's ranking depth."""
        entry = next((e for e in self.entries if e.system == check.system), None)
        return entry is not None and entry.short(check.measure)

    def check_summary(self) -> str:
        """``check: OK (0 of 63 failed)``: the last line of every check report."""
        checks = self.checks or []
        n_fail = sum(c.status == "FAIL" for c in checks)
        return f"check: {'FAIL' if n_fail else 'OK'} ({n_fail} of {len(checks)} failed)"

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
            "analyses": {
                **{k: b.to_dict() for k, b in self.analyses.items()},
                **({PAIRED_KEY: self.paired.to_dict()} if self.paired is not None else {}),
            },
            "figures": {k: f"figures/{p.name}" for k, p in self.figures.items()},
            CURVES_KEY: self.curves_dict(),
            **({"seeds": self.seeds.to_dict()} if self.seeds is not None else {}),
            "colours": dict(self.colours),
            "rejected": [
                _rejected_dict(r, self.settings["submissions_root"]) for r in self.rejected
            ],
        }

    def curves_dict(self) -> dict[str, Any]:
        """Each curve as data, with the system whose training it shares (``None``: its own)."""
        out = {}
        for group in curve_groups(self.curves):
            for system in group:
                shared = group[0] if system != group[0] else None
                out[system] = {**self.curves[system].to_dict(), "same_adapter_as": shared}
        return out

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
        "n_errors": report.error_count,  # every error, not only the kept ones
    }


def relative(path: PathLike, root: str) -> str:
    """``path`` relative to ``root`` when it lies below it, else as given."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
