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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from searchtome.baselines.phases import Phases

from searchtome.config import config_record, make_config
from searchtome.errors import SearchTomeError
from searchtome.hardware import cpu_facts, hardware
from searchtome.limits import DEFAULT_SEED, MAX_IDS
from searchtome.records import BASELINE_TYPES

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
    from searchtome.submissions import MAX_IDS

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
    """Path, name, revision label and manifest hash of a loaded dataset, for ``meta.json``."""
    from searchtome.io import sha256_file

    manifest = dataset.root / "manifest.json"
    digest = sha256_file(manifest) if manifest.is_file() else None
    m = dataset.manifest
    label = m.name or dataset.root.name
    version = m.label
    revision = f"{label}@{version}" if version else label
    if digest:
        revision += f" (manifest sha256:{digest[:16]})"
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


def _portable_notes(notes: dict[str, Any]) -> dict[str, Any]:
    """Notes with absolute paths (a cached adapter's folder...) made portable, at any depth."""
    return dict(portable_values(notes))


def check_out_dir(out_dir: Path, command: str, force: bool = False) -> None:
    """Refuse to overwrite a folder holding another run (``force`` allows it).

    The same run again (the same recorded command) may replace its own folder; a folder with
    files but no ``meta.json``, or a different command, is another run.
    """
    import json

    if force or not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    meta = out_dir / "meta.json"
    try:
        recorded = json.loads(meta.read_text(encoding="utf-8")).get("command")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded != command:
        shown = f"was written by: {recorded}" if recorded else "holds files that are not a run"
        raise SearchTomeError(
            f"{out_dir}: {shown}; choose another --out, or pass --force to overwrite it"
        )


def _load(data: Any) -> Any:
    from searchtome.dataset import Dataset, load

    return data if isinstance(data, Dataset) else load(data)


