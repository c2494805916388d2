"""``searchtome run``: run a baseline and write its submission (see :mod:`searchtome.baselines.runner`).

Module level imports stay light: the CLI parser is built on every ``searchtome`` invocation.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from searchtome.limits import DEFAULT_SEED, MAX_IDS


def add_common_options(p: argparse.ArgumentParser, default_split: str) -> None:
    """The baseline, dataset, split, config layers and seed, shared by ``run`` and ``tune``."""
    p.add_argument("name", help="baseline name (see `searchtome ls baselines`)")
    p.add_argument("--data", required=True, help="dataset folder or hf://ORG/NAME[@REV]")
    p.add_argument("--split", default=default_split, help=f"query split (default {default_split})")
    p.add_argument(
        "--config",
        help="JSON or TOML config file, a meta.json to repeat a run, or the name of a shipped "
        "config (stair-fast, stair-mistral7b, ...; baselines/configs/)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key, dotted for nested ones (encoder.model=...); repeatable",
    )
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})"
    )


_PLACEHOLDERS = ("<DATA>", "<CONFIG>", "<OUT>")


def config_source(value: str | None) -> str | None:
    """``--config``'s file: the value itself, or the shipped config a bare name stands for.

    A bare name (no folder, no suffix, no such file here) is looked up among the configs
    installed with the package, with a did-you-mean when there is none of that name.
    """
    from pathlib import Path

    if not value or Path(value).exists() or Path(value).suffix or "/" in value or "\\" in value:
        return value
    from searchtome.baselines.generative.stair import config_path

    return str(config_path(value))


def _command_line(args: argparse.Namespace) -> str:
    # Rebuilt from the parsed options (canonical, and right however main() was called); paths
    # are recorded relative to the current folder or as <DATA>/<CONFIG>/<OUT>, never as an
    # absolute path of this machine.
    from searchtome.baselines.runner import portable_path, portable_setting

    data = portable_path(args.data, "<DATA>")
    parts = ["searchtome", "run", args.name, "--data", data, "--split", args.split]
    if args.config:
        parts += ["--config", portable_path(args.config, "<CONFIG>")]
    if args.out:
        parts += ["--out", portable_path(args.out, "<OUT>")]
    if args.system:
        parts += ["--name", args.system]
    for item in args.set:
        parts += ["--set", portable_setting(item)]
    parts += ["--seed", str(args.seed)]
    if args.depth != MAX_IDS:
        parts += ["--depth", str(args.depth)]
    if args.gzip:
        parts.append("--gzip")
    # Placeholders stay bare: they are to be replaced, not run as they are.
    return " ".join(p if p in _PLACEHOLDERS else shlex.quote(p) for p in parts)


def _command(args: argparse.Namespace) -> int:
    from searchtome.baselines.runner import OutputOptions, RunOptions, run_baseline

    path = run_baseline(
        args.name,
        args.data,
        RunOptions(args.split, config_source(args.config), args.set, args.seed),
        OutputOptions(
            out=args.out,
            command=_command_line(args),
            system=args.system,
            depth=args.depth,
            compress=args.gzip,
            force=args.force,
        ),
    )
    print(f"wrote {path}/")
    return 0


# Kept equal to searchtome.baselines.runner.RUNS_DIR (tests/baselines/test_baselines_runner.py
# checks it);
# not imported, so that building the parser stays cheap.
RUNS_DIR = "runs"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a baseline and write its submission",
        description="Run a named baseline on a dataset split and write predictions.jsonl + meta.json.",
    )
    add_common_options(p, "test")
    p.add_argument(
        "--out",
        help=f"submission folder (default {RUNS_DIR}/NAME in the current folder); a folder "
        "holding another run, such as a committed submissions/NAME, is refused without --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite an --out folder that holds a different run (default: refuse)",
    )
    p.add_argument(
        "--name",
        dest="system",
        help="system name in meta.json (default: the --out folder's name)",
    )
    p.add_argument(
        "--depth",
        type=int,
        default=MAX_IDS,
        help=f"leaves kept per query, 1-{MAX_IDS} (default {MAX_IDS})",
    )
    p.add_argument("--gzip", action="store_true", help="write predictions.jsonl.gz")
    p.set_defaults(func=_command)
