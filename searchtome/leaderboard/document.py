"""``leaderboard.json``: the leaderboard as a typed, versioned document, with its one writer and
its one reader.

:func:`document_of` turns a build's :class:`~searchtome.leaderboard.results.LeaderboardResult`
into a :class:`LeaderboardDocument`; :func:`to_json` is the only code that writes the file's
text and :func:`read_document` the only code that reads it, on the document kernel
(:mod:`searchtome.document`): the version through :data:`LEADERBOARD`, every value typed
strictly against the result dataclasses (one error line naming the field), an entry's unknown
keys kept in its ``extra``. Every file then goes through :func:`complete`, which fills in what
older files of the same format lack (the fields were added one by one under
``searchtome-leaderboard-v1``: ranking depth and predictions file name, then learning curves,
then empty rankings, system cards and colours), so a file of any age loads as the current
shape. Values JSON cannot hold (NaN: an interval built with ``--bootstrap 0``) are written as
``null`` and read back as NaN.

A new section is one field on :class:`LeaderboardDocument`, one line in :func:`_encode` and one
in :func:`_decode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from searchtome.document import (
    FieldError,
    Format,
    Mode,
    Reading,
    convert,
    document_error,
    expected,
    join,
    read_record,
)
from searchtome.io import PathLike, atomic_write, dumps, read_json
from searchtome.leaderboard.comparison import ComparisonReport
from searchtome.leaderboard.results import (
    CURVES_KEY,
    PAIRED_KEY,
    Breakdown,
    BudgetSummary,
    CheckResult,
    Entry,
    GroupComparison,
    LeaderboardResult,
    LeaderboardSettings,
    LearningCurve,
    PairedAnalysis,
    RunPairTest,
    SeedGroup,
    SeedReport,
    SeedSettings,
    curve_groups,
    relative,
    scorer_order,
)
from searchtome.leaderboard.text import finite
from searchtome.submissions.meta import meta_dict
from searchtome.submissions.validate import ValidationReport

LEADERBOARD = Format("searchtome-leaderboard", 1)  # on the document kernel
FORMAT = LEADERBOARD.tag
VERSION = LEADERBOARD.version
FILE = "leaderboard.json"
ADVICE = "regenerate it with searchtome leaderboard"


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
        "format": f"{LEADERBOARD.name}-v{doc.version}",
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
    """A flat dataclass's fields (not :func:`dataclasses.asdict`: nested values stay as they are);
    ``extra`` (the keys a reading kept) is not one of them."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name != "extra"}