def execute(
    name: str,
    data: Any,
    split: str = "test",
    config: ConfigSource = None,
    overrides: Overrides = None,
    seed: int = DEFAULT_SEED,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Run a baseline in memory; returns ``(run, meta, info)`` without writing anything.

    ``meta`` follows the submission schema (``searchtome.submissions.META_REQUIRED``);
    ``info`` is the machine-readable record of the run (wall time, peak memory, dataset
    manifest hash, cache counts) that goes into ``meta.json`` as ``run_info``.
    """
    from searchtome.baselines import registry

    from searchtome import threads
    from searchtome.settings import cache_dir

    spec = registry.get(name)
    _check_needs(name, spec.needs)
    dataset = _load(data)
    dataset.queries(split)  # unknown split → did-you-mean
    cfg = make_config(spec.config_cls, config, overrides, baseline=name)
    ctx = registry.RunContext(cache_dir=cache_dir("baselines", name), seed=seed)
    _seed_everything(seed)
    log.info("running %s on %s/%s with %s", name, dataset.root, split, cfg)
    start = time.perf_counter()
    ctx.start_phase("prediction")  # a baseline that trains switches to "training" and back
    with threads.recording() as thread_choices:
        run = spec.run(dataset, split, cfg, ctx)
    ctx.phases.finish()
    wall = time.perf_counter() - start
    check_run(run, dataset, split, free_form=getattr(cfg, "free_form", False))
    facts = dataset_facts(dataset)
    notes = _portable_notes(dict(ctx.notes))
    models = [str(m) for m in notes.pop("models", [])]
    description = str(notes.pop("description", spec.summary))
    system_type = BASELINE_TYPES.get(name)
    # A lexical baseline learns nothing; others say what their model holds (None: unknown).
    parameters = notes.pop("parameters", 0 if system_type == "lexical" else None)
    memory = peak_memory(ctx.phases)
    phases = ctx.phases.records
    info = {
        "system": name,
        "split": split,
        "seed": seed,
        "wall_time_s": round(wall, 3),
        **memory,
        "memory_note": (
            "peak_rss_mib is this run's RSS high-water mark (reset at each phase's start), "
            if ctx.phases.scope == "phase"
            else "peak_rss_mib is the process's RSS high-water mark (getrusage ru_maxrss), "
        )
        + "torch CPU tensors and model weights are inside it",
        # Training apart from prediction: the leaderboard's cost table shows them side by side.
        "phases": phases,
        "training_wall_s": _training_seconds(notes, phases),
        "prediction_wall_s": phases.get("prediction", {}).get("wall_s"),
        "dataset": facts,
        "n_queries": len(run),
        "overrides": portable_values(_overrides_dict(overrides)),
        "threads": threads.summary(thread_choices),  # torch threads used and why
        # CPU model and ISA flags, and the dtype the model really ran in (a neural baseline
        # says so in its notes; null: no neural model): bf16 results differ between CPU families.
        "machine": cpu_facts(),
        "dtype": notes.pop("dtype", None),
        "system_type": system_type,  # the leaderboard's Type column
        "parameters": parameters,
        "notes": notes,
    }
    if "parameters" in notes:  # a trained model's size, for the leaderboard's cost table
        info["parameters"] = notes.pop("parameters")
    summary = [f"wall time {wall:.1f} s", f"peak RSS {memory['peak_rss_mib']:.0f} MiB"]
    if facts["manifest_sha256"]:
        summary.append(f"dataset manifest sha256 {facts['manifest_sha256']}")
    summary += [f"{k}: {v}" for k, v in notes.items() if isinstance(v, str)]
    meta = {
        "system": name,
        "description": description,
        "url": f"{PROJECT_URL}/blob/main/docs/{spec.doc}#{name}",
        "models": models,
        "trained_on": list(spec.trains_on),
        "hardware": hardware(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset_revision": facts["revision"],
        "license": "Apache-2.0",
        "command": "",
        "split": split,
        "config": portable_values(config_record(cfg)),
        "seed": seed,
        "versions": versions(),
        "notes": "; ".join(summary),
        "run_info": info,
    }
    return run, meta, info


def _training_seconds(notes: Mapping[str, Any], phases: Mapping[str, Any]) -> float | None:
    """The training's wall time: the adapter's own record (every session of a resumed training,
    and the original training when this run reused the adapter), else this run's training phase."""
    recorded = notes.get("train_seconds")
    if isinstance(recorded, int | float) and not isinstance(recorded, bool):
        return float(recorded)
    return phases.get("training", {}).get("wall_s")


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
    split: str = "test",
    config: ConfigSource = None,
    out: str | os.PathLike[str] | None = None,
    overrides: Overrides = None,
    seed: int = DEFAULT_SEED,
    command: str | None = None,
    system: str | None = None,
    depth: int = MAX_IDS,
    compress: bool = False,
    force: bool = False,
) -> Path:
    """Run baseline ``name`` on ``data`` and write its submission; returns the folder.

    ``depth`` keeps that many leaves per query (at most ``MAX_IDS``, the format's limit; the
    leaderboard measures need 10); ``compress`` writes ``predictions.jsonl.gz``.

    ``data`` is a dataset folder or a loaded :class:`~searchtome.dataset.Dataset`; ``config`` a
    JSON/TOML file or a mapping; ``overrides`` ``["k1=1.2"]`` or ``{"k1": 1.2}``. The folder
    (default ``runs/NAME``, :data:`RUNS_DIR`; never the committed ``submissions/``; a folder holding
    another run is refused unless ``force``) gets ``predictions.jsonl`` and ``meta.json`` (with the
    run's facts under ``run_info``); the system is named after the folder unless ``system`` is
    given, so variants of one baseline can sit side by side on a leaderboard.
    """
    from searchtome.submissions import MAX_IDS, write_submission

    if not 1 <= depth <= MAX_IDS:
        raise SearchTomeError(f"--depth must be between 1 and {MAX_IDS}, not {depth}")
    out_dir = Path(out) if out is not None else Path(RUNS_DIR) / name
    command = command or _python_call(name, data, split, config, overrides, seed)
    check_out_dir(out_dir, command, force)  # before the run, which may take hours
    run, meta, info = execute(name, data, split, config, overrides, seed)
    if depth < MAX_IDS:
        run = dataclasses.replace(
            run,
            rankings={q: ids[:depth] for q, ids in run.rankings.items()},
            scores=None if run.scores is None else {q: v[:depth] for q, v in run.scores.items()},
        )
        info["depth"] = depth
        # A baseline's own `depth` (how many it ranked) would otherwise contradict `--depth`.
        if isinstance(meta["config"].get("depth"), int):
            meta["config"]["depth"] = min(meta["config"]["depth"], depth)
    system = system or out_dir.resolve().name
    if system != name:
        run = dataclasses.replace(run, name=system)
        meta["description"] = f"{meta['description']} (variant of baseline {name!r})"
    meta["system"] = info["system"] = system
    info["baseline"] = name
    meta["command"] = command
    from searchtome.baselines.generative.parallel import barrier, is_main

    if not is_main():  # under `accelerate launch` every rank holds the whole run; one writes
        barrier()
        return out_dir
    path = Path(write_submission(out_dir, run, meta, compress=compress))
    log.info("wrote %s (%d queries, %.1f s)", path, len(run), info["wall_time_s"])
    barrier()
    return path


def _python_call(
    name: str, data: Any, split: str, config: ConfigSource, overrides: Overrides, seed: int
) -> str:
    from searchtome.dataset import Dataset

    data_text = portable_path(data.root if isinstance(data, Dataset) else str(data), "<DATA>")
    if isinstance(config, str | os.PathLike):
        config = portable_path(config, "<CONFIG>")
    return (
        f"run_baseline({name!r}, {data_text!r}, split={split!r}, config={config!r}, "
        f"overrides={portable_values(overrides)!r}, seed={seed})"
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
