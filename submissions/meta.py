"""``meta.json``: reading it defensively, checking its fields, and making a complete one.

The fields and their JSON types are in :data:`~searchtome.submissions.schema.META_REQUIRED` and
:data:`~searchtome.submissions.schema.META_OPTIONAL`; problems name the line of the key.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any

from searchtome.submissions.lines import DEFAULT_LIMITS, Limits
from searchtome.submissions.problems import Problem, quote
from searchtome.submissions.schema import META_FIELDS, META_FILE, META_REQUIRED
from searchtome.submissions.strictjson import key_lines, loads_strict, type_name, unusable

from searchtome.errors import SearchTomeError
from searchtome.hardware import hardware as describe_hardware
from searchtome.io import PathLike
from searchtome.version import __version__

# JSON type name (as written in the schema) -> check(value, required).
_META_CHECKS: dict[str, Callable[[Any, bool], bool]] = {
    "string": lambda v, required: isinstance(v, str) and (not required or bool(v.strip())),
    "list of strings": lambda v, _: (
        isinstance(v, list) and all(isinstance(x, str) and x for x in v)
    ),
    "object": lambda v, _: isinstance(v, dict),
    "integer or null": lambda v, _: v is None or (isinstance(v, int) and not isinstance(v, bool)),
}

MetaRead = tuple[dict[str, Any] | None, dict[str, int], list[Problem]]


def check_meta(meta: Any, shown: str, key_lines: Mapping[str, int] | None = None) -> list[Problem]:
    """Field, type and value checks of a ``meta.json`` object."""
    key_lines = key_lines or {}
    problems: list[Problem] = []
    if not isinstance(meta, dict):
        return [Problem(shown, 1, "json", f"expected a JSON object, got {type_name(meta)}", "type")]

    def err(key: str, msg: str, code: str = "type") -> None:
        shown_key = key if len(key) <= 60 else f"{key[:60]}… ({len(key):,} characters)"
        problems.append(Problem(shown, key_lines.get(key), shown_key, msg, code))

    for key in META_REQUIRED:
        if key not in meta:
            err(key, f"missing ({META_REQUIRED[key][1]})", "missing-field")
    for key in meta:
        if key not in META_FIELDS:
            close = difflib.get_close_matches(str(key)[:100], list(META_FIELDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            message = f"unexpected field{hint}; put extra information under 'notes' or 'config'"
            err(key, message, "extra-field")
    for key, value in meta.items():
        if key not in META_FIELDS:
            continue
        kind = META_FIELDS[key][0]
        if not _META_CHECKS[kind](value, key in META_REQUIRED):
            err(key, f"expected {_article(kind)}, got {type_name(value)}")
            continue
        found = unusable(value)
        if found is not None:
            # Inside a config or run_info: the leaderboard would fail writing it out later.
            where, what = found
            err(key, f"{key}{where}: {what}")
    value = meta.get("date")
    if isinstance(value, str) and value.strip() and not _is_iso_date(value):
        err("date", f"{quote(value)} is not an ISO 8601 date (YYYY-MM-DD)")
    system = meta.get("system")
    if isinstance(system, str) and ("/" in system or "\\" in system or system.strip() != system):
        err("system", f"{quote(system)} must not contain slashes or surrounding spaces")
    return problems


def _article(kind: str) -> str:
    """``a non-empty string``, ``an object``, ``an integer or null``, ``a list of strings``."""
    if kind == "string":
        return "a non-empty string"
    return f"an {kind}" if kind.startswith(("o", "i")) else f"a {kind}"


def _is_iso_date(value: str) -> bool:
    try:
        if len(value) == 10:
            date.fromisoformat(value)
        else:
            datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def read_meta(path: PathLike, limits: Limits = DEFAULT_LIMITS) -> MetaRead:
    """Parse and check ``meta.json``: (object or None, line of each key, problems)."""
    path = Path(path)
    shown = str(path)
    if not path.is_file():
        message = "missing; every submission needs meta.json"
        return None, {}, [Problem(shown, None, "file", message, "missing-file")]
    size = path.stat().st_size
    if size > limits.max_meta_bytes:
        message = f"{size:,} bytes exceeds the {limits.max_meta_bytes:,}-byte limit"
        return None, {}, [Problem(shown, None, "size", message, "too-large")]
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        message = f"not valid UTF-8 (byte {exc.start + 1})"
        return None, {}, [Problem(shown, None, "encoding", message, "encoding")]
    try:
        meta = loads_strict(text)
    except json.JSONDecodeError as exc:
        return None, {}, [Problem(shown, exc.lineno, "json", f"not valid JSON ({exc.msg})", "json")]
    except ValueError as exc:
        return None, {}, [Problem(shown, None, "json", f"not valid JSON ({exc})", "json")]
    lines = key_lines(text)
    problems = check_meta(meta, shown, lines)
    return (meta if isinstance(meta, dict) else None), lines, problems


def make_meta(
    system: str,
    *,
    description: str,
    command: str,
    dataset_revision: str,
    models: list[str] | tuple[str, ...] = (),
    trained_on: list[str] | tuple[str, ...] = (),
    license: str = "CC-BY-4.0",
    hardware: str | None = None,
    date_: str | None = None,
    **optional: Any,
) -> dict[str, Any]:
    """A complete ``meta.json`` object; hardware, date and package versions filled in when omitted.

    ``optional`` takes the :data:`~searchtome.submissions.schema.META_OPTIONAL` fields (``url``,
    ``config``, ``seed``, ...). Raises :class:`SearchTomeError` when the result would not pass
    :func:`check_meta`.
    """
    meta: dict[str, Any] = {
        "system": system,
        "description": description,
        "command": command,
        "dataset_revision": dataset_revision,
        "models": list(models),
        "trained_on": list(trained_on),
        "license": license,
        "hardware": hardware or describe_hardware(),
        "date": date_ or date.today().isoformat(),
    }
    versions = {"searchtome": __version__, "python": sys.version.split()[0]}
    versions.update(optional.pop("versions", {}) or {})
    meta["versions"] = versions
    meta.update(optional)
    problems = check_meta(meta, META_FILE)
    if problems:
        raise SearchTomeError("; ".join(str(p) for p in problems))
    return meta
