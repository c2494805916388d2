"""The one document kernel: every JSON document searchtome writes or reads is typed through here.

A document is a :class:`Record` (a frozen dataclass: typed fields plus what the reading kept)
and a :class:`Format` (its ``format`` name, its integer version and the ordered upgrade steps
from older versions). The rules, the same for every document:

* **Versions.** A file says ``"format": "NAME-vN"``. An older file is upgraded on reading, one
  step per version, before it is typed (:meth:`Format.upgrade`); a newer one is refused. Two
  documents predate the key and tell their version from their shape (``meta.json``, whose
  schema is closed, and ``expected.json``): their :class:`Format` has ``keyed=False``.
* **Read modes.** :attr:`Mode.STRICT` (files searchtome writes): the first value of the wrong
  type raises :class:`FieldError`. :attr:`Mode.LENIENT` (content a submitter owns, such as
  ``run_info``): such a value is kept in ``extra``, counted as not recorded, and listed in the
  record's ``problems`` (:func:`all_problems`), so a reader that must not draw from half-read
  data can still refuse it.
* **Nothing read is lost.** Keys a record does not model are kept in ``extra``; a key given as
  ``null`` is remembered in ``null_keys`` (a missing key and a null one are both ``None`` on
  the field), so a record read from a file is written back as the same JSON. Values an upgrade
  filled in are ``derived``: read like recorded ones, never written back.
* **One error line.** :class:`FieldError` names the dotted field
  (``run_info.phases.train.wall_s: expected a number, got "abc"``); :func:`document_error`
  puts the file in front and what to do behind.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from functools import cache
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

from searchtome.errors import SearchTomeError


class Mode(StrEnum):
    """How a document treats a value of the wrong type."""

    STRICT = "strict"  # raise: the file was written by searchtome, so it is damaged
    LENIENT = "lenient"  # keep it aside and list it: the content is a submitter's


class FieldError(Exception):
    """What is wrong at ``where`` (a dotted field path); becomes one error line."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message


def document_error(file: object, bad: FieldError, advice: str) -> SearchTomeError:
    """The one error line of a bad document: ``FILE: FIELD: what is wrong; what to do``."""
    return SearchTomeError(f"{file}: {bad}; {advice}")


S = TypeVar("S")
R = TypeVar("R", bound="Record")
# Field metadata of an attribute that is no key of the JSON object (its owner writes it its way).
NOT_WRITTEN: Mapping[str, Any] = types.MappingProxyType({"written": False})
# The bookkeeping an upgrade step leaves in an object: the keys it filled in (see derive).
_DERIVED = "\x00derived"
_BOOKKEEPING = frozenset({"extra", "null_keys", "derived", "problems", "read_version"})


@dataclass(frozen=True, kw_only=True)
class Record:
    """A part of a document: its typed fields, and what the reading kept beside them."""

    MODE: ClassVar[Mode] = Mode.STRICT
    # Keys a record made by code (not read) writes as null when unset: its writer records them.
    NULLS: ClassVar[frozenset[str]] = frozenset()

    # Keys the record does not model, and (lenient) known keys whose value had the wrong type.
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # Keys the file gave as null; None: a record made by code (then NULLS applies).
    null_keys: frozenset[str] | None = field(default=None, repr=False, compare=False)
    # Keys an upgrade filled in from an older shape: read, never written back.
    derived: frozenset[str] = field(default=frozenset(), repr=False)
    # One message per value of the wrong type (lenient reading; kept in ``extra``).
    problems: tuple[str, ...] = field(default=(), repr=False, compare=False)
    # The version the file had before it was upgraded (None: not read from a file).
    read_version: int | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls: type[R], data: Any, where: str = "", mode: Mode | None = None) -> R:
        return read_record(cls, data, where, mode)

    def to_dict(self) -> dict[str, Any]:
        return write_record(self)


# -- the format: name, version, upgrades ------------------------------------------------------
Step = Callable[[dict[str, Any]], dict[str, Any]]
FORMAT_KEY = "format"


