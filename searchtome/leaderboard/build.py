"""Building the leaderboard: validate, score, test, plot, render, check.

``build_leaderboard(data, submissions, out)`` validates every ``submissions/<system>/`` folder,
scores the valid ones on the split, tests every system against the top one (R@1 order) and
writes ``leaderboard.md``, ``leaderboard.json``, ``index.html`` and ``figures/*.png`` into
``out``. Nothing in the outputs depends on the clock, so regenerating from the same inputs and
seed gives the same bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from searchtome.dataset.loader import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write
from searchtome.leaderboard.analyses import DEFAULT_PAIR, Resampling, analyses, paired_analysis
from searchtome.leaderboard.budget import budget_summary
from searchtome.leaderboard.checks import run_checks
from searchtome.leaderboard.comparison import OVERALL, ComparisonReport, PairTest
from searchtome.leaderboard.curves import curve_from_meta, learning_curves
from searchtome.leaderboard.document import FILE, document_of, write_document
from searchtome.leaderboard.expectations import read_expectations
from searchtome.leaderboard.figures import plot, plot_curves, plot_paired
from searchtome.leaderboard.html import render_html
from searchtome.leaderboard.markdown import render_markdown
from searchtome.leaderboard.ranking import rank_key
from searchtome.leaderboard.results import (
    BUDGET_MEASURES,
    CURVES_KEY,
    MAIN_MEASURES,
    PAIRED_KEY,
    Breakdown,
    CheckResult,
    Entry,
    LeaderboardResult,
    LeaderboardSettings,
    LearningCurve,
    PairedAnalysis,
    relative,
)
from searchtome.leaderboard.runlist import read_run_list, select
from searchtome.leaderboard.scoring import Scoreboard, score_runs
from searchtome.leaderboard.seeds import seed_spread, split_seed_runs
from searchtome.leaderboard.significance import CompareOptions, compare
from searchtome.leaderboard.systems import palette, type_problem
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.settings import progress
from searchtome.submissions.meta import parse_run_meta
from searchtome.submissions.problems import Problem
from searchtome.submissions.reader import find_predictions
from searchtome.submissions.schema import META_FILE, PREDICTION_FILES
from searchtome.submissions.validate import ValidationReport, validate_submission
from searchtome.version import __version__

log = logging.getLogger(__name__)

FIGURE_FILES = {
    "r1_by_training_questions": "r1_by_training_questions.png",
    "invalid_by_training_questions": "invalid_by_training_questions.png",
    "r1_by_depth": "r1_by_depth.png",
    PAIRED_KEY: "paired_by_training_questions.png",
    CURVES_KEY: "learning_curves.png",  # only when a submission recorded a training history
}
MAX_REASON = 500  # characters of an exception's text kept as a rejection reason


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


def _unreadable(folder: Path, split: str, field: str, message: str, code: str) -> ValidationReport:
    """A rejection for a folder the validator could not even read: one problem, its reason."""
    prefix = f"{folder}: "
    message = message[len(prefix) :] if message.startswith(prefix) else message
    if len(message) > MAX_REASON:
        message = message[:MAX_REASON] + "…"
    problem = Problem(str(folder), None, field, message, code)
    return ValidationReport(folder, folder.name, split, "unknown", [problem])


def _validate_one(folder: Path, dataset: Dataset, split: str) -> ValidationReport:
    """The folder's report; whatever goes wrong reading it rejects this folder only.

    A submission is untrusted input and the board serves every other one: an error in one
    (no predictions file, two of them, JSON nested past the parser's depth, a number too long
    for ``int``) is that submission's rejection reason, never the whole build's exit.
    """
    try:
        report = validate_submission(folder, dataset, split)
        if report.ok and report.submission is not None:
            _check_history(report)
            problem = type_problem(report.submission.meta)
            if problem:
                where = str(report.path / META_FILE)
                report.problems.append(
                    Problem(where, None, "run_info.system_type", problem, "system-type")
                )
        return report
    except SearchTomeError as exc:
        return _unreadable(folder, split, "submission", str(exc), "unreadable")
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a validator bug or a hostile file: reject, log, go on
        log.debug("%s: validation raised", folder, exc_info=True)
        reason = f"could not be validated ({type(exc).__name__}: {exc})"
        return _unreadable(folder, split, "submission", reason, "unreadable")


def _check_history(report: ValidationReport) -> None:
    """A training history the curves cannot read rejects its submission (with file and field)."""
    assert report.submission is not None
    where = str(report.path / META_FILE)
    try:
        curve_from_meta(report.system, report.submission.meta, where)
    except SearchTomeError as exc:
        message = str(exc).removeprefix(f"{where}: ")
        report.problems.append(Problem(where, None, "run_info", message, "training-history"))


def _duplicate_systems(accepted: list[ValidationReport]) -> list[ValidationReport]:
    """The reports whose system name another accepted folder also claims.

    The folder named like the system keeps it (``submissions/bm25`` is ``bm25``); when none is,
    every claimant is rejected, since nothing says which one the name belongs to.
    """
    by_name: dict[str, list[ValidationReport]] = {}
    for r in accepted:
        by_name.setdefault(r.system, []).append(r)
    out = []
    for name, claimants in by_name.items():
        if len(claimants) < 2:
            continue
        owners = [r for r in claimants if r.path.name == name]
        keep = owners[0] if len(owners) == 1 else None
        for r in claimants:
            if r is keep:
                continue
            others = ", ".join(o.path.name for o in claimants if o is not r)
            r.problems.append(
                Problem(
                    str(r.path / META_FILE),
                    None,
                    "system",
                    f"{name!r} is also the system name of {others}; give each submission a "
                    "distinct 'system' in meta.json",
                    "duplicate-system",
                )
            )
            out.append(r)
    return out


def _validate_all(
    folders: list[Path], dataset: Dataset, split: str
) -> tuple[list[ValidationReport], list[ValidationReport]]:
    """Accepted (with a submission) and rejected reports, in folder order."""
    accepted, rejected = [], []
    for folder in progress(folders, desc="validating", unit="submission"):
        report = _validate_one(folder, dataset, split)
        if report.ok and report.submission is not None:
            accepted.append(report)
        else:
            rejected.append(report)
    duplicates = _duplicate_systems(accepted)
    dropped = {id(r) for r in duplicates}
    accepted = [r for r in accepted if id(r) not in dropped]
    rejected = sorted([*rejected, *duplicates], key=lambda r: folders.index(r.path))
    for report in rejected:
        n = len(report.errors)
        log.warning("%s: rejected with %d error%s", report.path, n, "" if n == 1 else "s")
    return accepted, rejected


def _ranked_entries(
    board: Scoreboard, reports: Mapping[str, ValidationReport], submissions_root: str
) -> list[Entry]:
    """One entry per system, best first by :func:`rank_key` (macro means), then the name."""

    def sort_key(system: str) -> tuple[Any, ...]:
        return (*rank_key(board.aggregate(system)), system)

    order = sorted((s.system for s in board.systems), key=sort_key)
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
                meta=parse_run_meta(scores.meta),
                path=relative(scores.path or "", submissions_root),
                n_queries=len(board.query_ids),
                validation=reports[system].counts.to_dict(),
                predictions=find_predictions(scores.path).name if scores.path else "",
                depth=scores.depth,
                empty=board.empty_rate(system),
                n_empty=scores.n_empty,
            )
        )
    return entries


def _test_against_the_top(
    board: Scoreboard, entries: list[Entry], options: CompareOptions
) -> tuple[ComparisonReport | None, list[Entry]]:
    """Test every system against the top one: the report, and the entries marked where they
    differ significantly."""
    order = [e.system for e in entries]
    if len(order) < 2:
        return None, entries
    # The budget measures join the same test: one Holm family per measure, so the main
    # measures' adjusted p-values are what they were without them.
    tested = [*MAIN_MEASURES, *(m for m in BUDGET_MEASURES if m in board.measures)]
    arrays = board.per_query_arrays(tested)
    comparison = compare(
        {s: arrays[s] for s in order},
        measures=tested,
        groups=board.groups(),
        control=order[0],
        options=options,
    )
    return comparison, [_marked(e, comparison.tests) for e in entries]


def _marked(entry: Entry, tests: list[PairTest]) -> Entry:
    """``entry`` with its tests' verdicts: overall per measure, per domain per measure."""
    marks: dict[str, bool] = {}
    domain_marks: dict[str, dict[str, bool]] = {}
    for t in tests:
        if t.b != entry.system:  # the top system is every test's a, never its b
            continue
        if t.scope == OVERALL:
            marks[t.measure] = t.significant
        else:
            domain_marks.setdefault(t.scope, {})[t.measure] = t.significant
    return replace(entry, marks=marks, domain_marks=domain_marks)


