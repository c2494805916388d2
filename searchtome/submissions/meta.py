"""``meta.json``: the typed document (:class:`RunMeta`), its one reader and one writer, its checks.

The fields and their JSON types are in :data:`~searchtome.submissions.schema.META_REQUIRED` and
:data:`~searchtome.submissions.schema.META_OPTIONAL`; problems name the line of the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from searchtome.document import (
    FieldError,
    Format,
    Mode,
    Reading,
    all_problems,
    derive,
    expected,
    read_document,
    read_record,
)
from searchtome.errors import SearchTomeError
from searchtome.hardware import hardware as describe_hardware
from searchtome.io import PathLike, atomic_write, dumps
from searchtome.records import BASELINE_TYPES
from searchtome.submissions.lines import DEFAULT_LIMITS, Limits
from searchtome.submissions.problems import Problem, quote
from searchtome.submissions.runinfo import Part, RunInfo, RunReport
from searchtome.submissions.schema import META_FIELDS, META_FILE, META_REQUIRED, TEXT_LIMITS
from searchtome.submissions.strictjson import key_lines, loads_strict, type_name, unusable
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
    for key, cap in TEXT_LIMITS.items():
        value = meta.get(key)
        if isinstance(value, str) and len(value) > cap:
            err(key, f"{len(value):,} characters; at most {cap:,}", "too-long")
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
    if path.stat().st_size > limits.max_meta_bytes:
        return _too_large(shown, path.stat().st_size, limits)
    return parse_meta(shown, path.read_bytes(), limits)


def _too_large(shown: str, size: int, limits: Limits) -> MetaRead:
    message = f"{size:,} bytes exceeds the {limits.max_meta_bytes:,}-byte limit"
    return None, {}, [Problem(shown, None, "size", message, "too-large")]


def parse_meta(shown: str, raw: bytes, limits: Limits = DEFAULT_LIMITS) -> MetaRead:
    """Check ``meta.json``'s bytes (an upload's, say), shown as ``shown`` in problems."""
    if len(raw) > limits.max_meta_bytes:
        return _too_large(shown, len(raw), limits)
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


# What make_meta fills in when not given (hardware, date and versions are this machine's).
_MADE_DEFAULTS: dict[str, Any] = {"models": [], "trained_on": [], "license": "CC-BY-4.0"}


def make_meta(
    system: str, *, description: str, command: str, dataset_revision: str, **optional: Any
) -> dict[str, Any]:
    """A complete ``meta.json`` object; hardware, date and package versions filled in when omitted.

    ``optional`` takes the other fields of :data:`~searchtome.submissions.schema.META_FIELDS`
    (``models`` and ``trained_on``, default none; ``license``, default CC-BY-4.0; ``hardware``;
    ``date_`` for ``date``; ``url``, ``config``, ``seed``, ``run_info``, ...). Raises
    :class:`SearchTomeError` when the result would not pass :func:`check_meta`.
    """
    given = dict(optional)
    meta: dict[str, Any] = {
        "system": system,
        "description": description,
        "command": command,
        "dataset_revision": dataset_revision,
        **_MADE_DEFAULTS,
        "hardware": given.pop("hardware", None) or describe_hardware(),
        "date": given.pop("date_", None) or date.today().isoformat(),
    }
    for key in ("models", "trained_on"):
        meta[key] = list(given.pop(key, meta[key]))
    versions = {"searchtome": __version__, "python": sys.version.split()[0]}
    versions.update(given.pop("versions", {}) or {})
    meta["versions"] = versions
    meta.update(given)
    problems = check_meta(meta, META_FILE)
    if problems:
        raise SearchTomeError("; ".join(str(p) for p in problems))
    return meta


# -- the typed document ----------------------------------------------------------------------

# The shape this code writes. meta.json has no version key (its fields are a closed list, and
# a new one would change every committed file), so a file's version is told from its shape.
META_VERSION = 2


@dataclass(frozen=True, kw_only=True)
class RunMeta(Part):
    """``meta.json`` typed: the schema's fields (:data:`META_FIELDS`) and :class:`RunInfo`.

    Read with :func:`parse_run_meta` (a mapping) or :func:`read_run_meta` (a file), written with
    :func:`meta_text` / :func:`write_meta`; a document read from a file is written back as the
    same bytes (keys sorted, as :func:`searchtome.io.dumps` writes every JSON file).
    """

    system: str | None = None
    description: str | None = None
    models: tuple[str, ...] | None = None
    trained_on: tuple[str, ...] | None = None
    hardware: str | None = None
    date: str | None = None
    dataset_revision: str | None = None
    license: str | None = None
    command: str | None = None
    url: str | None = None
    config: Mapping[str, Any] | None = None
    versions: Mapping[str, Any] | None = None
    seed: int | None = None
    split: str | None = None
    notes: str | None = None
    run_info: RunInfo | None = None

    @property
    def version(self) -> int:
        """The shape this record has: every reading upgrades to :data:`META_VERSION`."""
        return META_VERSION

    @property
    def info(self) -> RunInfo:
        """``run_info`` (an empty record when the submission gave none)."""
        return self.run_info if self.run_info is not None else RunInfo(null_keys=frozenset())

    @property
    def report(self) -> RunReport:
        """``run_info.notes``: what the baseline recorded about its run."""
        return self.info.report


# The fields a leaderboard page shows under each submission, in this order (labelled by name).
SHOWN_FIELDS = (
    "description",
    "url",
    "models",
    "trained_on",
    "hardware",
    "date",
    "dataset_revision",
    "license",
    "command",
)


def shown_fields(meta: RunMeta) -> list[tuple[str, str]]:
    """(label, text) of each :data:`SHOWN_FIELDS` field the document records, in that order: a
    list as its items joined by commas (``none`` for an empty one), any other value as text.

    A field is absent only when the file lacks it: the schema refuses null and mistyped values.
    """
    shown = []
    for name in SHOWN_FIELDS:
        value = getattr(meta, name)
        if value is None:
            continue
        text = (", ".join(value) or "none") if isinstance(value, tuple) else str(value)
        shown.append((name, text))
    return shown


def shape_version(raw: Mapping[str, Any]) -> int:
    """The version of a ``meta.json`` object, from its shape.

    1: ``run_info`` without ``phases``: written before the runner timed training and prediction
    apart; their times are in ``notes.train_seconds`` / ``notes.predict_seconds`` and the system
    type only in ``baseline``. 2: ``phases``, ``training_wall_s``, ``prediction_wall_s``,
    ``system_type`` and ``parameters`` recorded (a submission without ``run_info`` is current).
    """
    info = raw.get("run_info")
    return 1 if isinstance(info, Mapping) and "phases" not in info else META_VERSION


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _upgrade_from_1(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: the fields version 2 records, filled from where version 1 kept them.

    Derived (:func:`~searchtome.document.derive`): read like recorded ones, never written, so
    the file stays as it was. A value of the wrong type is left for the reading to report.
    """
    info = raw.get("run_info")
    if not isinstance(info, Mapping):
        return raw
    notes = info.get("notes") if isinstance(info.get("notes"), Mapping) else {}
    filled: dict[str, Any] = {}
    for field_, old in (
        ("training_wall_s", "train_seconds"),
        ("prediction_wall_s", "predict_seconds"),
    ):
        if info.get(field_) is None and _number(notes.get(old)):
            filled[field_] = notes[old]
    baseline = info.get("baseline")
    if info.get("system_type") is None and isinstance(baseline, str) and baseline in BASELINE_TYPES:
        filled["system_type"] = BASELINE_TYPES[baseline]
    return {**raw, "run_info": derive(info, **filled)} if filled else raw


