"""The registry of named baselines (lm-evaluation-harness style).

A baseline is a function ``(dataset, split, config, context) -> Run`` plus a frozen config
dataclass whose defaults are the documented CPU settings. A config whose ``free_form`` attribute
is true (free-text generation) may name non-leaf nodes or nothing at all: the runner keeps such
ids for the scorer to count instead of calling them a bug. Modules register themselves with
:func:`register`; :func:`get` resolves a name with a did-you-mean error. Baseline modules keep
heavy imports (torch, transformers, faiss) inside their functions so that listing is cheap.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.baselines.phases import Phases
from searchtome.submissions.runinfo import RunReport

from searchtome.errors import unknown_name

# Modules that define baselines; imported on first use of the registry.
BASELINE_MODULES: tuple[str, ...] = (
    "searchtome.baselines.bm25",
    "searchtome.baselines.dpr",
    "searchtome.baselines.paper",
    "searchtome.baselines.navtree",
    "searchtome.baselines.finetune",
    "searchtome.baselines.rerank",
    "searchtome.baselines.generative.stair",
    "searchtome.baselines.generative.zeroshot",
)


@dataclass
class RunContext:
    """What a baseline may use besides data and config: where to cache, and the seed."""

    cache_dir: Path
    seed: int = 42
    out_dir: Path | None = None
    # What the baseline says about its run (models, train time, epochs, ...), filled through
    # record(); the runner writes it into meta.json (run_info.notes and the fields it lifts).
    report: RunReport = field(default_factory=RunReport)
    # Training and prediction timed and measured apart (run_info.phases); the runner starts
    # "prediction", a baseline that trains calls start_phase("training") first, then back.
    phases: Phases = field(default_factory=Phases)

    def start_phase(self, name: str) -> None:
        """From here on, time and peak memory count towards phase ``name``."""
        self.phases.start(name)

    def record(self, **facts: Any) -> None:
        """Add ``facts`` to the run's report: :class:`RunReport`'s fields, by name (a name it
        does not have raises ``TypeError`` at once, not a silently ignored key later)."""
        self.report = dataclasses.replace(self.report, **facts)


def count_parameters(model: Any) -> int | None:
    """A torch model's parameter count (LoRA layers injected into it included); None without
    one. Recorded as ``run_info.parameters``: the leaderboard's Parameters column."""
    params = getattr(model, "parameters", None)
    if not callable(params):
        return None
    return int(sum(p.numel() for p in params()))


@dataclass(frozen=True)
class BaselineSpec:
    name: str
    summary: str
    config_cls: type
    run: Callable[..., Any]
    # Extras the baseline needs beyond the core install, e.g. ("ml",).
    needs: tuple[str, ...] = ()
    # Split names the baseline trains on (recorded as "trained_on" in meta.json).
    trains_on: tuple[str, ...] = ()
    # The page under docs/ that describes it (an anchor named after the baseline is on it).
    doc: str = "baselines.md"


_REGISTRY: dict[str, BaselineSpec] = {}
_loaded = False


def register(
    name: str,
    *,
    summary: str,
    config: type,
    needs: tuple[str, ...] = (),
    trains_on: tuple[str, ...] = (),
    doc: str = "baselines.md",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@register("bm25", summary=..., config=BM25Config)`` on the run function."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY and _REGISTRY[name].run is not fn:
            raise ValueError(f"baseline {name!r} registered twice")
        _REGISTRY[name] = BaselineSpec(name, summary, config, fn, needs, trains_on, doc)
        return fn

    return deco


def _load_all() -> None:
    global _loaded
    if not _loaded:
        for module in BASELINE_MODULES:
            importlib.import_module(module)
        _loaded = True


def get(name: str) -> BaselineSpec:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise unknown_name("baseline", name, _REGISTRY) from None


def all_baselines() -> list[BaselineSpec]:
    _load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
