"""Running a baseline: the one path from a name and a dataset to a checked submission.

The runner resolves a baseline in the registry, builds its frozen config with
:func:`searchtome.config.make_config` (defaults, then a ``--config`` file, then ``--set``
overrides), runs it with a seeded :class:`~searchtome.baselines.registry.RunContext`, checks
the run (every query of the split, only leaves of the query's own book, at most
:data:`~searchtome.submissions.MAX_IDS` ids, no duplicates) and writes a submission whose
``meta.json`` records config, seed, versions, wall time, peak memory and the dataset's manifest
hash. ``searchtome run`` and ``searchtome tune`` are thin commands over these functions.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import platform
import random
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from searchtome.baselines.phases import Phases

from searchtome.config import config_record, make_config
from searchtome.errors import SearchTomeError
from searchtome.hardware import cpu_facts, hardware
from searchtome.limits import DEFAULT_SEED, MAX_IDS
from searchtome.records import BASELINE_TYPES
from searchtome.submissions.meta import RunMeta, parse_run_meta, read_meta
from searchtome.submissions.runinfo import DatasetFacts, Phase, RunInfo, RunReport

log = logging.getLogger(__name__)

PROJECT_URL = "https://github.com/searchtome/searchtome"
# Packages whose versions can change a baseline's output; recorded when installed.
_VERSIONED = (
    "searchtome",
    "numpy",
    "rank-bm25",
    "faiss-cpu",
    "PyStemmer",
    "torch",
    "transformers",
    "tokenizers",
    "peft",
)

ConfigSource = Mapping[str, Any] | str | os.PathLike[str] | None
# Where `searchtome run` writes by default (git-ignored): committed runs live in submissions/,
# and a plain `run` must never overwrite one of them.
RUNS_DIR = "runs"
Overrides = Sequence[str] | Mapping[str, Any] | None


# -- environment facts ---------------------------------------------------------------------------


def versions() -> dict[str, str]:
    """Python's version and those of the installed packages that can change a run's output."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in _VERSIONED:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return out


def peak_memory(phases: Phases | None = None) -> dict[str, Any]:
    """The run's RSS high-water mark (torch CPU tensors are inside it) and GPU peak if any.

    With ``phases`` whose marks could be reset, the largest phase peak: this run's, not the
    process's (the demo runs several baselines in one process); else the process's.
    """
    if phases is not None and phases.scope == "phase":
        mib = phases.peak_rss_mib()
    else:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        mib = rss / 1024 if sys.platform != "darwin" else rss / 2**20
    out: dict[str, Any] = {"peak_rss_mib": round(mib, 1)}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    import numpy as np

    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def _check_needs(name: str, needs: Sequence[str]) -> None:
    if "ml" in needs:
        import importlib.util

        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise SearchTomeError(
                f"baseline {name!r} needs the ml extra ({', '.join(missing)} missing); "
                "run: pip install 'searchtome[ml]'"
            )


# -- the run itself ------------------------------------------------------------------------------


def check_run(run: Any, dataset: Any, split: str, free_form: bool = False) -> None:
    """Fail loudly if a baseline broke the output contract (a bug in the baseline, not input).

    ``free_form`` runs (the config says so: zero-shot replies, unconstrained decoding) may name
    non-leaf nodes or nothing; those ids are kept so the scorer counts them as non-leaf / invalid.
    """

    expected = {q.query_id: q.book_id for q in dataset.queries(split)}
    missing = sorted(set(expected) - set(run.rankings))
    extra = sorted(set(run.rankings) - set(expected))
    if missing or extra:
        raise SearchTomeError(
            f"baseline {run.name!r} returned {len(missing)} missing and {len(extra)} unknown "
            f"queries for split {split!r} (e.g. {(missing or extra)[0]!r})"
        )
    leaves = {b: {x.leaf_id for x in dataset.leaves(b)} for b in set(expected.values())}
    for qid, ids in run.rankings.items():
        book = expected[qid]
        if len(ids) > MAX_IDS or len(set(ids)) != len(ids):
            raise SearchTomeError(
                f"baseline {run.name!r}: query {qid}: >{MAX_IDS} or duplicate ids"
            )
        stray = [i for i in ids if i not in leaves[book]]
        if stray and not free_form:
            raise SearchTomeError(
                f"baseline {run.name!r}: query {qid}: {stray[0]!r} is not a leaf of {book!r}"
            )
        if run.scores is not None and len(run.scores[qid]) != len(ids):
            raise SearchTomeError(f"baseline {run.name!r}: query {qid}: scores not parallel")


