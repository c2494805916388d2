"""One configuration mechanism: typed frozen dataclasses filled in by one precedence rule.

Every configurable thing (a baseline's config, ``searchtome build``'s options) is a frozen
dataclass whose defaults are written once, on its fields. :func:`make_config` fills one in from
up to three layers, each overriding the one before::

    defaults  <  a config file or mapping (a manifest's recorded settings)  <  explicit values

Explicit values are ``--set key=value`` texts or a mapping (the flags a user typed). Keys are the
field names, nested ones dotted (``encoder.model``); a nested table refines the nested default
(only the keys it names change), and a preset name (``encoder=nv-embed-v2``) replaces the whole
nested table. Values are read by the field's declared type, and a wrong key or value fails with
one line that names it (with a did-you-mean for keys).
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from searchtome.errors import SearchTomeError, unknown_name

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def config_keys(cls: type, prefix: str = "") -> list[str]:
    """Every settable key of a config class, nested ones dotted (``encoder.model``)."""
    keys = []
    for name, tp in _field_types(cls).items():
        keys.append(prefix + name)
        if _is_dataclass_type(tp):
            keys.extend(config_keys(tp, f"{prefix}{name}."))
    return keys


def field_default(cls: type, name: str) -> Any:
    """The default of field ``name`` (for help texts, so a default is written only once)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def _unknown_key(cls: type, key: str, where: str) -> SearchTomeError:
    error = unknown_name("config key", key, config_keys(cls))
    return SearchTomeError(f"{where}: {error}")


