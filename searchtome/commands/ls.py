"""``searchtome ls baselines``: every registered baseline on one line, with what it needs."""

from __future__ import annotations

import argparse
from typing import Any


def _command(args: argparse.Namespace) -> int:
    from searchtome.baselines import registry

    specs = registry.all_baselines()
    width = max((len(s.name) for s in specs), default=0)
    for spec in specs:
        extra = f" [needs: {', '.join(spec.needs)}]" if spec.needs else ""
        print(f"{spec.name:<{width}}  {spec.summary}{extra}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("ls", help="list registered things (baselines)")
    p.add_argument("what", choices=["baselines"], help="what to list")
    p.set_defaults(func=_command)
