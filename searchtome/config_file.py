"""Config files: JSON or TOML settings, the files they ``include`` and the baseline they are for.

A file's ``include`` names its bases (paths relative to it): their settings come first, its own
go on top, tables merged key by key — the same precedence as everywhere else
(:mod:`searchtome.config`). ``baseline = "dsi"`` says which baseline a file is for, so that
``searchtome run stair --config dsi-mistral7b`` is refused in one line instead of silently
running STAIR with DSI's settings. A submission's ``meta.json`` reads as its ``config``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError

INCLUDE = "include"  # a file's bases, paths relative to it: their settings first, its own on top
BASELINE = "baseline"  # the baseline a file is for; make_config refuses it for another one


@dataclasses.dataclass(frozen=True)
class ConfigFile:
    """A config file's settings with its includes resolved, and what it declares."""

    path: Path
    settings: dict[str, Any]
    baseline: str | None = None  # declared by this file itself (never inherited from a base)
    includes: tuple[Path, ...] = ()  # every file it pulls in, directly or through another


def read_config_file(path: str | os.PathLike[str]) -> ConfigFile:
    """A JSON or TOML config, its ``include`` chain merged (a cycle or a missing include is a
    one-line error naming the file); a submission's ``meta.json`` works too (its ``config``)."""
    return _read_file(Path(path), ())


def _read_file(path: Path, chain: tuple[Path, ...]) -> ConfigFile:
    data = _parse_file(path)
    if "system" in data and isinstance(data.get("config"), dict):
        return ConfigFile(path, dict(data["config"]))
    names = data.pop(INCLUDE, [])
    names = [names] if isinstance(names, str) else names
    baseline = data.pop(BASELINE, None)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SearchTomeError(f"{path}: {INCLUDE} must be a file name or a list of them")
    if baseline is not None and not isinstance(baseline, str):
        raise SearchTomeError(f"{path}: {BASELINE} must be a baseline's name, not {baseline!r}")
    settings: dict[str, Any] = {}
    included: list[Path] = []
    for name in names:
        target = path.parent / name
        seen = [*chain, path]
        if any(target.resolve() == p.resolve() for p in seen):
            loop = " -> ".join(p.name for p in [*seen, target])
            raise SearchTomeError(f"{path}: include cycle {loop}; remove one of these includes")
        if not target.is_file():
            raise SearchTomeError(
                f"{path}: include {name!r} not found ({target}); an include is a path relative "
                "to the file that names it"
            )
        base = _read_file(target, tuple(seen))
        settings = merge_tables(settings, base.settings)
        included += [target, *base.includes]
    return ConfigFile(path, merge_tables(settings, data), baseline, tuple(included))


def _parse_file(path: Path) -> dict[str, Any]:
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
    return data


def merge_tables(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``; a table in both is merged key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_tables(out[key], value)
        else:
            out[key] = value
    return out


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder when it is inside it (shorter messages)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def check_baseline(file: ConfigFile, baseline: str) -> None:
    """Refuse a config file that declares another baseline than ``baseline``."""
    if file.baseline is not None and file.baseline != baseline:
        shown = shown_path(file.path)
        raise SearchTomeError(
            f"{shown}: this config is for {file.baseline}; use searchtome run {file.baseline} "
            f"--config {shown}"
        )
