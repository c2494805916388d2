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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.baselines.phases import Phases

from searchtome.limits import DEFAULT_SEED
from searchtome.registry import Registry
from searchtome.submissions.runinfo import RunReport

# Every baseline and the module that registers it: `searchtome run NAME` imports that module
# alone, and names are listed without importing any.
BASELINES: Registry[BaselineSpec] = Registry(
    "baseline",
    {
        "bm25": "searchtome.baselines.bm25",
        "bm25-plain": "searchtome.baselines.bm25",
        "dpr": "searchtome.baselines.dpr",
        "bm25-paper": "searchtome.baselines.paper",
        "dpr-paper": "searchtome.baselines.paper",
        "navtree": "searchtome.baselines.navtree",
        "hybrid": "searchtome.baselines.navtree",
        "toc-navtree": "searchtome.baselines.navtree",
        "finetune": "searchtome.baselines.finetune",
        "finetune-hybrid": "searchtome.baselines.finetune",
        "rerank": "searchtome.baselines.rerank",
        "stair": "searchtome.baselines.generative.stair",
        "stair-rerank": "searchtome.baselines.generative.rerank",
        "dsi": "searchtome.baselines.generative.stair",
        "dsi-constrained": "searchtome.baselines.generative.stair",
        "zeroshot-llm": "searchtome.baselines.generative.zeroshot",
    },
)


@dataclass
class RunContext:
    """What a baseline may use besides data and config: where to cache, and the seed."""

    cache_dir: Path
    seed: int = DEFAULT_SEED
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
        BASELINES.add(name, BaselineSpec(name, summary, config, fn, needs, trains_on, doc))
        return fn

    return deco


def get(name: str) -> BaselineSpec:
    """The baseline ``name`` (its module imported on first use), with a did-you-mean."""
    return BASELINES.get(name)


def all_baselines() -> list[BaselineSpec]:
    """Every baseline, sorted by name (imports every baseline module: none imports torch)."""
    return sorted(BASELINES.values(), key=lambda spec: spec.name)
