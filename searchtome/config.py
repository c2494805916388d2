"""One configuration mechanism: typed frozen dataclasses filled in by one precedence rule.

Every configurable thing (a baseline's config, ``searchtome build``'s options) is a frozen
dataclass whose defaults are written once, on its fields. :func:`make_config` fills one in from
up to three layers, each overriding the one before::

    defaults  <  a config file or mapping (a manifest's recorded settings)  <  explicit values

Explicit values are ``--set key=value`` texts or a mapping (the flags a user typed). Keys are the
field names, nested ones dotted (``encoder.model``); a nested table refines the nested default
(only the keys it names change), and a preset name (``encoder=nv-embed-v2``) replaces the whole
nested table. Values are read by the field's declared type (an enum by its values), and a wrong
key or value fails with one line that names it (with a did-you-mean for keys).

A config made of sections (:class:`Sections`, e.g. the generative baselines' settings) keeps
flat public keys for its settings (``lora_r`` for ``lora.r``): :func:`flat_keys` is the one
mapping, read from the fields' metadata, and every layer accepts both spellings. A config file
may ``include`` others (their settings first, its own on top) and declare which ``baseline`` it
is for; :func:`read_config_file` resolves both.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from searchtome.config_file import check_baseline, merge_tables, read_config_file
from searchtome.errors import SearchTomeError, unknown_name

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_flat(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get("flat"))


def _public_name(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def config_keys(cls: type, prefix: str = "") -> list[str]:
    """Every public key of a config class: nested ones dotted (``encoder.model``), a section's
    settings by their flat keys (``lora_r``; their dotted spelling works too, see
    :func:`flat_keys`)."""
    keys = []
    types_ = _field_types(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if _is_flat(f):
            keys.extend(_public_name(sub) for sub in dataclasses.fields(types_[f.name]))
            continue
        keys.append(prefix + f.name)
        if _is_dataclass_type(types_[f.name]):
            keys.extend(config_keys(types_[f.name], f"{prefix}{f.name}."))
    return keys


def _settable(cls: type, key: str) -> bool:
    """A public key of ``cls``, or the dotted path of one of its fields."""
    if key in config_keys(cls):
        return True
    tp: Any = cls
    for part in key.split("."):
        if not _is_dataclass_type(tp) or part not in _field_types(tp):
            return False
        tp = _field_types(tp)[part]
    return True


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
    if _is_enum(tp):
        return _coerce_enum(value, tp, key, where)
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


def _coerce_enum(value: Any, tp: type[enum.Enum], key: str, where: str) -> Any:
    """A closed set's member from its value, checked here, where the text enters."""
    if isinstance(value, tp):
        return value
    try:
        return tp(value)
    except ValueError:
        error = unknown_name(f"{key} value", str(value), [str(m.value) for m in tp])
        raise SearchTomeError(f"{where}: {error}" if where else str(error)) from None


def typed_enums(obj: Any) -> None:
    """Turn the enum fields of a frozen dataclass given as their texts (``mode="exact"`` in
    Python) into their members, with the did-you-mean error for a wrong one; for
    ``__post_init__``. Values read by :func:`make_config` are members already."""
    for f in dataclasses.fields(obj):
        tp = _field_types(type(obj)).get(f.name)
        value = getattr(obj, f.name)
        if _is_enum(tp) and not isinstance(value, tp):
            object.__setattr__(obj, f.name, _coerce_enum(value, tp, _public_name(f), ""))


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
    for name, value in _unflatten(cls, layer).items():
        if name not in fields:
            raise _unknown_key(root, prefix + name, where)
        tp, key = fields[name], prefix + name
        if _is_dataclass_type(tp) and isinstance(value, Mapping):
            base = out.get(name)
            base = base if isinstance(base, Mapping) else _defaults(tp)
            out[name] = _apply_section(cls, name, dict(base), value, where, root, null_words)
        elif _is_dataclass_type(tp):
            out[name] = _nested_table(value, tp, key, where)
        else:
            out[name] = coerce(value, tp, key, where, null_words=null_words)
    return out


