"""Typed JSON documents: frozen dataclass records that read back exactly what they wrote.

A :class:`Record` is a part of a JSON document (``manifest.json`` is one, see
:mod:`searchtome.dataset.manifest`): its fields are typed, and ``extra`` keeps the keys it does
not model (a newer writer's, or a hand-written one) and keys recorded as ``null``, so reading a
document and writing it again gives the same JSON. :func:`read_record` checks every value
against the field's type and raises :class:`FieldError` naming the dotted field path; the
document's reader turns that into one ``SearchTomeError`` line naming the file.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints


class FieldError(Exception):
    """A value of the wrong type at ``where`` (a dotted field path); becomes one error line."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


S = TypeVar("S", bound="Record")
# Field metadata of an attribute that is no key of the JSON object (its record writes it its own way).
NOT_WRITTEN: Mapping[str, Any] = types.MappingProxyType({"written": False})


@dataclass(frozen=True)
class Record:
    """A part of a document: typed fields, plus ``extra`` for the keys it does not model.

    ``None`` means "not recorded" and is left out when written, except for the fields in
    ``NULLS``: the writers of those parts record every field, ``null`` included.
    """

    NULLS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_dict(cls: type[S], data: Mapping[str, Any], where: str = "") -> S:
        return read_record(cls, data, where)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: typed fields, then ``extra`` as it was read."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra" or not f.metadata.get("written", True):
                continue
            value = getattr(self, f.name)
            if value is not None or f.name in self.NULLS:
                out[f.name] = _plain(value)
        out.update(getattr(self, "extra", {}))
        return out


def read_record(cls: type[S], data: Any, where: str) -> S:
    """``data`` as a ``cls`` record; ``where`` is its dotted path in the document."""
    if not isinstance(data, Mapping):
        raise FieldError(
            where or "document", f"expected an object, not {_kind(data)} {_short(data)}"
        )
    hints = _hints(cls)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key not in hints or (value is None and key not in cls.NULLS):
            extra[key] = value  # kept as written, so the bytes survive a round trip
        else:
            values[key] = _convert(value, hints[key], join(where, key))
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in values:
            raise FieldError(join(where, f.name), "missing")
    return cls(**values, extra=extra)  # type: ignore[call-arg]


# -- the typed conversion --------------------------------------------------------------------------
@cache
def _hints(cls: type) -> dict[str, Any]:
    names = {
        f.name
        for f in dataclasses.fields(cls)
        if f.name != "extra" and f.metadata.get("written", True)
    }
    return {k: v for k, v in get_type_hints(cls).items() if k in names}


def _convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against ``hint``: records become dataclasses, arrays tuples."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        if value is None:
            return None
        nested = None
        for option in options:
            try:
                return _convert(value, option, where)
            except FieldError as bad:
                # the value had this option's shape and one of its parts is wrong: say which
                nested = bad if bad.where != where else nested
        if nested is not None:
            raise nested
        raise FieldError(where, f"expected {_name(hint)}, not {_kind(value)} {_short(value)}")
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_dict(value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise FieldError(where, f"expected a list, not {_kind(value)} {_short(value)}")
        item = get_args(hint)[0]
        return tuple(_convert(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is list:
        if not isinstance(value, list):
            raise FieldError(where, f"expected a list, not {_kind(value)} {_short(value)}")
        return [_convert(v, get_args(hint)[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise FieldError(where, f"expected an object, not {_kind(value)} {_short(value)}")
        item = get_args(hint)[1]
        return {k: _convert(v, item, join(where, k)) for k, v in value.items()}
    if _matches(value, hint):
        return value
    raise FieldError(where, f"expected {_name(hint)}, not {_kind(value)} {_short(value)}")


def _matches(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, hint)


def _plain(value: Any) -> Any:
    """The JSON value of a field: records as objects, tuples as lists."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else f"a {type(value).__name__}"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return f"({text[:40]}...)" if len(text) > 43 else f"({text})"


def _name(hint: Any) -> str:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        names = [_name(a) for a in get_args(hint) if a is not type(None)]
        return " or ".join(dict.fromkeys(names))
    if isinstance(hint, type) and issubclass(hint, Record):
        return "an object"
    if origin in (tuple, list):
        return "a list"
    if origin in (Mapping, dict):
        return "an object"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        hint, str(hint)
    )
