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
from pathlib import Path
from typing import Any

from searchtome.leaderboard.analyses import DEFAULT_PAIR, Resampling, analyses, paired_analysis
from searchtome.leaderboard.comparison import OVERALL, ComparisonReport
from searchtome.leaderboard.curves import curve_from_meta, learning_curves
from searchtome.leaderboard.figures import plot, plot_curves, plot_paired
from searchtome.leaderboard.html import render_html
from searchtome.leaderboard.markdown import render_markdown
from searchtome.leaderboard.results import (
    CURVES_KEY,
    MAIN_MEASURES,
    PAIRED_KEY,
    Breakdown,
    CheckResult,
    Entry,
    LeaderboardResult,
    LearningCurve,
    PairedAnalysis,
    relative,
)
from searchtome.leaderboard.scoring import Scoreboard, score_runs
from searchtome.leaderboard.seeds import seed_spread, split_seed_runs
from searchtome.leaderboard.significance import compare
from searchtome.leaderboard.systems import palette, type_problem
from searchtome.submissions.problems import Problem
from searchtome.submissions.reader import find_predictions
from searchtome.submissions.schema import META_FILE, PREDICTION_FILES
from searchtome.submissions.validate import ValidationReport, validate_submission

from searchtome.dataset.loader import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write, read_json
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.ties import TIE_RULE
from searchtome.settings import progress
from searchtome.version import __version__

log = logging.getLogger(__name__)

FIGURE_FILES = {
    "r1_by_training_questions": "r1_by_training_questions.png",
    "invalid_by_training_questions": "invalid_by_training_questions.png",
    "r1_by_depth": "r1_by_depth.png",
    PAIRED_KEY: "paired_by_training_questions.png",
    CURVES_KEY: "learning_curves.png",  # only when a submission recorded a training history
}
EXACT = 1e-9
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


def run_checks(expected: Mapping[str, Any], entries: list[Entry]) -> list[CheckResult]:
    """Each recorded value against the built one: OK, within tolerance, or FAIL."""
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
    """One entry per system, best first: R@1, then R@3, then nDCG@3 (macro), then the name."""

    def sort_key(system: str) -> tuple[Any, ...]:
        agg = board.aggregate(system)
        return (-agg["R@1"], -agg["R@3"], -agg["nDCG@3"], system)

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
                meta=dict(scores.meta),
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
    board: Scoreboard, entries: list[Entry], **options: Any
) -> ComparisonReport | None:
    """Test every system against the top one and mark the entries that differ significantly."""
    order = [e.system for e in entries]
    if len(order) < 2:
        return None
    arrays = board.per_query_arrays(MAIN_MEASURES)
    comparison = compare(
        {s: arrays[s] for s in order},
        measures=list(MAIN_MEASURES),
        groups=board.groups(),
        control=order[0],
        **options,
    )
    for e in entries[1:]:
        for t in comparison.tests:
            if t.b != e.system:
                continue
            if t.scope == OVERALL:
                e.marks[t.measure] = t.significant
            else:
                e.domain_marks.setdefault(t.scope, {})[t.measure] = t.significant
    return comparison


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
    with atomic_write(out / "leaderboard.json") as fh:
        fh.write(result.to_json())
    with atomic_write(out / "leaderboard.md") as fh:
        fh.write(render_markdown(result))
    with atomic_write(out / "index.html") as fh:
        fh.write(render_html(result, dict(images)))


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
    pair: tuple[str, str] | None = DEFAULT_PAIR,
) -> LeaderboardResult:
    """Validate, score, test and render every submission; see the module docstring.

    ``pair``: the two systems whose R@1 difference is tested per training-question bucket and
    on rare leaves (the paper's STAIR vs DSI); ``None`` leaves the comparison out.
    """
    dataset = data_dir if isinstance(data_dir, Dataset) else load(data_dir)
    out = Path(out_dir)
    folders = discover(submissions_dir)
    if not folders:
        raise SearchTomeError(
            f"{submissions_dir}: no submission folders (each needs meta.json and predictions.jsonl)"
        )
    accepted, rejected = _validate_all(folders, dataset, split)
    accepted, seed_runs, rejected = split_seed_runs(accepted, rejected)  # docs/seeds.md
    board = score_runs(
        [r.submission for r in accepted if r.submission is not None],
        data=dataset,
        split=split,
        measures=DEFAULT_MEASURES,
    )
    submissions_root = str(Path(submissions_dir))
    reports = {r.submission.system: r for r in accepted if r.submission is not None}
    entries = _ranked_entries(board, reports, submissions_root)
    comparison = _test_against_the_top(
        board, entries, permutations=permutations, bootstrap=bootstrap, seed=seed, alpha=alpha
    )
    resampling = Resampling(bootstrap=bootstrap, permutations=permutations, seed=seed)
    breakdowns = analyses(board, [e.system for e in entries], resampling)
    paired = (
        paired_analysis(board, pair, resampling)
        if pair is not None and board.queries is not None
        else None
    )
    curves = learning_curves(entries, submissions_root)
    order = [e.system for e in entries]
    seeds = seed_spread(board, seed_runs, dataset, split, order, pair, resampling, submissions_root)
    colours = palette([e.system for e in entries])
    figures, images = _write_figures(breakdowns, out, colours, paired, curves)
    settings = {
        "searchtome": __version__,
        "permutations": permutations,
        "bootstrap": bootstrap,
        "seed": seed,
        "alpha": alpha,
        "correction": "holm",
        "control": entries[0].system if entries else None,
        "tie_rule": TIE_RULE,
        "aggregate": "macro mean over domains (each domain weighs the same)",
        "submissions_root": submissions_root,
    }
    result = LeaderboardResult(
        out_dir=out,
        split=split,
        dataset={k: v for k, v in dataset.manifest.items() if k != "files"},
        entries=entries,
        rejected=rejected,
        comparison=comparison,
        analyses=breakdowns,
        figures=figures,
        settings=settings,
        domains=sorted(set(board.queries.domain.tolist())) if board.queries is not None else [],
        paired=paired,
        curves=curves,
        colours=colours,
        seeds=seeds,  # None without seed runs: the outputs stay as they were
    )
    if check is not None:
        expected = read_json(check) if not isinstance(check, Mapping) else check
        result.checks = run_checks(expected, entries)
    _write_pages(result, images)
    return result