@dataclass(frozen=True)
class Format:
    """A document's ``format``: ``NAME-vVERSION``, and the steps that upgrade older versions.

    ``upgrades[i]`` takes version ``oldest + i`` to the next one. ``shape``, when given, tells
    the version from the file's shape first (None: read ``format``); a file without ``format``
    is refused, unless ``keyed`` is False (then it is at ``version``).
    """

    name: str
    version: int
    upgrades: tuple[Step, ...] = ()
    keyed: bool = True  # the file carries "format"; False: the document predates the key
    shape: Callable[[Mapping[str, Any]], int | None] | None = None

    @property
    def oldest(self) -> int:
        return self.version - len(self.upgrades)

    @property
    def tag(self) -> str:
        return f"{self.name}-v{self.version}"

    def version_of(self, raw: Mapping[str, Any]) -> int:
        """The version ``raw`` was written in; :class:`FieldError` when it is none we read."""
        told = self.shape(raw) if self.shape is not None else None
        if told is not None or not self.keyed:
            return self.version if told is None else told
        fmt = raw.get(FORMAT_KEY)
        prefix = f"{self.name}-v"
        number = fmt[len(prefix) :] if isinstance(fmt, str) and fmt.startswith(prefix) else ""
        if not number.isdigit():
            missing = FORMAT_KEY not in raw
            raise FieldError(FORMAT_KEY, expected(f'"{prefix}N"', fmt, missing=missing))
        if int(number) > self.version:
            raise FieldError(
                FORMAT_KEY,
                f"{fmt} is newer than this searchtome reads ({self.tag}, upgrade searchtome)",
            )
        if int(number) < self.oldest:
            raise FieldError(FORMAT_KEY, f"{fmt} is older than this searchtome reads")
        return int(number)

    def upgrade(self, raw: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """``raw`` in this version's shape (``format`` removed), and the version it had."""
        version = self.version_of(raw)
        body = dict(raw)
        for step in self.upgrades[version - self.oldest :]:
            body = step(body)
        if self.keyed:
            body.pop(FORMAT_KEY, None)
        return body, version

    def stamp(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON object of a document whose fields are ``body``: ``format`` added."""
        return {**body, FORMAT_KEY: self.tag} if self.keyed else dict(body)


def before_format(raw: Mapping[str, Any]) -> int | None:
    """A :attr:`Format.shape` for documents that gained ``format`` at version 1: a file without
    it is version 0 (None: ``format`` tells)."""
    return None if FORMAT_KEY in raw else 0


def unchanged(raw: dict[str, Any]) -> dict[str, Any]:
    """The upgrade step of a version that only added ``format``."""
    return raw


def derive(obj: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    """``obj`` with ``values`` filled in by an upgrade step: read, never written back."""
    out = {**obj, **values}
    out[_DERIVED] = [*obj.get(_DERIVED, ()), *values]
    return out


def read_document(
    fmt: Format, cls: type[R], raw: Any, file: object, advice: str, mode: Mode | None = None
) -> R:
    """``raw`` (a loaded JSON file) upgraded and typed; one :class:`SearchTomeError` line
    (``FILE: FIELD: what is wrong; ADVICE``) for a bad version or, strictly read, a bad value."""
    try:
        if not isinstance(raw, Mapping):
            raise FieldError("", expected("a JSON object", raw))
        body, version = fmt.upgrade(raw)
        record = read_record(cls, body, "", mode)
    except FieldError as bad:
        raise document_error(file, bad, advice) from None
    return dataclasses.replace(record, read_version=version)


def write_document(fmt: Format, record: Record) -> dict[str, Any]:
    """The JSON object of a document: its fields, ``format`` stamped."""
    return fmt.stamp(write_record(record))


# -- reading ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """How a reading goes: the mode, and whether null stands for NaN in number fields (files
    that write NaN as null, since JSON has no NaN)."""

    mode: Mode = Mode.STRICT
    nan: bool = False


def read_record(cls: type[S], data: Any, where: str = "", mode: Mode | Reading | None = None) -> S:
    """``data`` as a ``cls``; ``where`` is its dotted path in the document.

    ``cls`` is a :class:`Record`, or a plain dataclass (a result type that is also written as a
    part of a document): such a class keeps unknown keys when it has an ``extra`` field, and
    refuses them otherwise.
    """
    how = _reading(cls, mode)
    if not isinstance(data, Mapping):
        raise FieldError(where, expected("an object", data))
    by_key = {key: (name, hint, f) for name, key, hint, f in _fields(cls)}
    record = issubclass(cls, Record)
    keeps = record or "extra" in {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    nulls: set[str] = set()
    problems: list[str] = []
    for key, value in data.items():
        if key == _DERIVED:
            continue
        at = join(where, str(key))
        if key not in by_key:
            if not keeps:
                raise FieldError(at, "unknown field")
            extra[key] = value
            continue
        name, hint, f = by_key[key]
        if value is None and _optional(hint) and "read" not in f.metadata:
            nulls.add(key)  # null, not missing: written back as null
            values[name] = None
            continue
        try:
            values[name] = _read_field(f, hint, value, at, how)
        except FieldError as bad:
            if how.mode is Mode.STRICT or not record:
                raise
            extra[key] = value  # kept as written; the field reads as not recorded
            problems.append(str(bad))
    _check_required(cls, values, where)
    if not record:
        return cls(**values, **({"extra": extra} if keeps else {}))
    derived = frozenset(data.get(_DERIVED, ()))
    return cls(  # type: ignore[call-arg]
        **values,
        extra=extra,
        null_keys=frozenset(nulls),
        derived=derived,
        problems=tuple(problems),
    )


def _read_field(f: dataclasses.Field[Any], hint: Any, value: Any, where: str, how: Reading) -> Any:
    """A field's value: through its own reader (metadata ``read``) or checked against its type."""
    reader = f.metadata.get("read")
    return reader(value, where, how) if reader else convert(value, hint, where, how)


def _reading(cls: type, mode: Mode | Reading | None) -> Reading:
    if isinstance(mode, Reading):
        return mode
    if mode is None:
        mode = cls.MODE if issubclass(cls, Record) else Mode.STRICT
    return Reading(mode)


def _check_required(cls: type, values: Mapping[str, Any], where: str) -> None:
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.init and f.name not in values:
            raise FieldError(join(where, key_of(f)), "missing")


def key_of(f: dataclasses.Field[Any]) -> str:
    """The JSON key of a field (its name unless the key is not an identifier)."""
    return str(f.metadata.get("key", f.name))


@cache
def _fields(cls: type) -> tuple[tuple[str, str, Any, dataclasses.Field[Any]], ...]:
    """(name, JSON key, resolved type, field) of each written field, in declaration order."""
    hints = get_type_hints(cls)
    return tuple(
        (f.name, key_of(f), hints[f.name], f)
        for f in dataclasses.fields(cls)
        if f.name not in _BOOKKEEPING and f.metadata.get("written", True)
    )


def _optional(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def convert(value: Any, hint: Any, where: str, how: Reading = Reading()) -> Any:
    """``value`` checked against ``hint``: records become dataclasses, arrays tuples or lists."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        return _convert_union(value, hint, where, how)
    if value is None and how.nan and hint is float:
        return math.nan
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return read_record(hint, value, where, how)
    if isinstance(hint, type) and issubclass(hint, Enum):
        if value not in {m.value for m in hint}:
            raise FieldError(where, expected(f"one of {', '.join(m.value for m in hint)}", value))
        return hint(value)
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise FieldError(where, expected("a list", value))
        items = [convert(v, args[0], f"{where}[{i}]", how) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise FieldError(where, expected("an object", value))
        return {k: convert(v, args[1], join(where, str(k)), how) for k, v in value.items()}
    if not _matches(value, hint):
        raise FieldError(where, expected(type_name(hint), value))
    return value


def _convert_union(value: Any, hint: Any, where: str, how: Reading) -> Any:
    options = [a for a in get_args(hint) if a is not type(None)]
    if value is None:
        if len(options) < len(get_args(hint)):
            return None
        raise FieldError(where, expected(type_name(hint), value))
    nested = None
    for option in options:
        try:
            return convert(value, option, where, how)
        except FieldError as bad:
            # the value had this option's shape and one of its parts is wrong: say which
            nested = bad if bad.where != where else nested
    if nested is not None:
        raise nested
    raise FieldError(where, expected(type_name(hint), value))


def _matches(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and math.isfinite(value)
    return isinstance(value, hint)


# -- writing ---------------------------------------------------------------------------------
def write_record(record: Record) -> dict[str, Any]:
    """The JSON object of a record: its recorded fields, its null keys, then its extra keys."""
    nulls = record.NULLS if record.null_keys is None else record.null_keys
    out: dict[str, Any] = {}
    for name, key, _, _ in _fields(type(record)):
        value = getattr(record, name)
        if key in record.derived:
            continue
        if value is not None:
            out[key] = plain(value)
        elif key in nulls:
            out[key] = None
    out.update(record.extra)
    return out


def plain(value: Any) -> Any:
    """The JSON value of a field: records as objects, tuples as lists, enums as their value."""
    if isinstance(value, Record):
        return write_record(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def all_problems(record: Record) -> list[str]:
    """The problems of a leniently read record and of the records inside it."""
    found = list(record.problems)
    for name, _, _, _ in _fields(type(record)):
        value = getattr(record, name)
        if isinstance(value, Mapping):
            parts = list(value.values())
        elif isinstance(value, tuple | list):
            parts = list(value)
        else:
            parts = [value]
        found += [p for v in parts if isinstance(v, Record) for p in all_problems(v)]
    return found


# -- the words of an error ---------------------------------------------------------------------
def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def expected(what: str, value: Any, *, missing: bool = False) -> str:
    """``expected WHAT, got VALUE``: the one way a wrong value is described."""
    return f"expected {what}, got {'nothing' if missing else shown(value)}"


def shown(value: Any) -> str:
    """A wrong value in a message: scalars as JSON (cut at 40 characters), containers by kind."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def type_name(hint: Any) -> str:
    """What a type hint asks for, in words: ``a number``, ``a string or a list``."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        names = [type_name(a) for a in get_args(hint) if a is not type(None)]
        return " or ".join(dict.fromkeys(names))
    if dataclasses.is_dataclass(hint) or origin in (Mapping, dict):
        return "an object"
    if origin in (tuple, list):
        return "a list"
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    return words.get(hint, str(hint))