def drawable(breakdown: Breakdown) -> bool:
    """Whether a figure of ``breakdown`` would show anything: a bucket, and a bar above zero."""
    return bool(breakdown.buckets) and any(
        v > 0 for values in breakdown.values.values() for v in values
    )


def _write_figures(
    breakdowns: Mapping[str, Breakdown],
    out: Path,
    colours: Mapping[str, str],
    paired: PairedAnalysis | None = None,
    curves: Mapping[str, LearningCurve] | None = None,
) -> tuple[dict[str, Path], dict[str, bytes]]:
    """The figures that show something (an all-zero or empty chart is left out)."""
    figures: dict[str, Path] = {}
    images: dict[str, bytes] = {
        key: plot(breakdown, dict(colours))
        for key, breakdown in breakdowns.items()
        if drawable(breakdown)
    }
    if paired is not None and paired.buckets:
        images[PAIRED_KEY] = plot_paired(paired)
    if curves:
        images[CURVES_KEY] = plot_curves(dict(curves), dict(colours))
    for key in images:
        path = out / "figures" / FIGURE_FILES[key]
        with atomic_write(path, "wb") as fh:
            fh.write(images[key])
        figures[key] = path
    return figures, images


def _write_pages(result: LeaderboardResult, images: Mapping[str, bytes]) -> None:
    out = result.out_dir
    write_document(out / FILE, document_of(result))
    with atomic_write(out / "leaderboard.md") as fh:
        fh.write(render_markdown(result))
    with atomic_write(out / "index.html") as fh:
        fh.write(render_html(result, dict(images)))


