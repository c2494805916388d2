"""``searchtome run``, ``searchtome tune`` and ``searchtome ls baselines``; the runner behind them.

The runner resolves a baseline in the registry, builds its frozen config (defaults, then a
``--config`` file, then ``--set key=value`` overrides), runs it with a seeded
:class:`~searchtome.baselines.registry.RunContext`, checks the run (every query of the split,
only leaves of the query's own book, at most 100 ids, no duplicates) and writes a submission
whose ``meta.json`` records config, seed, versions, wall time, peak memory and the dataset's
manifest hash. :func:`run_baseline` is the same thing as a Python call.

Module level imports stay light: the CLI parser is built on every ``searchtome`` invocation.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import logging
import os
import platform
import random
import resource
import shlex
import sys
import time
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError

log = logging.getLogger(__name__)

MAX_IDS = 100
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


# -- configs -------------------------------------------------------------------------------------


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def config_keys(cls: type, prefix: str = "") -> list[str]:
    """Every settable key of a config class, nested ones dotted (``encoder.model``)."""
    keys = []
    for name, tp in _field_types(cls).items():
        keys.append(prefix + name)
        if _is_dataclass_type(tp):
            keys.extend(config_keys(tp, f"{prefix}{name}."))
    return keys


def _unknown_key(cls: type, key: str, where: str) -> SearchTomeError:
    import difflib

    known = config_keys(cls)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return SearchTomeError(f"{where}: unknown config key {key!r}{hint}; known: {', '.join(known)}")


def _coerce(value: Any, tp: Any, key: str, where: str) -> Any:
    """``value`` as the declared field type, or a one-line error naming the key."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        args = typing.get_args(tp)
        if type(None) in args and (
            value is None or (isinstance(value, str) and value.lower() in {"null", "none"})
        ):
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, where)
            except SearchTomeError as exc:
                errors.append(str(exc))
        raise SearchTomeError(errors[0] if errors else f"{where}: {key}: bad value {value!r}")
    if _is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if isinstance(value, str) and hasattr(tp, "preset"):
            return tp.preset(value)
        raise SearchTomeError(f"{where}: {key}: expected a table of settings, got {value!r}")
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise SearchTomeError(f"{where}: {key}: expected a list, got {value!r}")
        (item_tp, *_rest) = typing.get_args(tp) or (Any,)
        return tuple(value if item_tp is Any else (_coerce(v, item_tp, key, where) for v in value))
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {
            "true",
            "yes",
            "on",
            "1",
            "false",
            "no",
            "off",
            "0",
        }:
            return value.lower() in {"true", "yes", "on", "1"}
        raise SearchTomeError(f"{where}: {key}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise SearchTomeError(f"{where}: {key}: expected an integer, got {value!r}")
        try:
            number = float(value)
        except ValueError:
            raise SearchTomeError(f"{where}: {key}: expected an integer, got {value!r}") from None
        if number != int(number):
            raise SearchTomeError(f"{where}: {key}: expected an integer, got {value!r}")
        return int(number)
    if tp is float:
        if isinstance(value, bool):
            raise SearchTomeError(f"{where}: {key}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SearchTomeError(f"{where}: {key}: expected a number, got {value!r}") from None
    if tp is str:
        if isinstance(value, (dict, list)):
            raise SearchTomeError(f"{where}: {key}: expected a string, got {value!r}")
        return str(value)
    return value


def _build(
    cls: type, values: dict[str, Any], where: str, prefix: str = "", root: type | None = None
) -> Any:
    root = root or cls
    types_ = _field_types(cls)
    kwargs = {}
    for name, value in values.items():
        if name not in types_:
            raise _unknown_key(root, prefix + name, where)
        tp = types_[name]
        if _is_dataclass_type(tp) and isinstance(value, Mapping):
            kwargs[name] = _build(tp, dict(value), where, f"{prefix}{name}.", root)
        else:
            kwargs[name] = _coerce(value, tp, prefix + name, where)
    try:
        return cls(**kwargs)
    except SearchTomeError as exc:
        raise SearchTomeError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SearchTomeError(f"{where}: invalid config: {exc}") from None


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON or TOML config; a submission's ``meta.json`` works too (its ``config`` is used)."""
    path = Path(path)
    if not path.is_file():
        raise SearchTomeError(f"{path}: config file not found")
    if path.suffix == ".toml":
        import tomllib

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise SearchTomeError(f"{path}: not valid TOML ({exc})") from None
    else:
        from searchtome.io import read_json

        data = read_json(path)
    if not isinstance(data, dict):
        raise SearchTomeError(f"{path}: a config must be a table of settings")
    if "system" in data and isinstance(data.get("config"), dict):
        data = data["config"]
    return data


def make_config(
    cls: type,
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
) -> Any:
    """Defaults ← config file or mapping ← ``key=value`` overrides, as a frozen ``cls``."""
    values: dict[str, Any] = {}
    where = "config"
    if isinstance(config, (str, os.PathLike)):
        where = str(config)
        values = read_config_file(config)
    elif config is not None:
        values = dict(config)
    built = _build(cls, values, where)  # validates file keys against the defaults
    values = dataclasses.asdict(built)
    items: list[tuple[str, Any]]
    if overrides is None:
        items = []
    elif isinstance(overrides, Mapping):
        items = list(overrides.items())
    else:
        items = []
        for text in overrides:
            key, sep, raw = text.partition("=")
            if not sep or not key.strip():
                raise SearchTomeError(f"--set {text!r}: expected KEY=VALUE, e.g. --set k1=1.2")
            # Kept as text: _coerce parses it by the field's declared type.
            items.append((key.strip(), raw))
    for key, value in items:
        if key not in config_keys(cls):
            raise _unknown_key(cls, key, f"--set {key}")
        *parents, leaf = key.split(".")
        owner = cls
        for parent in parents:
            owner = _field_types(owner)[parent]
        tp = _field_types(owner)[leaf]
        if _is_dataclass_type(tp) and isinstance(value, str) and hasattr(tp, "preset"):
            # A preset name replaces the whole nested table; later keys refine it.
            value = dataclasses.asdict(tp.preset(value))
        update: dict[str, Any] = {leaf: value}
        for parent in reversed(parents):
            update = {parent: update}
        values = (
            _merge(values, update)
            if not isinstance(value, Mapping)
            else _replace_at(values, [*parents, leaf], value)
        )
    return _build(cls, values, "--set" if items else where)


def _replace_at(values: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    out = dict(values)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _replace_at(dict(out[path[0]]), path[1:], value)
    return out


# -- environment facts ---------------------------------------------------------------------------


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in _VERSIONED:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return out


def hardware() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    gib = ""
    with contextlib.suppress(ValueError, OSError, AttributeError):
        gib = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM"
    gpu = ""
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            gpu = f", GPU {torch.cuda.get_device_name(0)}"
    return f"{cpu}, {cores} cores{gib}{gpu or ', no GPU used'}"


def peak_memory() -> dict[str, Any]:
    """The process's RSS high-water mark (torch CPU tensors are inside it) and GPU peak if any."""
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
            raise SearchTomeError(f"baseline {run.name!r}: query {qid}: >100 or duplicate ids")
        stray = [i for i in ids if i not in leaves[book]]
        if stray and not free_form:
            raise SearchTomeError(
                f"baseline {run.name!r}: query {qid}: {stray[0]!r} is not a leaf of {book!r}"
            )
        if run.scores is not None and len(run.scores[qid]) != len(ids):
            raise SearchTomeError(f"baseline {run.name!r}: query {qid}: scores not parallel")


def dataset_facts(dataset: Any) -> dict[str, Any]:
    from searchtome.io import sha256_file

    manifest = dataset.root / "manifest.json"
    digest = sha256_file(manifest) if manifest.is_file() else None
    m = dataset.manifest or {}
    label = m.get("name") or dataset.root.name
    version = m.get("revision") or m.get("version")
    revision = f"{label}@{version}" if version else label
    if digest:
        revision += f" (manifest sha256:{digest[:16]})"
    return {
        "path": str(dataset.root),
        "name": m.get("name"),
        "revision": revision,
        "manifest_sha256": digest,
        "books": dataset.book_ids(),
    }


def execute(
    name: str,
    data: Any,
    split: str = "test",
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    seed: int = 42,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Run a baseline in memory; returns ``(run, meta, info)`` without writing anything.

    ``meta`` follows the submission schema (``searchtome.submissions.META_REQUIRED``);
    ``info`` is the machine-readable record of the run (wall time, peak memory, dataset
    manifest hash, cache counts) that goes into ``meta.json`` as ``run_info``.
    """
    from searchtome.baselines import registry
    from searchtome.dataset.layout import Dataset, load
    from searchtome.settings import cache_dir

    spec = registry.get(name)
    _check_needs(name, spec.needs)
    dataset = data if isinstance(data, Dataset) else load(data)
    dataset.queries(split)  # unknown split → did-you-mean
    cfg = make_config(spec.config_cls, config, overrides)
    ctx = registry.RunContext(cache_dir=cache_dir("baselines", name), seed=seed)
    _seed_everything(seed)
    log.info("running %s on %s/%s with %s", name, dataset.root, split, cfg)
    start = time.perf_counter()
    run = spec.run(dataset, split, cfg, ctx)
    wall = time.perf_counter() - start
    check_run(run, dataset, split, free_form=getattr(cfg, "free_form", False))
    facts = dataset_facts(dataset)
    notes = dict(ctx.notes)
    models = [str(m) for m in notes.pop("models", [])]
    description = str(notes.pop("description", spec.summary))
    memory = peak_memory()
    info = {
        "system": name,
        "split": split,
        "seed": seed,
        "wall_time_s": round(wall, 3),
        **memory,
        "memory_note": "peak_rss_mib is the process's RSS high-water mark (getrusage ru_maxrss); "
        "torch CPU tensors and model weights are inside it",
        "dataset": facts,
        "n_queries": len(run),
        "overrides": _overrides_dict(overrides),
        "notes": notes,
    }
    summary = [f"wall time {wall:.1f} s", f"peak RSS {memory['peak_rss_mib']:.0f} MiB"]
    if facts["manifest_sha256"]:
        summary.append(f"dataset manifest sha256 {facts['manifest_sha256']}")
    summary += [f"{k}: {v}" for k, v in notes.items() if isinstance(v, str)]
    meta = {
        "system": name,
        "description": description,
        "url": f"{PROJECT_URL}/blob/main/docs/baselines.md#{name}",
        "models": models,
        "trained_on": list(spec.trains_on),
        "hardware": hardware(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset_revision": facts["revision"],
        "license": "Apache-2.0",
        "command": "",
        "split": split,
        "config": dataclasses.asdict(cfg),
        "seed": seed,
        "versions": versions(),
        "notes": "; ".join(summary),
        "run_info": info,
    }
    return run, meta, info


def _overrides_dict(overrides: Sequence[str] | Mapping[str, Any] | None) -> dict[str, Any]:
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
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    seed: int = 42,
    command: str | None = None,
    system: str | None = None,
    depth: int = 100,
    compress: bool = False,
) -> Path:
    """Run baseline ``name`` on ``data`` and write its submission; returns the folder.

    ``depth`` keeps that many leaves per query (at most 100, the format's limit; the leaderboard
    measures need 10); ``compress`` writes ``predictions.jsonl.gz``.

    ``data`` is a dataset folder or a loaded :class:`~searchtome.dataset.layout.Dataset`; ``config`` a
    JSON/TOML file or a mapping; ``overrides`` ``["k1=1.2"]`` or ``{"k1": 1.2}``. The folder
    (default ``submissions/NAME``) gets ``predictions.jsonl`` and ``meta.json`` (with the
    run's facts under ``run_info``); the system is named after the folder unless ``system`` is given, so
    variants of one baseline can sit side by side on a leaderboard.
    """
    from searchtome.submissions import write_submission

    if not 1 <= depth <= 100:
        raise SearchTomeError(f"--depth must be between 1 and 100, not {depth}")
    run, meta, info = execute(name, data, split, config, overrides, seed)
    if depth < 100:
        run = dataclasses.replace(
            run,
            rankings={q: ids[:depth] for q, ids in run.rankings.items()},
            scores=None if run.scores is None else {q: v[:depth] for q, v in run.scores.items()},
        )
        info["depth"] = depth
    out_dir = Path(out) if out is not None else Path("submissions") / name
    system = system or out_dir.resolve().name
    if system != name:
        run = dataclasses.replace(run, name=system)
        meta["description"] = f"{meta['description']} (variant of baseline {name!r})"
    meta["system"] = info["system"] = system
    info["baseline"] = name
    meta["command"] = command or _python_call(name, data, split, config, overrides, seed)
    path = Path(write_submission(out_dir, run, meta, compress=compress))
    log.info("wrote %s (%d queries, %.1f s)", path, len(run), info["wall_time_s"])
    return path


def _python_call(name, data, split, config, overrides, seed) -> str:
    from searchtome.dataset.layout import Dataset

    data_text = str(data.root) if isinstance(data, Dataset) else str(data)
    return (
        f"run_baseline({name!r}, {data_text!r}, split={split!r}, config={config!r}, "
        f"overrides={overrides!r}, seed={seed})"
    )


# -- tuning --------------------------------------------------------------------------------------


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for text in items:
        key, sep, raw = text.partition("=")
        if not sep or not raw:
            raise SearchTomeError(
                f"--grid {text!r}: expected KEY=V1,V2,..., e.g. --grid k1=0.9,1.2"
            )
        grid[key.strip()] = raw.split(",")
    return grid


def tune(
    name: str,
    data: Any,
    grid: Mapping[str, Sequence[Any]],
    split: str = "dev",
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    measures: Sequence[str] = ("R@1", "R@3", "nDCG@3"),
    seed: int = 42,
) -> list[dict[str, Any]]:
    """Score every grid point on ``split`` (dev by default); rows sorted best first."""
    from searchtome.dataset.layout import Dataset, load
    from searchtome.metrics.measures import Qrels, evaluate, mean_scores

    dataset = data if isinstance(data, Dataset) else load(data)
    qrels = Qrels.from_dataset(dataset, split)
    base = dict(overrides) if isinstance(overrides, Mapping) else {}
    base_list = [] if isinstance(overrides, Mapping) or overrides is None else list(overrides)
    rows = []
    keys = list(grid)
    points = list(itertools.product(*(grid[k] for k in keys)))
    from searchtome.settings import progress

    for point in progress(points, desc=f"tuning {name}", unit="config"):
        setting = dict(zip(keys, point, strict=True))
        over = (
            [f"{k}={v}" for k, v in {**base, **setting}.items()]
            if not base_list
            else [*base_list, *(f"{k}={v}" for k, v in setting.items())]
        )
        start = time.perf_counter()
        run, _, _ = execute(name, dataset, split, config, over, seed)
        metrics_log = logging.getLogger("searchtome.metrics.measures")
        level = metrics_log.level
        metrics_log.setLevel(logging.ERROR)  # tie warnings once per grid point are noise here
        try:
            scores = mean_scores(evaluate(run, qrels, list(measures)))
        finally:
            metrics_log.setLevel(level)
        rows.append(
            {
                "setting": setting,
                **{m: scores[m] for m in measures},
                "seconds": round(time.perf_counter() - start, 2),
            }
        )
    first = measures[0]
    rows.sort(key=lambda r: (-r[first], json.dumps(r["setting"], sort_keys=True)))
    return rows


# -- argparse ------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    # Rebuilt from the parsed options (canonical, and right however main() was called).
    parts = ["searchtome", "run", args.name, "--data", args.data, "--split", args.split]
    if args.config:
        parts += ["--config", args.config]
    if args.out:
        parts += ["--out", args.out]
    if args.system:
        parts += ["--name", args.system]
    for item in args.set:
        parts += ["--set", item]
    parts += ["--seed", str(args.seed)]
    if args.depth != 100:
        parts += ["--depth", str(args.depth)]
    if args.gzip:
        parts.append("--gzip")
    command = " ".join(shlex.quote(p) for p in parts)
    path = run_baseline(
        args.name,
        args.data,
        split=args.split,
        config=args.config,
        out=args.out,
        overrides=args.set,
        seed=args.seed,
        command=command,
        system=args.system,
        depth=args.depth,
        compress=args.gzip,
    )
    print(path)
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from searchtome.io import write_json

    grid = parse_grid(args.grid)
    measures = tuple(args.measure) if args.measure else ("R@1", "R@3", "nDCG@3")
    rows = tune(
        args.name,
        args.data,
        grid,
        split=args.split,
        config=args.config,
        overrides=args.set,
        measures=measures,
        seed=args.seed,
    )
    keys = list(grid)
    print("| " + " | ".join(keys + list(measures)) + " | s |")
    print("|" + "---|" * (len(keys) + len(measures) + 1))
    for row in rows:
        cells = [str(row["setting"][k]) for k in keys]
        cells += [f"{row[m]:.4f}" for m in measures] + [f"{row['seconds']:.1f}"]
        print("| " + " | ".join(cells) + " |")
    if args.out:
        write_json(
            args.out, {"baseline": args.name, "split": args.split, "grid": grid, "rows": rows}
        )
    return 0


def _cmd_ls(args: argparse.Namespace) -> int:
    from searchtome.baselines import registry

    specs = registry.all_baselines()
    width = max((len(s.name) for s in specs), default=0)
    for spec in specs:
        extra = f" [needs: {', '.join(spec.needs)}]" if spec.needs else ""
        print(f"{spec.name:<{width}}  {spec.summary}{extra}")
    return 0


def _add_common(p: argparse.ArgumentParser, default_split: str) -> None:
    p.add_argument("name", help="baseline name (see `searchtome ls baselines`)")
    p.add_argument("--data", required=True, help="dataset folder or hf://ORG/NAME[@REV]")
    p.add_argument("--split", default=default_split, help=f"query split (default {default_split})")
    p.add_argument("--config", help="JSON or TOML config file (or a meta.json to repeat a run)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key, dotted for nested ones (encoder.model=...); repeatable",
    )
    p.add_argument("--seed", type=int, default=42, help="random seed (default 42)")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a baseline and write its submission",
        description="Run a named baseline on a dataset split and write predictions.jsonl + meta.json.",
    )
    _add_common(p, "test")
    p.add_argument("--out", help="submission folder (default submissions/NAME)")
    p.add_argument(
        "--name",
        dest="system",
        help="system name in meta.json (default: the --out folder's name)",
    )
    p.add_argument(
        "--depth", type=int, default=100, help="leaves kept per query, 1-100 (default 100)"
    )
    p.add_argument("--gzip", action="store_true", help="write predictions.jsonl.gz")
    p.set_defaults(func=_cmd_run)

    p = subparsers.add_parser(
        "tune",
        help="grid-search a baseline's config on the dev split",
        description="Score every combination of --grid values (dev split by default), best first.",
    )
    _add_common(p, "dev")
    p.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2",
        help="values to try for one config key; repeatable (the grid is their product)",
    )
    p.add_argument("--measure", action="append", help="measures to report; the first one sorts")
    p.add_argument("--out", help="also write the table as JSON")
    p.set_defaults(func=_cmd_tune)

    p = subparsers.add_parser("ls", help="list registered things (baselines)")
    p.add_argument("what", choices=["baselines"], help="what to list")
    p.set_defaults(func=_cmd_ls)
