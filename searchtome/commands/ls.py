"""``searchtome ls baselines|trainings``: the registered baselines, or the adapters in the cache.

``trainings`` shows where each LLM training stands (finished, or how many epochs a resumable one
has done, with its dev R@1 per epoch), so a run spread over sittings can be followed without
its log.
"""

from __future__ import annotations

import argparse
from typing import Any


def _baselines() -> int:
    from searchtome.baselines import registry

    specs = registry.all_baselines()
    width = max((len(s.name) for s in specs), default=0)
    for spec in specs:
        extra = f" [needs: {', '.join(spec.needs)}]" if spec.needs else ""
        print(f"{spec.name:<{width}}  {spec.summary}{extra}")
    return 0


def _trainings() -> int:
    from searchtome.baselines.generative.trainings import trainings
    from searchtome.settings import home

    root = home() / "baselines"
    found = trainings(root) if root.is_dir() else []
    if not found:
        print(f"no trained or resumable adapters under {root}")
    for status in found:
        print(status.line())
    return 0


def _command(args: argparse.Namespace) -> int:
    return _trainings() if args.what == "trainings" else _baselines()


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ls", help="list registered baselines, or the LLM trainings in the cache"
    )
    p.add_argument(
        "what",
        choices=["baselines", "trainings"],
        help="baselines: the registry; trainings: finished and resumable adapters",
    )
    p.set_defaults(func=_command)