def _apply_section(
    cls: type,
    name: str,
    values: dict[str, Any],
    layer: Mapping[str, Any],
    where: str,
    root: type,
    null_words: bool,
) -> dict[str, Any]:
    """A nested table on top of field ``name``'s values; a flat section's settings are named
    by their public keys in errors (``lora_r``, not ``lora.r``)."""
    tp = _field_types(cls)[name]
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if not _is_flat(f):
        return _apply(tp, values, layer, where, f"{name}.", root, null_words)
    public = {sub.name: _public_name(sub) for sub in dataclasses.fields(tp)}
    out = dict(values)
    for sub, value in layer.items():
        if sub not in public:
            raise _unknown_key(root, f"{name}.{sub}", where)
        out[sub] = coerce(value, _field_types(tp)[sub], public[sub], where, null_words=null_words)
    return out


def _unflatten(cls: type, layer: Mapping[str, Any]) -> dict[str, Any]:
    """``layer`` with flat public keys moved into their sections (``lora_r`` → ``lora.r``)."""
    flat = flat_keys(cls)
    out: dict[str, Any] = {}
    for key, value in layer.items():
        if key in flat:
            section, name = flat[key]
            table = out.setdefault(section, {})
            if isinstance(table, Mapping):
                out[section] = {**table, name: value}
        else:
            out[key] = merge_tables(out[key], value) if isinstance(out.get(key), Mapping) else value
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
    baseline: str | None = None,
) -> T:
    """A frozen ``cls`` from defaults < ``config`` < ``overrides`` (the one precedence rule).

    ``config`` is a JSON/TOML file (its includes resolved; a ``meta.json`` repeats a run) or a
    mapping, such as the settings a dataset's manifest recorded; ``source`` names a mapping in
    error messages. ``overrides`` are ``["key=value"]`` texts (``--set``) or a mapping of
    explicit values; either may use dotted keys. ``typed`` says the overrides are values already
    parsed (flags read by argparse): they are checked, but a ``"none"`` stays a text instead of
    meaning None. ``baseline``: the baseline being configured; a file declaring another one is
    refused.
    """
    layer: Mapping[str, Any] = {}
    where = source or "config"
    if isinstance(config, (str, os.PathLike)):
        where = str(config)
        file = read_config_file(config)
        if baseline is not None:
            check_baseline(file, baseline)
        layer = file.settings
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
    for key, value in items:
        if not _settable(cls, key):
            raise _unknown_key(cls, key, f"--set {key}")
        values = _apply(cls, values, _nest(key, value), "--set", null_words=not typed)
    return _construct(cls, values, "--set" if items else where)


# -- sections: settings nested by concern, with flat public keys ---------------------------------


def setting(default: Any, help: str, *, key: str | None = None, **metadata: Any) -> Any:
    """A field with its default and its help (``searchtome ls config`` prints it); ``key`` is
    its flat public name where that is not the field's own (``lora_r`` for ``LoraSettings.r``).
    Further ``metadata`` is the owner's (e.g. whether the field shapes a trained adapter)."""
    meta = {"help": help, **metadata}
    if key is not None:
        meta["key"] = key
    return dataclasses.field(default=default, metadata=meta)


def section(cls: type, **defaults: Any) -> Any:
    """A field holding the settings of one concern, addressed by their flat public keys; the
    class's docstring is its help. ``defaults`` replace some of the class's own (a baseline's)."""
    factory: Callable[[], Any] = functools.partial(cls, **defaults) if defaults else cls
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    return dataclasses.field(
        default_factory=factory, metadata={"help": " ".join(doc.split()), "flat": True}
    )


