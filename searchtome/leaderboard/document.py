"""``leaderboard.json``: the leaderboard as a typed, versioned document, with its one writer and
its one reader.

:func:`document_of` turns a build's :class:`~searchtome.leaderboard.results.LeaderboardResult`
into a :class:`LeaderboardDocument`; :func:`to_json` is the only code that writes the file's
text and :func:`read_document` the only code that reads it. Every file goes through
:func:`upgrade` first, which fills in what older files of the same format lack (the fields
were added one by one under ``searchtome-leaderboard-v1``: ranking depth and predictions file
name, then learning curves, then empty rankings, system cards and colours), so a file of any
age loads as the current shape. Values JSON cannot hold (NaN: an interval built with
``--bootstrap 0``) are written as ``null`` and read back as NaN.

A new section is one field on :class:`LeaderboardDocument`, one line in :func:`_encode` and one
in :func:`_decode`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write, dumps, read_json
from searchtome.leaderboard.comparison import ComparisonReport
from searchtome.leaderboard.results import (
    CURVES_KEY,
    PAIRED_KEY,
    Breakdown,
    BudgetSummary,
    CheckResult,
    CheckStatus,
    ClusteredTest,
    Entry,
    GroupComparison,
    GroupTest,
    LeaderboardResult,
    LeaderboardSettings,
    LearningCurve,
    PairedAnalysis,
    PairedTest,
    RunPairTest,
    SeedGroup,
    SeedReport,
    SeedRun,
    SeedSettings,
    curve_groups,
    relative,
    scorer_order,
)
from searchtome.leaderboard.text import finite
from searchtome.submissions.meta import meta_dict, parse_run_meta
from searchtome.submissions.validate import ValidationReport

FORMAT = "searchtome-leaderboard-v1"  # the file's "format": the version is its last part
VERSION = 1
FILE = "leaderboard.json"


@dataclass(frozen=True)
class RejectedSubmission:
    """A folder the build turned away, as the file records it (paths relative to the root)."""

    path: str
    system: str
    errors: list[str]  # the kept errors' text
    n_errors: int  # every error, not only the kept ones


@dataclass(frozen=True)
class LeaderboardDocument:
    """Everything ``leaderboard.json`` holds, typed."""

    # The dataset's manifest, without its file hashes, as its owner (searchtome.dataset.manifest)
    # wrote it: kept verbatim, so that an older file's record is written back as it was.
    dataset: dict[str, Any]
    split: str
    settings: LeaderboardSettings
    domains: list[str]
    systems: list[Entry]  # in rank order
    comparison: ComparisonReport | None
    analyses: dict[str, Breakdown]
    paired: PairedAnalysis | None
    figures: dict[str, str]  # figure key → path relative to the file's folder
    curves: dict[str, LearningCurve]
    colours: dict[str, str]
    rejected: list[RejectedSubmission]
    checks: list[CheckResult] | None = None  # only when the build ran --check
    seeds: SeedReport | None = None  # only when some system has seed runs (docs/seeds.md)
    budget: BudgetSummary | None = None  # the token-budget table's facts (older files: none)
    version: int = VERSION
    # Sections this version has no type for (written by a later searchtome), kept verbatim so
    # that reading and writing a file loses nothing.
    extra: dict[str, Any] = field(default_factory=dict)


def document_of(result: LeaderboardResult) -> LeaderboardDocument:
    """The document a build writes."""
    root = result.settings.submissions_root
    return LeaderboardDocument(
        dataset=result.dataset.to_dict(files=False),
        split=result.split,
        settings=result.settings,
        domains=result.domains,
        systems=result.entries,
        comparison=result.comparison,
        analyses=result.analyses,
        paired=result.paired,
        figures={k: f"figures/{p.name}" for k, p in result.figures.items()},
        curves=result.curves,
        colours=result.colours,
        rejected=[_rejected(r, root) for r in result.rejected],
        checks=result.checks,
        seeds=result.seeds,
        budget=result.budget,
    )


def _rejected(report: ValidationReport, root: str) -> RejectedSubmission:
    return RejectedSubmission(
        path=relative(report.path, root),
        system=report.system,
        errors=[str(p).replace(str(Path(root)) + "/", "") for p in report.errors],
        n_errors=report.error_count,
    )


# -- the writer ------------------------------------------------------------------------------


def to_json(doc: LeaderboardDocument) -> str:
    """The file's text: canonical JSON (sorted keys), NaN as null."""
    return dumps(finite(_encode(doc)))


def write_document(path: PathLike, doc: LeaderboardDocument) -> Path:
    with atomic_write(path) as fh:
        fh.write(to_json(doc))
    return Path(path)