@dataclass(frozen=True)
class LeaderboardOptions:
    """What a build scores and how it tests (the ``leaderboard`` command's options)."""

    split: str = "test"
    permutations: int = 10_000  # sign flips per randomization test
    bootstrap: int = 2_000  # paired-bootstrap resamples per interval
    seed: int = 0
    alpha: float = 0.05
    # The two systems whose R@1 difference is tested per training-question bucket and on rare
    # leaves (the paper's STAIR vs DSI); None leaves the comparison out.
    pair: tuple[str, str] | None = DEFAULT_PAIR

    @property
    def resampling(self) -> Resampling:
        return Resampling(self.bootstrap, self.permutations, self.seed)

    @property
    def testing(self) -> CompareOptions:
        return CompareOptions(
            permutations=self.permutations,
            bootstrap=self.bootstrap,
            seed=self.seed,
            alpha=self.alpha,
        )

    def settings(self, control: str | None, submissions_root: str) -> LeaderboardSettings:
        return LeaderboardSettings(
            searchtome=__version__,
            permutations=self.permutations,
            bootstrap=self.bootstrap,
            seed=self.seed,
            alpha=self.alpha,
            control=control,
            submissions_root=submissions_root,
        )


def _folders(submissions_dir: PathLike, runs: PathLike | None = None) -> list[Path]:
    """Every submission folder, or (``runs``) those the run list names."""
    folders = discover(submissions_dir)
    if not folders:
        raise SearchTomeError(
            f"{submissions_dir}: no submission folders (each needs meta.json and predictions.jsonl)"
        )
    if runs is None:
        return folders
    chosen = select(folders, read_run_list(runs), runs)
    for folder in folders:
        if folder not in chosen:
            log.info("%s: not ranked (%s does not list it)", folder, runs)
    return chosen


def _analyses(
    board: Scoreboard, entries: list[Entry], options: LeaderboardOptions
) -> tuple[dict[str, Breakdown], PairedAnalysis | None]:
    """The breakdowns and the pair's analysis (none without a pair or a dataset)."""
    rs = options.resampling
    breakdowns = analyses(board, [e.system for e in entries], rs)
    if options.pair is None or board.queries is None:
        return breakdowns, None
    return breakdowns, paired_analysis(board, options.pair, rs)


def build_leaderboard(
    data_dir: Dataset | PathLike,
    submissions_dir: PathLike,
    out_dir: PathLike,
    options: LeaderboardOptions | None = None,
    *,
    check: PathLike | Mapping[str, Any] | None = None,
    runs: PathLike | None = None,
) -> LeaderboardResult:
    """Validate, score, test and render every submission; see the module docstring.

    ``check``: an expectations file (or its parsed content) to compare the aggregates with.
    ``runs``: a run list (:mod:`~searchtome.leaderboard.runlist`); only the folders it names
    are ranked.
    """
    o = options or LeaderboardOptions()
    dataset = data_dir if isinstance(data_dir, Dataset) else load(data_dir)
    accepted, rejected = _validate_all(_folders(submissions_dir, runs), dataset, o.split)
    accepted, seed_runs, rejected = split_seed_runs(accepted, rejected)  # docs/seeds.md
    board = score_runs(
        [r.submission for r in accepted if r.submission is not None],
        data=dataset,
        split=o.split,
        measures=(*DEFAULT_MEASURES, *BUDGET_MEASURES),
    )
    root = str(Path(submissions_dir))
    reports = {r.submission.system: r for r in accepted if r.submission is not None}
    entries = _ranked_entries(board, reports, root)
    comparison, entries = _test_against_the_top(board, entries, o.testing)
    breakdowns, paired = _analyses(board, entries, o)
    curves = learning_curves(entries, root)
    order = [e.system for e in entries]
    seeds = seed_spread(board, seed_runs, dataset, o.split, order, o.pair, o.resampling, root)
    colours = palette([e.system for e in entries])
    figures, images = _write_figures(breakdowns, Path(out_dir), colours, paired, curves)
    checks: list[CheckResult] | None = None
    if check is not None:
        checks = run_checks(read_expectations(check), entries)
    result = LeaderboardResult(
        out_dir=Path(out_dir),
        split=o.split,
        dataset=dataset.manifest,
        entries=entries,
        rejected=rejected,
        comparison=comparison,
        analyses=breakdowns,
        figures=figures,
        settings=o.settings(entries[0].system if entries else None, root),
        domains=sorted(set(board.queries.domain.tolist())) if board.queries is not None else [],
        checks=checks,
        paired=paired,
        curves=curves,
        colours=colours,
        seeds=seeds,  # None without seed runs: the outputs stay as they were
        budget=budget_summary(board, dataset),
    )
    _write_pages(result, images)
    return result