def coerce(value: Any, tp: Any, key: str, where: str, *, null_words: bool = True) -> Any:
    """``value`` as the declared field type ``tp``, or a one-line error naming ``key``.

    With ``null_words``, the texts ``null`` and ``none`` mean ``None`` for an optional field.
    """
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return _coerce_union(value, typing.get_args(tp), key, where, null_words)
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise SearchTomeError(f"{where}: {key}: expected a list, got {value!r}")
        (item_tp, *_rest) = typing.get_args(tp) or (Any,)
        return tuple(value if item_tp is Any else (coerce(v, item_tp, key, where) for v in value))
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise SearchTomeError(f"{where}: {key}: expected a table, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise SearchTomeError(f"{where}: {key}: expected true or false, got {value!r}")
    if tp is int:
        return _coerce_int(value, key, where)
    if tp is float:
        if isinstance(value, bool):
            raise SearchTomeError(f"{where}: {key}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SearchTomeError(f"{where}: {key}: expected a number, got {value!r}") from None
    if tp is str:
        if isinstance(value, (dict, list)):
            raise SearchTomeError(f"{where}: {key}: expected a string, got {value!r}")
        return str(value)
    if tp is Path and isinstance(value, (str, os.PathLike)):
        return Path(value)
    return value


def _coerce_union(value: Any, args: tuple[Any, ...], key: str, where: str, null_words: bool) -> Any:
    if type(None) in args and (
        value is None
        or (null_words and isinstance(value, str) and value.lower() in {"null", "none"})
    ):
        return None
    errors = []
    for arg in args:  # the first type that takes the value wins: ``int | str`` reads "6" as 6
        if arg is type(None):
            continue
        try:
            return coerce(value, arg, key, where, null_words=null_words)
        except SearchTomeError as exc:
            errors.append(str(exc))
    raise SearchTomeError(errors[0] if errors else f"{where}: {key}: bad value {value!r}")


def _coerce_int(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SearchTomeError(f"{where}: {key}: expected an integer, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise SearchTomeError(f"{where}: {key}: expected an integer, got {value!r}") from None
    if number != int(number):
        raise SearchTomeError(f"{where}: {key}: expected an integer, got {value!r}")
    return int(number)


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON or TOML config; a submission's ``meta.json`` works too (its ``config`` is used)."""
    path = Path(path)
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
    if "system" in data and isinstance(data.get("config"), dict):
        data = data["config"]
    return data


def parse_assignments(items: Sequence[str]) -> list[tuple[str, str]]:
    """``["k1=1.2"]`` → ``[("k1", "1.2")]``; values stay text, read later by the field's type."""
    pairs = []
    for text in items:
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise SearchTomeError(f"--set {text!r}: expected KEY=VALUE, e.g. --set k1=1.2")
        pairs.append((key.strip(), raw))
    return pairs


def _as_table(value: Any) -> Any:
    """A dataclass instance as a table of its fields (nested ones too); anything else as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _as_table(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init
        }
    return value


def _defaults(cls: type) -> dict[str, Any]:
    """The class's defaults as a table; fields without a default are left out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.init and f.default is not dataclasses.MISSING:
            out[f.name] = _as_table(f.default)
        elif f.init and f.default_factory is not dataclasses.MISSING:
            out[f.name] = _as_table(f.default_factory())
    return out


def _nested_table(value: Any, tp: type, key: str, where: str) -> dict[str, Any]:
    """A whole nested table: an instance of ``tp`` or one of its preset names."""
    if isinstance(value, tp):
        return _as_table(value)
    if isinstance(value, str) and hasattr(tp, "preset"):
        return _as_table(tp.preset(value))
    raise SearchTomeError(f"{where}: {key}: expected a table of settings, got {value!r}")


def _apply(
    cls: type,
    values: dict[str, Any],
    layer: Mapping[str, Any],
    where: str,
    prefix: str = "",
    root: type | None = None,
    null_words: bool = True,
) -> dict[str, Any]:
    """``values`` with one layer on top: a nested table refines, any other value replaces."""
    root = root or cls
    fields = _field_types(cls)
    out = dict(values)
    for name, value in layer.items():
        if name not in fields:
            raise _unknown_key(root, prefix + name, where)
        tp, key = fields[name], prefix + name
        if _is_dataclass_type(tp) and isinstance(value, Mapping):
            base = out.get(name)
            base = base if isinstance(base, Mapping) else _defaults(tp)
            out[name] = _apply(tp, dict(base), value, where, key + ".", root, null_words)
        elif _is_dataclass_type(tp):
            out[name] = _nested_table(value, tp, key, where)
        else:
            out[name] = coerce(value, tp, key, where, null_words=null_words)
    return out


def _nest(key: str, value: Any) -> dict[str, Any]:
    """``("encoder.model", v)`` → ``{"encoder": {"model": v}}``."""
    *parents, leaf = key.split(".")
    table: dict[str, Any] = {leaf: value}
    for parent in reversed(parents):
        table = {parent: table}
    return table


def _construct(cls: type, values: Mapping[str, Any], where: str) -> Any:
    fields = _field_types(cls)
    kwargs = {
        name: _construct(fields[name], value, where)
        if _is_dataclass_type(fields[name]) and isinstance(value, Mapping)
        else value
        for name, value in values.items()
    }
    try:
        return cls(**kwargs)
    except SearchTomeError as exc:
        raise SearchTomeError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SearchTomeError(f"{where}: invalid config: {exc}") from None


def _has_all_defaults(cls: type) -> bool:
    return all(
        f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        for f in dataclasses.fields(cls)
        if f.init
    )


def make_config(
    cls: type[T],
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    *,
    source: str | None = None,
    typed: bool = False,
) -> T:
    """A frozen ``cls`` from defaults < ``config`` < ``overrides`` (the one precedence rule).

    ``config`` is a JSON/TOML file (a ``meta.json`` repeats a run) or a mapping, such as the
    settings a dataset's manifest recorded; ``source`` names a mapping in error messages.
    ``overrides`` are ``["key=value"]`` texts (``--set``) or a mapping of explicit values;
    either may use dotted keys. ``typed`` says the overrides are values already parsed (flags
    read by argparse): they are checked, but a ``"none"`` stays a text instead of meaning None.
    """
    layer: Mapping[str, Any] = {}
    where = source or "config"
    if isinstance(config, (str, os.PathLike)):
        where = str(config)
        layer = read_config_file(config)
    elif config is not None:
        layer = config
    values = _apply(cls, _defaults(cls), layer, where)
    if _has_all_defaults(cls):
        _construct(cls, values, where)  # a bad file fails naming the file, whatever follows
    if overrides is None:
        items: list[tuple[str, Any]] = []
    elif isinstance(overrides, Mapping):
        items = list(overrides.items())
    else:
        items = parse_assignments(overrides)
    known = config_keys(cls)
    for key, value in items:
        if key not in known:
            raise _unknown_key(cls, key, f"--set {key}")
        values = _apply(cls, values, _nest(key, value), "--set", null_words=not typed)
    return _construct(cls, values, "--set" if items else where)