def _encode(doc: LeaderboardDocument) -> dict[str, Any]:
    out: dict[str, Any] = {
        **doc.extra,
        "format": f"searchtome-leaderboard-v{doc.version}",
        "dataset": doc.dataset,
        "split": doc.split,
        "settings": _fields(doc.settings),
        "domains": doc.domains,
        "systems": [_entry(e) for e in doc.systems],
        "comparison": doc.comparison.to_dict() if doc.comparison else None,
        "analyses": {
            **{k: _breakdown(b) for k, b in doc.analyses.items()},
            **({PAIRED_KEY: _paired(doc.paired)} if doc.paired is not None else {}),
        },
        "figures": doc.figures,
        CURVES_KEY: _curves(doc.curves),
        "colours": doc.colours,
        "rejected": [_fields(r) for r in doc.rejected],
    }
    if doc.checks is not None:
        out["checks"] = [_fields(c) for c in doc.checks]
    if doc.seeds is not None:
        out["seeds"] = seeds_to_dict(doc.seeds)
    if doc.budget is not None:
        out["budget"] = _fields(doc.budget)
    return out


def _fields(obj: Any) -> dict[str, Any]:
    """A flat dataclass's fields (not :func:`dataclasses.asdict`: nested values stay as they are)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _entry(e: Entry) -> dict[str, Any]:
    return {
        **_fields(e),
        "meta": meta_dict(e.meta),
        "card": e.card.to_dict(),
        # Values kept for machines, but named: a 3-deep run's R@5 is its R@3.
        "beyond_depth": [m for m in e.aggregate if e.short(m)],
    }


def _breakdown(b: Breakdown) -> dict[str, Any]:
    out: dict[str, Any] = {
        "title": b.title,
        "xlabel": b.xlabel,
        "ylabel": b.ylabel,
        "buckets": list(b.buckets),
        "n_queries": list(b.n_queries),
        "values": {k: list(v) for k, v in b.values.items()},
    }
    if b.ci_low:
        out["ci_low"] = {k: list(v) for k, v in b.ci_low.items()}
        out["ci_high"] = {k: list(v) for k, v in b.ci_high.items()}
    if b.note:
        out["note"] = b.note
    return out


def _paired(p: PairedAnalysis) -> dict[str, Any]:
    return {
        **_fields(p),
        "buckets": [_fields(t) for t in p.buckets],
        "rare": _fields(p.rare) if p.rare else None,
        "settings": dict(p.settings),
    }


def _curves(curves: Mapping[str, LearningCurve]) -> dict[str, Any]:
    """Each curve as data, with the system whose training it shares (``None``: its own)."""
    out = {}
    for group in curve_groups(curves):
        for system in group:
            c = curves[system]
            out[system] = {
                **_fields(c),
                "best_dev_r1": c.best_dev_r1,
                "train_seconds": c.train_seconds,
                "same_adapter_as": group[0] if system != group[0] else None,
            }
    return out


def seeds_to_dict(report: SeedReport) -> dict[str, Any]:
    """The ``seeds`` section: each group with its mean, sd, min and max per measure."""
    return {
        "groups": [_seed_group(g) for g in report.groups],
        "comparisons": [_group_comparison(c) for c in report.comparisons],
        "settings": _fields(report.settings),
    }


def _seed_group(g: SeedGroup) -> dict[str, Any]:
    return {
        "system": g.system,
        "n_seeds": len(g.runs),
        "seeds": g.seeds,
        "runs": [_fields(r) for r in g.runs],
        "mean": {m: g.mean(m) for m in g.measures},
        "sd": {m: g.sd(m) for m in g.measures},
        "min": {m: g.low(m) for m in g.measures},
        "max": {m: g.high(m) for m in g.measures},
    }


def _group_comparison(c: GroupComparison) -> dict[str, Any]:
    return {
        **_fields(c),
        "overall": [_fields(t) for t in c.overall],
        "rare_pooled": _fields(c.rare_pooled) if c.rare_pooled else None,
        "rare_leaves": _fields(c.rare_leaves) if c.rare_leaves else None,
        # One run pair's test flat beside the runs it compares; its leaf-clustered test nested.
        "rare_runs": [
            {
                **_without(_fields(t), "test"),
                **_fields(t.test),
                "leaves": _fields(t.leaves) if t.leaves else None,
            }
            for t in c.rare_runs
        ],
        "overall_runs": [_run_pair(t) for t in c.overall_runs],
    }


def _run_pair(t: RunPairTest) -> dict[str, Any]:
    return {**_without(_fields(t), "test", "leaves"), **_fields(t.test)}


def _without(values: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in keys}


# -- the reader ------------------------------------------------------------------------------

# Fields added to v1 files after the format was named, with the value a file without them means.
ENTRY_DEFAULTS: dict[str, Any] = {"predictions": "", "depth": 0, "empty": 0.0, "n_empty": 0}
TOP_DEFAULTS: dict[str, Any] = {CURVES_KEY: {}, "colours": {}}
KNOWN = {
    "format",
    "dataset",
    "split",
    "settings",
    "domains",
    "systems",
    "comparison",
    "analyses",
    "figures",
    CURVES_KEY,
    "colours",
    "rejected",
    "checks",
    "seeds",
    "budget",
}


def version_of(raw: Mapping[str, Any], where: str) -> int:
    """The version a file's ``format`` names; an error for anything that is not a leaderboard."""
    fmt = raw.get("format")
    prefix = "searchtome-leaderboard-v"
    if not isinstance(fmt, str) or not fmt.startswith(prefix) or not fmt[len(prefix) :].isdigit():
        raise SearchTomeError(
            f"{where}: format is {fmt!r}, not {FORMAT!r}; this is not a searchtome "
            "leaderboard.json (write one with searchtome leaderboard)"
        )
    version = int(fmt[len(prefix) :])
    if version > VERSION:
        raise SearchTomeError(
            f"{where}: format {fmt!r} is newer than this searchtome reads ({FORMAT!r}); "
            "upgrade searchtome"
        )
    return version