def dataset_facts(dataset: Any) -> dict[str, Any]:
    """Path, name, revision label and manifest hash of a loaded dataset, for ``meta.json``.

    The revision names the data files' hash (:mod:`searchtome.dataset.revision`), so a card
    edit does not move it; the manifest's own hash is recorded beside it, as a fact of the run.
    """
    from searchtome.dataset.revision import dataset_revision
    from searchtome.io import sha256_file

    manifest = dataset.root / "manifest.json"
    digest = sha256_file(manifest) if manifest.is_file() else None
    m = dataset.manifest
    label = m.name or dataset.root.name
    version = m.label
    revision = f"{label}@{version}" if version else label
    revision += f" (data sha256:{dataset_revision(dataset.root)[:16]})"
    return {
        "path": portable_path(dataset.root, "<DATA>"),
        "name": m.name,
        "revision": revision,
        "manifest_sha256": digest,
        "books": dataset.book_ids(),
    }


def portable_path(path: str | os.PathLike[str], placeholder: str) -> str:
    """``path`` as recorded in ``meta.json``: never an absolute path of this machine.

    Relative to the current folder when inside it, ``$SEARCHTOME_HOME/...`` inside the cache,
    ``placeholder`` (``<DATA>``) elsewhere; relative paths and ``hf://`` ids stay as given.
    """
    text = os.fspath(path)
    if "://" in text or not os.path.isabs(text):
        return text
    from searchtome.settings import home

    resolved = Path(text).resolve()
    for base, shown in ((Path.cwd().resolve(), ""), (home().resolve(), "$SEARCHTOME_HOME/")):
        if resolved.is_relative_to(base):
            return shown + (resolved.relative_to(base).as_posix() or ".")
    return placeholder


