"""``searchtome ls baselines|trainings|config``: the baselines, the adapters in the cache, a config.

``trainings`` shows where each LLM training stands (finished, or how many epochs a resumable one
has done, with its dev R@1 per epoch), so a run spread over sittings can be followed without
its log. ``config NAME`` prints a config's resolved settings (the baseline's defaults, then the
file and its includes), each with the help text of its field; without NAME, the shipped configs.
"""

from __future__ import annotations

import argparse
import json
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


def _shipped() -> int:
    """One line per shipped config: its name, the baseline it is for, its first comment."""
    from searchtome.baselines.generative.stair import CONFIG_DIR
    from searchtome.config_file import read_config_file

    paths = sorted(CONFIG_DIR.glob("*.toml"))
    width = max((len(p.stem) for p in paths), default=0)
    print(f"{'name':<{width}}  {'for':<12}  what it is (searchtome ls config NAME: its settings)")
    for path in paths:
        baseline = read_config_file(path).baseline or "(a base)"
        print(f"{path.stem:<{width}}  {baseline:<12}  {_summary(path)}")
    return 0


def _summary(path: Any) -> str:
    """The first sentence of a config file's opening comment."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comment = " ".join(
        ln.lstrip("#").strip()
        for ln in lines[
            : next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines))
        ]
    )
    first = comment.split(". ")[0].split(": ")[0]
    return first if len(first) <= 90 else first[:87] + "..."


def _value(value: Any) -> str:
    """A setting as a config file writes it (TOML and JSON agree on these)."""
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _config(name: str, baseline: str | None) -> int:
    from searchtome.baselines import registry
    from searchtome.commands.run import config_source
    from searchtome.config import describe, make_config, set_keys
    from searchtome.config_file import read_config_file, shown_path
    from searchtome.errors import SearchTomeError

    file = read_config_file(str(config_source(name)))
    path = shown_path(file.path)
    baseline = baseline or file.baseline
    if baseline is None:
        raise SearchTomeError(
            f"{path}: this config declares no baseline (a base other configs include); "
            "name one with --baseline NAME"
        )
    cls = registry.get(baseline).config_cls
    cfg = make_config(cls, file.path, baseline=baseline)
    given = set_keys(cls, file.settings)
    includes = "; includes " + ", ".join(p.name for p in file.includes) if file.includes else ""
    print(f"{name}: for {baseline} ({path}{includes}); * = set by the file, else the default")
    rows = describe(cfg)
    width = max(len(f"{r.key} = {_value(r.value)}") for r in rows)
    width = min(width, 44)
    section = None
    for row in rows:
        if row.section and row.section != section:
            section = row.section
            print(f"[{section}] {row.section_help}")
        mark = "*" if row.key in given else " "
        text = f"{row.key} = {_value(row.value)}"
        print(f"{mark} {text:<{width}}  {row.help}".rstrip())
    return 0


def _command(args: argparse.Namespace) -> int:
    if args.what == "config":
        return _config(args.name, args.baseline) if args.name else _shipped()
    if args.name:
        from searchtome.errors import SearchTomeError

        raise SearchTomeError(f"ls {args.what} takes no NAME (only ls config does)")
    return _trainings() if args.what == "trainings" else _baselines()


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ls",
        help="list registered baselines, the LLM trainings in the cache, or a config's settings",
    )
    p.add_argument(
        "what",
        choices=["baselines", "trainings", "config"],
        help="baselines: the registry; trainings: finished and resumable adapters; config: a "
        "config's resolved settings with their help (without NAME: the shipped configs)",
    )
    p.add_argument(
        "name",
        nargs="?",
        help="config: a shipped config's name (stair-mistral7b, ...) or a config file",
    )
    p.add_argument(
        "--baseline",
        help="config: the baseline to resolve a file for that declares none (default: the "
        "one it declares)",
    )
    p.set_defaults(func=_command)