def upgrade(raw: Mapping[str, Any], where: str = FILE) -> dict[str, Any]:
    """``raw`` in the current shape: every field a file of an older shape lacks filled in."""
    version_of(raw, where)
    out = {**TOP_DEFAULTS, **raw, "format": FORMAT}
    out["systems"] = [{**ENTRY_DEFAULTS, **s} for s in raw.get("systems", [])]
    comparison = raw.get("comparison")
    if isinstance(comparison, Mapping) and isinstance(comparison.get("settings"), Mapping):
        settings = comparison["settings"]
        if "p_floor" not in settings and isinstance(settings.get("permutations"), int):
            # Older reports did not record it; their p-values follow the same (c + 1) / (B + 1).
            floor = None if settings.get("exact") else 1.0 / (settings["permutations"] + 1)
            out["comparison"] = {**comparison, "settings": {**settings, "p_floor": floor}}
    return out


def read_document(path: PathLike) -> LeaderboardDocument:
    """The file at ``path``, upgraded to the current shape."""
    raw = read_json(path)
    if not isinstance(raw, Mapping):
        raise SearchTomeError(f"{path}: a leaderboard.json is a JSON object")
    return from_dict(raw, str(path))


def from_dict(raw: Mapping[str, Any], where: str = FILE) -> LeaderboardDocument:
    data = upgrade(raw, where)
    try:
        return _decode(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SearchTomeError(
            f"{where}: not a leaderboard this searchtome reads ({type(exc).__name__}: {exc}); "
            "regenerate it with searchtome leaderboard"
        ) from exc


def _decode(data: dict[str, Any]) -> LeaderboardDocument:
    analyses = dict(data["analyses"])
    paired = analyses.pop(PAIRED_KEY, None)
    checks = data.get("checks")
    systems = [_read_entry(s) for s in data["systems"]]
    return LeaderboardDocument(
        dataset=data["dataset"],
        split=data["split"],
        settings=LeaderboardSettings(**data["settings"]),
        domains=list(data["domains"]),
        systems=systems,
        comparison=ComparisonReport.from_dict(data["comparison"]) if data["comparison"] else None,
        analyses={k: _read_breakdown(b) for k, b in analyses.items()},
        paired=_read_paired(paired) if paired is not None else None,
        figures=dict(data["figures"]),
        curves=_read_curves(data[CURVES_KEY], [e.system for e in systems]),
        colours=dict(data["colours"]),
        rejected=[RejectedSubmission(**r) for r in data["rejected"]],
        checks=None if checks is None else [_read_check(c) for c in checks],
        seeds=seeds_from_dict(data["seeds"]) if "seeds" in data else None,
        budget=_known(BudgetSummary, data["budget"]) if "budget" in data else None,
        extra={k: v for k, v in data.items() if k not in KNOWN},
    )


def _known(cls: Any, raw: Mapping[str, Any]) -> Any:
    """``cls`` from ``raw``'s stored fields; the derived ones beside them (a system's card, a
    curve's best dev R@1) are recomputed from these, so they are left out."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in raw.items() if k in names})


def _in_order(values: Mapping[str, Any]) -> dict[str, Any]:
    return {m: values[m] for m in scorer_order(values)}


def _read_entry(raw: Mapping[str, Any]) -> Entry:
    """An entry with its measures in the scorer's order, as the build made it (the file's keys
    are sorted): what is derived from that order, ``beyond_depth``, comes out the same."""
    e = _known(Entry, raw)
    return replace(
        e,
        meta=parse_run_meta(e.meta),
        aggregate=_in_order(e.aggregate),
        micro=_in_order(e.micro),
        per_domain={d: _in_order(v) for d, v in e.per_domain.items()},
        per_book={b: _in_order(v) for b, v in e.per_book.items()},
    )


def _read_curves(raw: Mapping[str, Any], ranked: list[str]) -> dict[str, LearningCurve]:
    """The curves in rank order, as the build made them: which system of a shared training
    comes first (the others point to it) follows that order, not the file's sorted keys."""
    order = [s for s in ranked if s in raw] + sorted(set(raw) - set(ranked))
    return {s: _known(LearningCurve, raw[s]) for s in order}