@functools.cache
def flat_keys(cls: type) -> dict[str, tuple[str, str]]:
    """The one flat → nested mapping of a config: ``{public key: (section, field)}`` for every
    setting of its flat sections (:func:`section`), from the fields' ``key`` metadata."""
    out: dict[str, tuple[str, str]] = {}
    if not _is_dataclass_type(cls):
        return out
    for f in dataclasses.fields(cls):
        if _is_flat(f):
            for sub in dataclasses.fields(_field_types(cls)[f.name]):
                key = _public_name(sub)
                if key in out or key in _field_types(cls):
                    raise TypeError(f"{cls.__name__}: the public key {key!r} is taken twice")
                out[key] = (f.name, sub.name)
    return out


def _plain(value: Any) -> Any:
    """An enum member as its value (what files and ``meta.json`` hold); anything else as is."""
    return value.value if isinstance(value, enum.Enum) else value


class Sections:
    """Base of a frozen config made of sections; declare it ``@dataclass(frozen=True,
    init=False)``, its fields :func:`section` s.

    Besides its sections, it takes and reads every setting by its flat public key (the name
    ``--set``, config files and ``meta.json`` use): ``GenRetConfig(lr=1e-3)``, ``cfg.lr``,
    ``dataclasses.replace(cfg, lr=1e-3)``; :meth:`record` is the flat table ``meta.json``
    records. Code that uses a setting reads it from its section (``cfg.training.lr``).
    """

    def __init__(self, **values: Any) -> None:
        flat = flat_keys(type(self))
        fields = {f.name: f for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        changes: dict[str, dict[str, Any]] = {}
        for key in [k for k in values if k in flat]:
            section_name, name = flat[key]
            changes.setdefault(section_name, {})[name] = values.pop(key)
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected settings {unknown}")
        for name, f in fields.items():
            value = values[name] if name in values else f.default_factory()  # type: ignore[misc]
            if name in changes:
                value = dataclasses.replace(value, **changes[name])
            object.__setattr__(self, name, value)
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are no attribute: the flat public keys.
        where = flat_keys(type(self)).get(name)
        if where is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(getattr(self, where[0]), where[1])

    def record(self) -> dict[str, Any]:
        """Every setting by its flat public key: the config ``meta.json`` records."""
        return {
            key: _plain(getattr(getattr(self, section_name), name))
            for key, (section_name, name) in flat_keys(type(self)).items()
        }


def config_record(cfg: Any) -> dict[str, Any]:
    """A config as ``meta.json`` records it: a :class:`Sections` config by its flat public
    keys, any other by its fields (nested tables included)."""
    return cfg.record() if isinstance(cfg, Sections) else dataclasses.asdict(cfg)


def set_keys(cls: type, layer: Mapping[str, Any]) -> set[str]:
    """The public keys (as :func:`describe` names them) that ``layer``, e.g. a file, sets."""
    public = {where: key for key, where in flat_keys(cls).items()}
    out = set()
    for name, value in _unflatten(cls, layer).items():
        if isinstance(value, Mapping):
            out |= {public.get((name, sub), f"{name}.{sub}") for sub in value}
        else:
            out.add(name)
    return out


@dataclasses.dataclass(frozen=True)
class SettingHelp:
    """One resolved setting with its help, for ``searchtome ls config``."""

    key: str
    value: Any
    help: str
    section: str = ""  # the section's name ("" for a top-level setting)
    section_help: str = ""


def describe(cfg: Any) -> list[SettingHelp]:
    """Every setting of ``cfg`` with its value and its field's help text, section by section."""
    rows = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        help_ = str(f.metadata.get("help", ""))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            flat = _is_flat(f)
            if not help_:
                help_ = " ".join((type(value).__doc__ or "").strip().split("\n\n")[0].split())
            for sub in dataclasses.fields(value):
                key = _public_name(sub) if flat else f"{f.name}.{sub.name}"
                item = _plain(getattr(value, sub.name))
                rows.append(SettingHelp(key, item, sub.metadata.get("help", ""), f.name, help_))
        else:
            rows.append(SettingHelp(f.name, _plain(value), help_))
    return rows