def _entry(e: Entry) -> dict[str, Any]:
    return {
        **e.extra,
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
# What the writer derives beside the stored fields: recomputed on reading, never read.
ENTRY_COMPUTED = frozenset({"card", "beyond_depth"})
CURVE_COMPUTED = frozenset({"best_dev_r1", "train_seconds", "same_adapter_as"})
# Every value strictly typed; NaN (an interval built with --bootstrap 0) is written as null.
NAN = Reading(Mode.STRICT, nan=True)


def complete(body: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 ``body`` with every field an older v1 file lacks filled in (the fields were added
    one by one under the same format name, so this is not a version step)."""
    out = {**TOP_DEFAULTS, **body}
    systems = body.get("systems")
    if isinstance(systems, list):
        out["systems"] = [{**ENTRY_DEFAULTS, **s} if isinstance(s, Mapping) else s for s in systems]
    comparison = body.get("comparison")
    if isinstance(comparison, Mapping) and isinstance(comparison.get("settings"), Mapping):
        settings = comparison["settings"]
        if "p_floor" not in settings and isinstance(settings.get("permutations"), int):
            # Older reports did not record it; their p-values follow the same (c + 1) / (B + 1).
            floor = None if settings.get("exact") else 1.0 / (settings["permutations"] + 1)
            out["comparison"] = {**comparison, "settings": {**settings, "p_floor": floor}}
    return out


def read_document(path: PathLike) -> LeaderboardDocument:
    """The file at ``path``, upgraded to the current shape."""
    return from_dict(read_json(path), str(path))


def from_dict(raw: Any, where: str = FILE) -> LeaderboardDocument:
    """``raw`` (a loaded ``leaderboard.json``) typed; one error line naming the field."""
    try:
        if not isinstance(raw, Mapping):
            raise FieldError("", expected("a JSON object", raw))
        body, version = LEADERBOARD.upgrade(raw)
        return _decode(complete(body), version)
    except FieldError as bad:
        raise document_error(where, bad, ADVICE) from None


def _field(data: Mapping[str, Any], key: str, hint: Any, where: str = "") -> Any:
    """``data[key]`` typed by the kernel; a missing key is an error."""
    at = join(where, key)
    if key not in data:
        raise FieldError(at, "missing")
    return convert(data[key], hint, at, NAN)


def _decode(data: dict[str, Any], version: int) -> LeaderboardDocument:
    analyses = dict(_field(data, "analyses", dict[str, Any]))
    paired = analyses.pop(PAIRED_KEY, None)
    checks, seeds, budget = data.get("checks"), data.get("seeds"), data.get("budget")
    raw_systems = _field(data, "systems", list[Any])
    systems = [_read_entry(s, f"systems[{i}]") for i, s in enumerate(raw_systems)]
    return LeaderboardDocument(
        dataset=_field(data, "dataset", dict[str, Any]),
        split=_field(data, "split", str),
        settings=_field(data, "settings", LeaderboardSettings),
        domains=_field(data, "domains", list[str]),
        systems=systems,
        comparison=_field(data, "comparison", ComparisonReport | None),
        analyses={k: convert(b, Breakdown, f"analyses.{k}", NAN) for k, b in analyses.items()},
        paired=None if paired is None else convert(paired, PairedAnalysis, "analyses.paired", NAN),
        figures=_field(data, "figures", dict[str, str]),
        curves=_read_curves(_field(data, CURVES_KEY, dict[str, Any]), [e.system for e in systems]),
        colours=_field(data, "colours", dict[str, str]),
        rejected=_field(data, "rejected", list[RejectedSubmission]),
        checks=None if checks is None else convert(checks, list[CheckResult], "checks", NAN),
        seeds=None if seeds is None else seeds_from_dict(seeds),
        budget=None if budget is None else convert(budget, BudgetSummary, "budget", NAN),
        version=version,
        extra={k: v for k, v in data.items() if k not in KNOWN},
    )


def _stored(raw: Any, where: str, computed: frozenset[str]) -> dict[str, Any]:
    """An object's keys without those the writer derives."""
    if not isinstance(raw, Mapping):
        raise FieldError(where, expected("an object", raw))
    return {k: v for k, v in raw.items() if k not in computed}


def _in_order(values: Mapping[str, Any]) -> dict[str, Any]:
    return {m: values[m] for m in scorer_order(values)}


def _read_entry(raw: Any, where: str) -> Entry:
    """An entry with its measures in the scorer's order, as the build made it (the file's keys
    are sorted): what is derived from that order, ``beyond_depth``, comes out the same. Keys
    this version does not know are kept in the entry's ``extra``."""
    e = read_record(Entry, _stored(raw, where, ENTRY_COMPUTED), where, NAN)
    return replace(
        e,
        aggregate=_in_order(e.aggregate),
        micro=_in_order(e.micro),
        per_domain={d: _in_order(v) for d, v in e.per_domain.items()},
        per_book={b: _in_order(v) for b, v in e.per_book.items()},
    )


def _read_curves(raw: Mapping[str, Any], ranked: list[str]) -> dict[str, LearningCurve]:
    """The curves in rank order, as the build made them: which system of a shared training
    comes first (the others point to it) follows that order, not the file's sorted keys."""
    order = [s for s in ranked if s in raw] + sorted(set(raw) - set(ranked))
    return {
        s: read_record(LearningCurve, _stored(raw[s], at, CURVE_COMPUTED), at, NAN)
        for s in order
        for at in [f"{CURVES_KEY}.{s}"]
    }


# -- the seeds section ---------------------------------------------------------------------------

# What a group's record derives from its runs (recomputed on reading, so never out of step).
_GROUP_DERIVED = frozenset({"n_seeds", "seeds", "mean", "sd", "min", "max"})
_RUN_PAIR = ("a", "seed_a", "b", "seed_b")


def seeds_from_dict(raw: Any, where: str = "seeds") -> SeedReport:
    """The ``seeds`` section typed; :func:`seeds_to_dict` of it gives ``raw`` back."""
    if not isinstance(raw, Mapping):
        raise FieldError(where, expected("an object", raw))
    groups = _field(raw, "groups", list[Any], where)
    comparisons = _field(raw, "comparisons", list[Any], where)
    return SeedReport(
        groups=[_read_seed_group(g, f"{where}.groups[{i}]") for i, g in enumerate(groups)],
        comparisons=[
            _read_group_comparison(c, f"{where}.comparisons[{i}]")
            for i, c in enumerate(comparisons)
        ],
        settings=_field(raw, "settings", SeedSettings, where),
    )


def _read_seed_group(raw: Any, where: str) -> SeedGroup:
    group = read_record(SeedGroup, _stored(raw, where, _GROUP_DERIVED), where, NAN)
    runs = [replace(r, aggregate=_in_order(r.aggregate)) for r in group.runs]
    return replace(group, runs=runs)


def _run_pairs(values: Mapping[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    """Run pairs as written (each test flat beside the runs it compares, a rare-leaf pair's
    leaf-clustered test nested as ``leaves``) in the shape of :class:`RunPairTest`."""
    pairs = _field(values, key, list[Any], where)
    out = []
    for i, raw in enumerate(pairs):
        t = _stored(raw, f"{where}.{key}[{i}]", frozenset())
        pair = {k: t[k] for k in _RUN_PAIR if k in t}
        pair["test"] = {k: v for k, v in t.items() if k not in (*_RUN_PAIR, "leaves")}
        if "leaves" in t:
            pair["leaves"] = t["leaves"]
        out.append(pair)
    return out


def _read_group_comparison(raw: Any, where: str) -> GroupComparison:
    """A comparison, its run pairs unflattened (:func:`_run_pairs`) and typed by the kernel."""
    values = _stored(raw, where, frozenset())
    values["rare_runs"] = _run_pairs(values, "rare_runs", where)
    if "overall_runs" in values:  # older files have none
        values["overall_runs"] = _run_pairs(values, "overall_runs", where)
    return read_record(GroupComparison, values, where, NAN)