# meta.json's format: no key in the file (see META_VERSION), the version told by shape_version.
META = Format(
    "searchtome-meta",
    META_VERSION,
    upgrades=(_upgrade_from_1,),
    keyed=False,
    shape=shape_version,
)


def parse_run_meta(raw: Mapping[str, Any] | RunMeta) -> RunMeta:
    """A ``meta.json`` object typed and upgraded; never raises on content.

    For readers of checked submissions (the leaderboard) and of partial objects: a value of the
    wrong type reads as not recorded and is listed in the part's ``problems``.
    """
    if isinstance(raw, RunMeta):
        return raw
    return read_document(META, RunMeta, raw, META_FILE, "fix meta.json")


def read_embedded(value: Any, where: str, how: Reading) -> RunMeta:
    """A ``meta.json`` kept inside another document (a leaderboard entry): upgraded and read
    leniently, as :func:`parse_run_meta` reads it (a :mod:`searchtome.document` field reader)."""
    if not isinstance(value, Mapping):
        raise FieldError(where, expected("an object", value))
    body, version = META.upgrade(value)
    meta = read_record(RunMeta, body, where, Mode.LENIENT)
    return dataclasses.replace(meta, read_version=version)


def read_run_meta(path: PathLike, limits: Limits = DEFAULT_LIMITS) -> RunMeta:
    """Read ``meta.json`` (strict JSON within ``limits``, the schema checked), typed.

    Raises :class:`SearchTomeError` with the first problem, one line naming the file and the
    field (``meta.json:4: seed: expected an integer or null, got string``), a value of the wrong
    type inside ``run_info`` included (``meta.json: run_info.seed: expected an integer, got
    "x"``).
    """
    raw, _, problems = read_meta(path, limits)
    errors = [str(p) for p in problems if p.severity == "error"]
    meta = parse_run_meta(raw) if raw is not None else None
    if meta is not None:
        errors += [f"{path}: {p}" for p in all_problems(meta)]
    if errors or meta is None:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        first = errors[0] if errors else f"{path}: not a meta.json object"
        raise SearchTomeError(f"{first}{more}; fix meta.json or write it again")
    return meta


def meta_dict(meta: RunMeta | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object of a document (a mapping is taken as one)."""
    return meta.to_dict() if isinstance(meta, RunMeta) else dict(meta)


def meta_text(meta: RunMeta | Mapping[str, Any]) -> str:
    """``meta.json``'s text: the one way it is written (sorted keys, two-space indent)."""
    return dumps(meta_dict(meta))


def write_meta(path: PathLike, meta: RunMeta | Mapping[str, Any]) -> Path:
    """Check and write ``meta.json`` atomically; a bad document writes nothing."""
    raw = meta_dict(meta)
    problems = check_meta(raw, str(path))
    if problems:
        raise SearchTomeError("; ".join(str(p) for p in problems))
    with atomic_write(path) as fh:
        fh.write(dumps(raw))
    return Path(path)