def _nan(values: list[Any]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _read_breakdown(raw: Mapping[str, Any]) -> Breakdown:
    values = dict(raw)
    for key in ("ci_low", "ci_high"):
        if key in values:
            values[key] = {s: _nan(v) for s, v in values[key].items()}
    return Breakdown(**values)


def _read_test(raw: Mapping[str, Any]) -> PairedTest:
    values = dict(raw)
    for key in ("ci_low", "ci_high"):
        values[key] = math.nan if values[key] is None else values[key]
    return PairedTest(**values)


def _read_paired(raw: Mapping[str, Any]) -> PairedAnalysis:
    values = dict(raw)
    values["buckets"] = [_read_test(t) for t in raw["buckets"]]
    values["rare"] = _read_test(raw["rare"]) if raw.get("rare") else None
    return PairedAnalysis(**values)


def _read_check(raw: Mapping[str, Any]) -> CheckResult:
    return CheckResult(**{**raw, "status": CheckStatus(raw["status"])})


# -- the seeds section ---------------------------------------------------------------------------

# What a group's record derives from its runs (recomputed on reading, so never out of step).
_GROUP_DERIVED = ("n_seeds", "seeds", "mean", "sd", "min", "max")
_RUN_PAIR = ("a", "seed_a", "b", "seed_b")


def seeds_from_dict(raw: Mapping[str, Any]) -> SeedReport:
    """The ``seeds`` section typed; :func:`seeds_to_dict` of it gives ``raw`` back."""
    return SeedReport(
        groups=[_read_seed_group(g) for g in raw["groups"]],
        comparisons=[_read_group_comparison(c) for c in raw["comparisons"]],
        settings=SeedSettings(**raw["settings"]),
    )


def _read_seed_group(raw: Mapping[str, Any]) -> SeedGroup:
    unknown = set(raw) - {"system", "runs", *_GROUP_DERIVED}
    if unknown:
        raise KeyError(f"seed group {raw.get('system')!r}: unknown {', '.join(sorted(unknown))}")
    runs = [SeedRun(**{**r, "aggregate": _in_order(r["aggregate"])}) for r in raw["runs"]]
    return SeedGroup(raw["system"], runs)


def _read_group_test(raw: Mapping[str, Any]) -> GroupTest:
    values = dict(raw)
    for key in ("ci_low", "ci_high", "p_value"):  # NaN without replicates (--bootstrap 0)
        values[key] = math.nan if values[key] is None else values[key]
    if values.get("p_runs", 0.0) is None:
        values["p_runs"] = math.nan
    return GroupTest(**values)


def _read_group_comparison(raw: Mapping[str, Any]) -> GroupComparison:
    values = dict(raw)
    values["overall"] = [_read_group_test(t) for t in raw["overall"]]
    pooled = raw["rare_pooled"]
    values["rare_pooled"] = _read_group_test(pooled) if pooled is not None else None
    values["rare_leaves"] = _read_clustered(raw.get("rare_leaves"))
    values["rare_runs"] = [
        RunPairTest(
            *(t[k] for k in _RUN_PAIR),
            _read_test({k: v for k, v in t.items() if k not in (*_RUN_PAIR, "leaves")}),
            _read_clustered(t.get("leaves")),
        )
        for t in raw["rare_runs"]
    ]
    values["overall_runs"] = [
        RunPairTest(
            *(t[k] for k in _RUN_PAIR),
            _read_test({k: v for k, v in t.items() if k not in _RUN_PAIR}),
        )
        for t in raw.get("overall_runs", [])
    ]
    return GroupComparison(**values)


def _read_clustered(raw: Mapping[str, Any] | None) -> ClusteredTest | None:
    return None if raw is None else ClusteredTest(**raw)