def portable_values(value: Any) -> Any:
    """``value`` (a config, overrides) with every absolute path made portable (``<PATH>``).

    A model given as a local folder is recorded by name and revision in ``models`` and in the
    encoder's notes; the config only says it was a folder.
    """
    if isinstance(value, dict):
        return {k: portable_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(portable_values(v) for v in value)
    if isinstance(value, str) and os.path.isabs(value):
        return portable_path(value, "<PATH>")
    return value


def portable_setting(item: str) -> str:
    """A ``--set KEY=VALUE`` as recorded: an absolute VALUE made portable."""
    key, sep, value = item.partition("=")
    return f"{key}{sep}{portable_values(value)}" if sep else item


def check_out_dir(out_dir: Path, command: str, force: bool = False) -> None:
    """Refuse to overwrite a folder holding another run (``force`` allows it).

    The same run again (the same recorded command) may replace its own folder; a folder with
    files but no ``meta.json``, or a different command, is another run.
    """
    if force or not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    # Only the command is needed: a partial or stale meta.json still says which run wrote it.
    raw, _, _ = read_meta(out_dir / "meta.json")
    recorded = parse_run_meta(raw).command if raw is not None else None
    if recorded != command:
        shown = f"was written by: {recorded}" if recorded else "holds files that are not a run"
        raise SearchTomeError(
            f"{out_dir}: {shown}; choose another --out, or pass --force to overwrite it"
        )


def _load(data: Any) -> Any:
    from searchtome.dataset import Dataset, load

    return data if isinstance(data, Dataset) else load(data)


@dataclass(frozen=True)
class RunOptions:
    """What a run is besides the baseline and the data; defaults are ``searchtome run``'s.

    ``config`` is a JSON/TOML file or a mapping; ``overrides`` ``["k1=1.2"]`` or ``{"k1": 1.2}``.
    """

    split: str = "test"
    config: ConfigSource = None
    overrides: Overrides = None
    seed: int = DEFAULT_SEED


@dataclass(frozen=True)
class OutputOptions:
    """Where and how a run's submission is written.

    ``out``: the folder (default ``runs/NAME``, :data:`RUNS_DIR`); ``command``: the command
    recorded (default: the Python call); ``system``: the system's name (default: the folder's);
    ``depth``: leaves kept per query (at most ``MAX_IDS``, the format's limit; the leaderboard
    measures need 10); ``compress``: write ``predictions.jsonl.gz``; ``force``: overwrite another run.
    """

    out: str | os.PathLike[str] | None = None
    command: str | None = None
    system: str | None = None
    depth: int = MAX_IDS
    compress: bool = False
    force: bool = False


def execute(
    name: str,
    data: Any,
    split: str = "test",
    config: ConfigSource = None,
    overrides: Overrides = None,
    seed: int = DEFAULT_SEED,
) -> tuple[Any, RunMeta, RunInfo]:
    """Run a baseline in memory; returns ``(run, meta, info)`` without writing anything.

    ``meta`` is the submission's ``meta.json`` (:class:`~searchtome.submissions.meta.RunMeta`);
    ``info`` its ``run_info`` (wall time, peak memory, dataset manifest hash, the baseline's
    report under ``notes``).
    """
    from searchtome.baselines import registry

    spec = registry.get(name)
    _check_needs(name, spec.needs)
    dataset = _load(data)
    dataset.queries(split)  # unknown split → did-you-mean
    cfg = make_config(spec.config_cls, config, overrides, baseline=name)
    measured = _run_spec(spec, dataset, split, cfg, seed)
    run = measured.run
    check_run(run, dataset, split, free_form=getattr(cfg, "free_form", False))
    facts = DatasetFacts.from_dict(dataset_facts(dataset))
    # The report with absolute paths (a cached adapter's folder, ...) made portable, at any depth.
    report = RunReport.from_dict(portable_values(measured.ctx.report.to_dict()))
    info = _run_info(name, RunOptions(split, config, overrides, seed), measured, facts, report)
    summary = [f"wall time {measured.wall:.1f} s", f"peak RSS {info.peak_rss_mib:.0f} MiB"]
    if facts.manifest_sha256:
        summary.append(f"dataset manifest sha256 {facts.manifest_sha256}")
    summary += [f"{k}: {v}" for k, v in info.report.texts()]
    meta = RunMeta(
        system=name,
        description=report.description or spec.summary,
        url=f"{PROJECT_URL}/blob/main/docs/{spec.doc}#{name}",
        models=tuple(str(m) for m in report.models or ()),
        trained_on=tuple(spec.trains_on),
        hardware=hardware(),
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        dataset_revision=facts.revision,
        license="Apache-2.0",
        command="",
        split=split,
        config=portable_values(config_record(cfg)),
        seed=seed,
        versions=versions(),
        notes="; ".join(summary),
        run_info=info,
    )
    return run, meta, info


class _Measured(NamedTuple):
    ctx: Any  # the RunContext: the baseline's report and the phases
    run: Any
    wall: float  # seconds
    threads: dict[str, Any]  # torch threads used and why


def _run_spec(spec: Any, dataset: Any, split: str, cfg: Any, seed: int) -> _Measured:
    """The baseline's call, seeded, timed and its threads recorded."""
    from searchtome.baselines import registry

    from searchtome import threads
    from searchtome.settings import cache_dir

    ctx = registry.RunContext(cache_dir=cache_dir("baselines", spec.name), seed=seed)
    _seed_everything(seed)
    log.info("running %s on %s/%s with %s", spec.name, dataset.root, split, cfg)
    start = time.perf_counter()
    ctx.start_phase("prediction")  # a baseline that trains switches to "training" and back
    with threads.recording() as thread_choices:
        run = spec.run(dataset, split, cfg, ctx)
    ctx.phases.finish()
    wall = time.perf_counter() - start
    return _Measured(ctx, run, wall, threads.summary(thread_choices))


def _run_info(
    name: str, options: RunOptions, measured: _Measured, facts: DatasetFacts, report: RunReport
) -> RunInfo:
    """``run_info``: the run's facts, with the report's model facts lifted out of its notes."""
    ctx = measured.ctx
    system_type = BASELINE_TYPES.get(name)
    # A lexical baseline learns nothing; others say what their model holds (None: unknown).
    parameters = report.parameters
    if parameters is None and system_type == "lexical":
        parameters = 0
    memory = peak_memory(ctx.phases)
    phases = {k: Phase(**v) for k, v in ctx.phases.records.items()}
    # The adapter's own record (every session of a resumed training, or the reused one's), else
    # this run's training phase.
    training = report.train_seconds
    if training is None:
        training = phases.get("training", Phase()).wall_s
    return RunInfo(
        system=name,
        split=options.split,
        seed=options.seed,
        wall_time_s=round(measured.wall, 3),
        peak_rss_mib=memory["peak_rss_mib"],
        peak_gpu_mib=memory.get("peak_gpu_mib"),
        memory_note=(
            "peak_rss_mib is this run's RSS high-water mark (reset at each phase's start), "
            if ctx.phases.scope == "phase"
            else "peak_rss_mib is the process's RSS high-water mark (getrusage ru_maxrss), "
        )
        + "torch CPU tensors and model weights are inside it",
        # Training apart from prediction: the leaderboard's cost table shows them side by side.
        phases=phases,
        training_wall_s=training,
        prediction_wall_s=phases.get("prediction", Phase()).wall_s,
        dataset=facts,
        n_queries=len(measured.run),
        overrides=portable_values(_overrides_dict(options.overrides)),
        threads=measured.threads,
        # CPU model and ISA flags, and the dtype the model really ran in (null: no neural model):
        # bf16 results differ between CPU families.
        machine=cpu_facts(),
        dtype=report.dtype,
        system_type=system_type,  # the leaderboard's Type column
        parameters=parameters,
        notes=dataclasses.replace(
            report, models=None, description=None, parameters=None, dtype=None
        ),
    )


def _overrides_dict(overrides: Overrides) -> dict[str, Any]:
    """The overrides as given, as a JSON object (``["k1=1.2"]`` → ``{"k1": "1.2"}``)."""
    if not overrides:
        return {}
    if isinstance(overrides, Mapping):
        return dict(overrides)
    return dict(item.split("=", 1) for item in overrides if "=" in item)


def run_baseline(
    name: str,
    data: Any,
    options: RunOptions | None = None,
    output: OutputOptions | None = None,
) -> Path:
    """Run baseline ``name`` on ``data`` and write its submission; returns the folder.

    ``data`` is a dataset folder or a loaded :class:`~searchtome.dataset.Dataset`. The folder
    (``output.out``, default ``runs/NAME``; never the committed ``submissions/``; a folder
    holding another run is refused unless ``output.force``) gets the predictions and
    ``meta.json`` (with the run's facts under ``run_info``); the system is named after the
    folder unless ``output.system`` is given, so variants of one baseline can sit side by side
    on a leaderboard.
    """
    from searchtome.submissions import write_submission

    options, output = options or RunOptions(), output or OutputOptions()
    if not 1 <= output.depth <= MAX_IDS:
        raise SearchTomeError(f"--depth must be between 1 and {MAX_IDS}, not {output.depth}")
    out_dir = Path(output.out) if output.out is not None else Path(RUNS_DIR) / name
    command = output.command or _python_call(name, data, options)
    check_out_dir(out_dir, command, output.force)  # before the run, which may take hours
    o = options
    run, meta, _ = execute(name, data, o.split, o.config, o.overrides, o.seed)
    if output.depth < MAX_IDS:
        run, meta = _cut(run, meta, output.depth)
    system = output.system or out_dir.resolve().name
    description = meta.description
    if system != name:
        run = dataclasses.replace(run, name=system)
        description = f"{description} (variant of baseline {name!r})"
    info = dataclasses.replace(meta.info, system=system, baseline=name)
    meta = dataclasses.replace(
        meta, system=system, description=description, command=command, run_info=info
    )
    from searchtome.baselines.generative.parallel import barrier, is_main

    if not is_main():  # under `accelerate launch` every rank holds the whole run; one writes
        barrier()
        return out_dir
    path = Path(write_submission(out_dir, run, meta, compress=output.compress))
    log.info("wrote %s (%d queries, %.1f s)", path, len(run), info.wall_time_s or 0.0)
    barrier()
    return path


def _cut(run: Any, meta: RunMeta, depth: int) -> tuple[Any, RunMeta]:
    """The run cut to ``depth`` leaves per query, and ``meta.json`` saying so."""
    run = dataclasses.replace(
        run,
        rankings={q: ids[:depth] for q, ids in run.rankings.items()},
        scores=None if run.scores is None else {q: v[:depth] for q, v in run.scores.items()},
    )
    config = dict(meta.config or {})
    # A baseline's own `depth` (how many it ranked) would otherwise contradict `--depth`.
    if isinstance(config.get("depth"), int):
        config["depth"] = min(config["depth"], depth)
    info = dataclasses.replace(meta.info, depth=depth)
    return run, dataclasses.replace(meta, config=config, run_info=info)


def _python_call(name: str, data: Any, options: RunOptions) -> str:
    from searchtome.dataset import Dataset

    data_text = portable_path(data.root if isinstance(data, Dataset) else str(data), "<DATA>")
    config = options.config
    if isinstance(config, str | os.PathLike):
        config = portable_path(config, "<CONFIG>")
    return (
        f"run_baseline({name!r}, {data_text!r}, split={options.split!r}, config={config!r}, "
        f"overrides={portable_values(options.overrides)!r}, seed={options.seed})"
    )


# -- grids ---------------------------------------------------------------------------------------


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["k1=0.9,1.2"]`` → ``{"k1": ["0.9", "1.2"]}`` (values read later by the field's type)."""
    grid: dict[str, list[Any]] = {}
    for text in items:
        key, sep, raw = text.partition("=")
        if not sep or not raw:
            raise SearchTomeError(
                f"--grid {text!r}: expected KEY=V1,V2,..., e.g. --grid k1=0.9,1.2"
            )
        grid[key.strip()] = raw.split(",")
    return grid


def grid_search(
    name: str,
    dataset: Any,
    grid: Mapping[str, Sequence[Any]],
    score: Callable[[Any], Mapping[str, float]],
    split: str = "dev",
    config: ConfigSource = None,
    overrides: Overrides = None,
    seed: int = DEFAULT_SEED,
) -> list[dict[str, Any]]:
    """Run every point of the grid (the product of its values) and ``score`` each run.

    Each point's values go on top of ``overrides``, as a last ``--set`` would. Rows, in grid
    order: ``{"setting": {...}, **score(run), "seconds": run and scoring time}``.
    """
    from searchtome.settings import progress

    base = dict(overrides) if isinstance(overrides, Mapping) else {}
    base_list = [] if isinstance(overrides, Mapping) or overrides is None else list(overrides)
    keys = list(grid)
    points = list(itertools.product(*(grid[k] for k in keys)))
    rows = []
    for point in progress(points, desc=f"tuning {name}", unit="config"):
        setting = dict(zip(keys, point, strict=True))
        over = (
            [f"{k}={v}" for k, v in {**base, **setting}.items()]
            if not base_list
            else [*base_list, *(f"{k}={v}" for k, v in setting.items())]
        )
        start = time.perf_counter()
        run, _, _ = execute(name, dataset, split, config, over, seed)
        scores = score(run)
        rows.append(
            {"setting": setting, **scores, "seconds": round(time.perf_counter() - start, 2)}
        )
    return rows
