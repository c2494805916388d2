"""The leaderboard's result types: what a build produced, before any file is written.

Data only. Each output has its own renderer, which owns its format: ``markdown``
(``leaderboard.md``), ``html`` (``index.html``), ``terminal`` (the command's table), ``document``
(``leaderboard.json``: the one writer and the one reader), ``checks`` (the check report) and
``expectations`` (``expected.json``); ``tables`` holds the rows and sentences more than one of
them prints. ``build`` fills these types.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from searchtome.dataset.manifest import DatasetManifest
from searchtome.io import PathLike
from searchtome.leaderboard.comparison import ComparisonReport
from searchtome.leaderboard.scoring import beyond_depth
from searchtome.leaderboard.systems import SystemCard
from searchtome.leaderboard.text import fmt_p
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.structure import STRUCTURE_MEASURES
from searchtome.metrics.ties import TIE_RULE
from searchtome.submissions.meta import RunMeta, read_embedded
from searchtome.submissions.validate import ValidationReport

MAIN_MEASURES: tuple[str, ...] = ("R@1", "R@3", "nDCG@3")  # the main table's columns and tests
# The token-budget table's columns, tested against the top system like the main ones.
BUDGET_MEASURES: tuple[str, ...] = ("InBudget@512", "InBudget@2048")
MARK = "†"  # differs significantly from the top system
PAIRED_KEY = "paired_by_training_questions"  # the a − b analysis in leaderboard.json and figures
CURVES_KEY = "learning_curves"  # dev R@1 per epoch: leaderboard.json's key and the figure's
CURVES_TITLE = "Dev R@1 and training loss per epoch of the trained baselines"
SHORT = "—"  # shown instead of a value whose cut-off lies beyond the system's ranking depth
AGGREGATE = "macro mean over domains (each domain weighs the same)"


@dataclass(frozen=True)
class LeaderboardSettings:
    """How a leaderboard was computed and tested (``leaderboard.json``'s ``settings``)."""

    searchtome: str  # the version that built it
    permutations: int  # sign flips per randomization test
    bootstrap: int  # paired-bootstrap resamples per interval
    seed: int
    alpha: float  # significance level of the Holm-adjusted p-values
    control: str | None  # the top system, which every other one is tested against
    submissions_root: str  # the submissions folder, as given: paths are relative to it
    correction: str = "holm"
    tie_rule: str = TIE_RULE
    aggregate: str = AGGREGATE


def scorer_order(measures: Iterable[str]) -> list[str]:
    """``measures`` in the scorer's order (R@1 … RR@10, then the structure rates), then any
    other measure by name."""
    seen = set(measures)
    known = [m for m in (*DEFAULT_MEASURES, *BUDGET_MEASURES, *STRUCTURE_MEASURES) if m in seen]
    return known + sorted(seen - set(known))


# -- the dataset: its manifest is the only thing read from it ------------------------------


@dataclass(frozen=True)
class DatasetFacts:
    """What the pages say about the dataset, read from its manifest in one place."""

    name: str
    revision: str  # "" when the manifest records none
    question_model: str  # the model that wrote the questions ("" when not recorded)
    endpoint_kind: str  # how it was reached: "local", an API, ... ("" when not recorded)
    question_note: str  # the build's note on a local model's questions ("" when none)

    @property
    def line(self) -> str:
        """The dataset's name and revision, for the page headers."""
        return f"{self.name}{f' (revision {self.revision})' if self.revision else ''}"


def dataset_facts(manifest: DatasetManifest | Mapping[str, Any]) -> DatasetFacts:
    """The manifest's name, revision label and question writer; a mapping (a ``manifest.json``,
    the ``dataset`` record of a ``leaderboard.json``) is read as a manifest, an older flat one
    through the manifest's upgrade."""
    if not isinstance(manifest, DatasetManifest):
        manifest = DatasetManifest.from_dict(manifest, "the leaderboard's dataset record")
    return DatasetFacts(
        name=manifest.name or "dataset",
        revision=manifest.label or "",
        question_model=manifest.question_model or "",
        endpoint_kind=manifest.question_endpoint or "",
        question_note=manifest.question_note or "",
    )


# -- one system's row ----------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    rank: int
    system: str
    aggregate: dict[str, float]
    micro: dict[str, float]
    per_domain: dict[str, dict[str, float]]
    per_book: dict[str, dict[str, float]]
    meta: RunMeta = field(metadata={"read": read_embedded})  # the submission's meta.json
    path: str
    n_queries: int
    validation: dict[str, Any]
    marks: dict[str, bool] = field(default_factory=dict)  # measure → differs from the top system
    domain_marks: dict[str, dict[str, bool]] = field(default_factory=dict)
    predictions: str = ""  # the predictions file's name inside the submission folder
    depth: int = 0  # the most ids it returned for one query; 0 = unknown
    empty: float = 0.0  # share of queries answered with an empty ranking (macro over domains)
    n_empty: int = 0  # how many
    # Keys of a leaderboard.json entry this version has no field for, kept for the rewrite.
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def short(self, measure: str) -> bool:
        """Whether ``measure``'s cut-off lies beyond this system's ranking depth."""
        return beyond_depth(measure, self.depth)

    @property
    def card(self) -> SystemCard:
        """Type, model, parameters, training data, date and link, from ``meta.json``."""
        return SystemCard.from_meta(self.meta)


# -- the check against expectations ----------------------------------------------------------


class CheckStatus(StrEnum):
    """One check's outcome; the value is what every report prints."""

    OK = "OK"  # equal
    WITHIN = "within tolerance"
    FAIL = "FAIL"  # beyond the tolerance, or the system or measure is missing


@dataclass(frozen=True)
class CheckResult:
    system: str
    measure: str
    expected: float | None
    actual: float | None
    tolerance: float
    status: CheckStatus


# -- the token budget ------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetSummary:
    """How the budget measures counted (``leaderboard.json``'s ``budget``).

    ``ceiling``: each budget measure of a system that ranks the gold first and nothing above it
    (macro over domains, like the table): the share of queries whose gold section alone fits.
    """

    tokenizer: dict[str, str]  # metrics.budget.TOKENIZER's record
    measures: list[str]
    ceiling: dict[str, float]
    book_tokens: dict[str, int]  # the cap of TokensToGold's misses, per book


# -- analyses --------------------------------------------------------------------------------


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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

    def p_text(self) -> str:
        """``p = 0.012``, or ``p < 1e-4 (exact McNemar p = 3e-12)`` at the floor."""
        if not self.p_at_floor:
            return f"p = {self.p_value:.3g}"
        extra = "" if self.mcnemar_p is None else f" (exact McNemar p = {fmt_p(self.mcnemar_p)})"
        return f"p {self.floor}{extra}"


@dataclass(frozen=True)
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
    settings: dict[str, Any] = field(default_factory=dict)  # bootstrap, permutations, seed
    skipped: str = ""

    @property
    def title(self) -> str:
        return f"{self.measure}: {self.a} − {self.b} by training questions of the gold leaf"

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


@dataclass(frozen=True)
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


def curve_groups(curves: Mapping[str, LearningCurve]) -> list[list[str]]:
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


# -- seed groups (docs/seeds.md) --------------------------------------------------------------
# What leaderboard.seeds reports; leaderboard.json's ``seeds`` section is written and read by
# :mod:`~searchtome.leaderboard.document`, which owns that file.


@dataclass(frozen=True)
class SeedRun:
    system: str
    seed: int | None
    path: str
    aggregate: dict[str, float]
    config_differences: list[str] = field(default_factory=list)
    platform: str = ""  # dtype and CPU as meta.json records them: "float32, AMD EPYC ..."


@dataclass(frozen=True)
class SeedGroup:
    """A system's runs, the one on the main table first, then the seed runs by seed."""

    system: str
    runs: list[SeedRun]

    @property
    def seeds(self) -> list[int | None]:
        return [r.seed for r in self.runs]

    @property
    def measures(self) -> list[str]:
        """The measures each run was scored on, in the scorer's order."""
        return list(self.runs[0].aggregate)

    def values(self, measure: str) -> np.ndarray:
        return np.asarray([r.aggregate[measure] for r in self.runs])

    def mean(self, measure: str) -> float:
        return float(self.values(measure).mean())

    def sd(self, measure: str) -> float | None:
        """Sample standard deviation over seeds (n − 1); ``None`` for one run."""
        v = self.values(measure)
        return float(v.std(ddof=1)) if v.size > 1 else None

    def low(self, measure: str) -> float:
        return float(self.values(measure).min())

    def high(self, measure: str) -> float:
        return float(self.values(measure).max())


@dataclass(frozen=True)
class GroupTest:
    """Group ``a`` − group ``b`` on one measure and query set, over seeds and questions."""

    label: str  # "all queries" or "≤ 5" (rare leaves)
    measure: str
    n_queries: int
    mean_a: float  # mean over a's runs of each run's value
    mean_b: float
    diff: float
    ci_low: float  # 95% two-level bootstrap interval of the difference
    ci_high: float
    p_value: float  # two-sided, from the same bootstrap (see docs/seeds.md)
    p_at_floor: bool
    p_outperform: float  # P(a's run beats b's run) over every pair of runs, ties count ½
    # The exact permutation test over the runs alone (each run one value): the share of the
    # relabellings of the pooled runs whose |difference| is at least the observed one. Its floor
    # is 2 / relabellings (0.10 with 3 + 3 runs), whatever the number of questions.
    p_runs: float = math.nan
    relabellings: int = 0

    def p_text(self, replicates: int) -> str:
        return f"< {fmt_p(2.0 / (replicates + 1))}" if self.p_at_floor else fmt_p(self.p_value)

    def p_runs_text(self) -> str:
        """The run-level p, ``0.10 (floor)`` when no relabelling could give a smaller one."""
        if math.isnan(self.p_runs):
            return "–"
        floor = self.relabellings > 0 and self.p_runs <= 2.0 / self.relabellings * (1 + 1e-9)
        return f"{self.p_runs:.2f}" + (" (floor)" if floor else "")


@dataclass(frozen=True)
class ClusteredTest:
    """A difference's interval and p with gold leaves, not questions, as the resampled unit.

    Questions on one leaf share its text and its training questions, so they are not
    independent draws; resampling whole leaves keeps that dependence in the interval.
    """

    n_leaves: int
    ci_low: float
    ci_high: float
    p_value: float  # two-sided, 2 min(share <= 0, share >= 0) of the replicates
    p_at_floor: bool

    def p_text(self, replicates: int) -> str:
        return f"< {fmt_p(2.0 / (replicates + 1))}" if self.p_at_floor else fmt_p(self.p_value)


@dataclass(frozen=True)
class RunPairTest:
    """The pre-declared rare-leaf test on one run of ``a`` against one run of ``b``."""

    a: str
    seed_a: int | None
    b: str
    seed_b: int | None
    test: PairedTest
    leaves: ClusteredTest | None = None  # the same pair with gold leaves resampled


@dataclass(frozen=True)
class GroupComparison:
    a: str
    b: str
    pre_declared: bool  # the build's pair (--pair); the others are descriptive
    seeds_a: list[int | None]
    seeds_b: list[int | None]
    overall: list[GroupTest]
    rare_max: int
    rare_pooled: GroupTest | None
    rare_runs: list[RunPairTest]
    note: str = ""
    rare_leaves: ClusteredTest | None = None  # rare_pooled, gold leaves resampled
    # R@1 over all queries for every pair of runs (the paired randomization test of each pair,
    # macro mean over domains): which pairs carry the group difference.
    overall_runs: list[RunPairTest] = field(default_factory=list)


SEED_RULE = "a folder <system>-seed<N> whose meta.json records seed N repeats <system>"
SD_RULE = "sample standard deviation over seeds (n - 1)"
TEST_RULE = (
    "two-level bootstrap: questions (within each domain) and each system's runs "
    "resampled with replacement; p = 2 min(share <= 0, share >= 0)"
)
RARE_RUNS_RULE = (
    "the pre-declared rare-leaf test (two-sided paired randomization) on every pair of runs"
)
RUNS_RULE = (
    "exact permutation test over the runs: each run one value (its mean over the questions); "
    "every split of the pooled runs into groups of the two sizes; p = share with "
    "|difference| >= observed; floor 2 / relabellings (0.10 with 3 + 3 runs)"
)
LEAVES_RULE = (
    "rare-leaf tests with gold leaves resampled (with replacement, whole) instead of questions, "
    "runs resampled as in the two-level bootstrap; p = 2 min(share <= 0, share >= 0)"
)


@dataclass(frozen=True)
class SeedSettings:
    """How the seed report was computed, and its rules in words (as the file records them)."""

    bootstrap: int
    permutations: int
    seed: int
    rule: str = SEED_RULE
    sd: str = SD_RULE
    test: str = TEST_RULE
    rare_runs: str = RARE_RUNS_RULE
    runs_test: str = RUNS_RULE
    leaves_test: str = LEAVES_RULE


@dataclass(frozen=True)
class SeedReport:
    groups: list[SeedGroup]  # the groups with two runs or more, in rank order
    comparisons: list[GroupComparison]
    settings: SeedSettings


# -- the whole build ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardResult:
    """Everything one leaderboard build produced: ranked entries, tests, analyses, checks."""

    out_dir: Path
    split: str
    dataset: DatasetManifest  # leaderboard.json records it without the file hashes
    entries: list[Entry]
    rejected: list[ValidationReport]
    comparison: ComparisonReport | None
    analyses: dict[str, Breakdown]
    figures: dict[str, Path]
    settings: LeaderboardSettings
    domains: list[str]
    checks: list[CheckResult] | None = None
    paired: PairedAnalysis | None = None
    curves: dict[str, LearningCurve] = field(default_factory=dict)  # system → its training
    colours: dict[str, str] = field(default_factory=dict)  # system → its colour, page-wide
    seeds: SeedReport | None = None  # when some system has seed runs (docs/seeds.md)
    budget: BudgetSummary | None = None  # the token-budget table's facts; None: no table

    @property
    def best(self) -> str | None:
        """The top system, which every other one is tested against."""
        return self.entries[0].system if self.entries else None

    @property
    def n_queries(self) -> int:
        """Queries in the split (every entry is scored on all of them)."""
        return self.entries[0].n_queries if self.entries else 0

    @property
    def facts(self) -> DatasetFacts:
        """What the pages say about the dataset (:func:`dataset_facts`)."""
        return dataset_facts(self.dataset)

    def figure_title(self, key: str) -> str:
        """The title of the figure stored under ``key``."""
        if key in self.analyses:
            return self.analyses[key].title
        if key == CURVES_KEY:
            return CURVES_TITLE
        return self.paired.title if self.paired is not None else key


def relative(path: PathLike, root: str) -> str:
    """``path`` relative to ``root`` when it lies below it, else as given."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
