"""``run_info`` typed: what a run recorded about itself, part by part.

``run_info`` is open to submitters (any JSON object passes the schema), so reading it never
fails: a key no part knows is kept in the part's ``extra``, and a value of the wrong type is
kept there too, counted as not recorded, with what is wrong in the part's ``problems`` (a reader
that must not draw from half-read data, like the learning curves, raises on them). Every part
remembers which of its keys the file gave as ``null``, so a part written back gives the keys it
was read from (:func:`encode`), and :mod:`~searchtome.submissions.meta` writes a document read
from a committed run byte for byte.

The parts: :class:`RunInfo` (times, memory, dataset, counts, the machine, the model's size),
:class:`Phase` (one phase's time and peak), :class:`DatasetFacts`, :class:`RunReport` (what a
baseline says about its run: ``run_info.notes``), :class:`TrainingReport` with its history of
:class:`Epoch` rows.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Self, TypeVar

# Fields about the reading itself, not keys of the document.
_BOOKKEEPING = ("extra", "null_keys", "derived", "problems", "version", "read_version")


@dataclass(frozen=True, kw_only=True)
class Part:
    """What every part keeps besides its typed fields, so that nothing read is lost."""

    # Keys the part does not know, and known keys whose value had the wrong type: as read.
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # Keys written as null (a missing key and a null one are both None on the field).
    null_keys: frozenset[str] = field(default=frozenset(), repr=False)
    # Fields an upgrade filled in from an older shape: read, never written back.
    derived: frozenset[str] = field(default=frozenset(), repr=False)
    # ``path must be ...`` for each value of the wrong type (kept in ``extra``).
    problems: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_dict(cls, raw: Any, path: str = "") -> Self:
        """The part read from ``raw`` (a JSON object; anything else reads as an empty part)."""
        return decode(cls, raw if isinstance(raw, Mapping) else {}, path)

    def to_dict(self) -> dict[str, Any]:
        return encode(self)


P = TypeVar("P", bound=Part)


def key_of(f: dataclasses.Field[Any]) -> str:
    """The JSON key of a field (its name unless the key is not an identifier)."""
    return str(f.metadata.get("key", f.name))


@cache
def _fields(cls: type[Part]) -> tuple[tuple[str, str, Any], ...]:
    """(field name, JSON key, resolved type) of each typed field, in declaration order."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, key_of(f), hints[f.name])
        for f in dataclasses.fields(cls)
        if f.name not in _BOOKKEEPING
    )


class _Wrong(Exception):
    """A value that is not of its field's type: what it must be."""


_WHAT = {str: "a string", int: "a whole number", float: "a finite number", bool: "true or false"}


def _convert(tp: Any, value: Any, path: str) -> Any:
    """``value`` as type ``tp``; raises :class:`_Wrong` with what it must be."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        try:
            return _convert(inner, value, path)
        except _Wrong as exc:
            raise _Wrong(f"{exc} or null") from None
    if isinstance(tp, type) and issubclass(tp, Part):
        if not isinstance(value, Mapping):
            raise _Wrong("an object")
        return decode(tp, value, path)
    if origin is tuple:
        if not isinstance(value, list):
            raise _Wrong("a list")
        return tuple(_convert(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise _Wrong("an object")
        if args and isinstance(args[1], type) and issubclass(args[1], Part):
            return {k: _convert(args[1], v, f"{path}.{k}") for k, v in value.items()}
        return value
    ok = not isinstance(value, bool) if tp in (int, float) else True
    ok = ok and isinstance(value, int | float if tp is float else tp)
    if ok and tp is float and not math.isfinite(value):
        ok = False
    if not ok:
        raise _Wrong(_WHAT[tp])
    return value


def decode(cls: type[P], raw: Mapping[str, Any], path: str = "") -> P:
    """A part from a JSON object; never raises on content (see the module's docstring)."""
    by_key = {key: (name, tp) for name, key, tp in _fields(cls)}
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    nulls: set[str] = set()
    problems: list[str] = []
    for key, value in raw.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in by_key:
            extra[key] = value
            continue
        name, tp = by_key[key]
        custom = CUSTOM.get((cls.__name__, name))
        if value is None and custom is None:
            nulls.add(key)
            continue
        try:
            values[name] = custom(value, where) if custom else _convert(tp, value, where)
        except _Wrong as exc:
            extra[key] = value
            problems.append(f"{where} must be {exc}, not {_shown(value)}")
        except ValueError as exc:  # a custom reader's own message, the field named in it
            extra[key] = value
            problems.append(str(exc))
    return cls(**values, extra=extra, null_keys=frozenset(nulls), problems=tuple(problems))


def _shown(value: Any) -> str:
    """A wrong value in a message: short values as written, long ones by their type."""
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def _plain(value: Any) -> Any:
    if isinstance(value, Part):
        return encode(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def encode(part: Part) -> dict[str, Any]:
    """The JSON object of a part: its recorded fields, its null keys, its extra keys."""
    out: dict[str, Any] = {}
    for name, key, _ in _fields(type(part)):
        value = getattr(part, name)
        if name in part.derived:
            continue
        if value is not None:
            out[key] = _plain(value)
        elif key in part.null_keys:
            out[key] = None
    out.update(part.extra)
    return out


def all_problems(part: Part) -> list[str]:
    """The part's problems and those of the parts inside it."""
    found = list(part.problems)
    for name, _, _ in _fields(type(part)):
        value = getattr(part, name)
        if isinstance(value, tuple):
            inner: Any = value
        elif isinstance(value, Mapping):
            inner = value.values()
        else:
            inner = (value,)
        found += [p for v in inner if isinstance(v, Part) for p in all_problems(v)]
    return found


# -- the parts -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Phase(Part):
    """One phase of a run (training, prediction): wall time and the phase's own RSS peak."""

    peak_rss_mib: float | None = None
    wall_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class DatasetFacts(Part):
    """The dataset a run read: where (portable), its name, revision label and manifest hash."""

    path: str | None = None
    name: str | None = None
    revision: str | None = None
    manifest_sha256: str | None = None
    books: tuple[str, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Epoch(Part):
    """One epoch of a training history: the dev R@1 after it (None: not evaluated), ..."""

    epoch: int
    dev_r1: float | None = None
    train_loss: float | None = None
    seconds: float | None = None  # the training's wall time at the epoch's end
    lr: float | None = None


HISTORY_FIELD = "run_info.notes.training"


def _history(value: Any, where: str) -> tuple[Epoch, ...]:
    """A history's rows, checked: objects whose epochs are whole numbers that increase.

    A curve drawn from half-read rows would mislead, so a malformed history is one problem for
    the whole field (the first one found), not rows quietly dropped.
    """
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list of epochs, not {type(value).__name__}")
    rows, last = [], 0
    for i, row in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(row, Mapping):
            raise ValueError(f"{at} must be an object, not {type(row).__name__}")
        epoch = row.get("epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise ValueError(f"{at}.epoch must be a whole number, not {epoch!r}")
        if epoch <= last:  # epochs count from 1; a table row per epoch needs each once
            bound = f"the previous epoch ({last})" if i else "0"
            raise ValueError(f"{at}.epoch must exceed {bound}, not {epoch}")
        last = epoch
        parsed = decode(Epoch, row, at)
        if parsed.problems:
            raise ValueError(parsed.problems[0])
        rows.append(parsed)
    return tuple(rows)


@dataclass(frozen=True, kw_only=True)
class TrainingReport(Part):
    """What a training recorded: the generative adapter's (a history of epochs) or the encoder
    fine-tuning's (dev R@1 per epoch, the loss, the examples)."""

    history: tuple[Epoch, ...] | None = None
    epochs: int | None = None
    best_epoch: int | None = None
    best_dev_r1: float | None = None
    dev_queries: int | None = None
    dev_r1_per_epoch: tuple[float, ...] | None = None
    examples: int | None = None
    n_examples: int | None = None
    steps: int | None = None
    resumed_from: int | None = None
    seconds: float | None = None
    stopped: str | None = None
    loss: str | None = None
    parameters: int | None = None
    seed: int | None = None
    threads: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunReport(Part):
    """What a baseline says about its run (``run_info.notes``), filled through
    :meth:`~searchtome.baselines.registry.RunContext.record`.

    ``models``, ``description``, ``parameters`` and ``dtype`` are the runner's to lift out: into
    ``meta.json``'s ``models`` and ``description`` and ``run_info``'s ``parameters`` and
    ``dtype``. The rest is written as the notes, in this order (strings also go into
    ``meta.json``'s one-line ``notes``, in this order).
    """

    models: tuple[str, ...] | None = None
    description: str | None = None
    parameters: int | None = None  # the model's parameter count, LoRA layers included
    dtype: str | None = None  # what the model really ran in
    # lexical
    tokenizer: str | None = None
    similarity: str | None = None
    # dense and hybrid
    encoder: Mapping[str, Any] | None = None  # the encoder's config and cache counts
    n_passages: int | None = None
    leaf_score: str | None = None
    n_chunks: int | None = None
    n_internal_nodes: int | None = None
    tree: str | None = None
    reconstruction: str | None = None
    leaf_rule: str | None = None
    # fine-tuned encoders
    model_reused: bool | None = None
    finetuned_model: str | None = None
    cross_encoder: Mapping[str, Any] | None = None
    first_stage: Mapping[str, Any] | None = None  # a reranker's candidate run and its counts
    # generative
    decode: str | None = None
    prompt_prefix_tokens: Mapping[str, Any] | None = None
    adapter_reused: bool | None = None
    adapter: str | None = None
    training: TrainingReport | None = None
    train_seconds: float | None = None
    epochs: int | None = None
    best_epoch: int | None = None
    best_dev_r1: float | None = None
    setup_and_train_wall_s: float | None = None
    processes: int | None = None
    predict_seconds: float | None = None
    non_leaf_at_1: int | None = None
    invalid_at_1: int | None = None
    empty: int | None = None
    # zero-shot
    backend: str | None = None
    endpoint: str | None = None  # the OpenAI-compatible server's host
    replies_cached: int | None = None
    replies_generated: int | None = None
    rank1_leaf: int | None = None
    rank1_non_leaf: int | None = field(default=None, metadata={"key": "rank1_non-leaf"})
    rank1_invalid: int | None = None
    rank1_empty: int | None = None

    def texts(self) -> list[tuple[str, str]]:
        """(key, text) of every string note, in order (the lifted fields not): ``meta.json``'s
        one-line ``notes``."""
        lifted = ("description", "dtype")
        return [(k, v) for k, v in self.to_dict().items() if isinstance(v, str) and k not in lifted]


@dataclass(frozen=True, kw_only=True)
class RunInfo(Part):
    """``run_info``: the machine-readable record of a run (see ``docs/submissions.md``)."""

    # Written even when unknown (null): the runner always records them.
    null_keys: frozenset[str] = field(
        default=frozenset(
            {"dtype", "training_wall_s", "prediction_wall_s", "system_type", "parameters"}
        ),
        repr=False,
    )
    system: str | None = None
    baseline: str | None = None
    split: str | None = None
    seed: int | None = None
    wall_time_s: float | None = None
    peak_rss_mib: float | None = None
    peak_gpu_mib: float | None = None
    memory_note: str | None = None
    phases: Mapping[str, Phase] | None = None
    training_wall_s: float | None = None
    prediction_wall_s: float | None = None
    dataset: DatasetFacts | None = None
    n_queries: int | None = None
    depth: int | None = None
    overrides: Mapping[str, Any] | None = None
    threads: Mapping[str, Any] | None = None
    machine: Mapping[str, Any] | None = None
    dtype: str | None = None
    system_type: str | None = None
    parameters: float | None = None  # a count (a submitter may write 7.2e9)
    notes: RunReport | None = None

    @property
    def report(self) -> RunReport:
        """The baseline's notes (an empty report when the run recorded none)."""
        return self.notes if self.notes is not None else RunReport()

    def phase(self, name: str) -> Phase:
        """Phase ``name``'s record (an empty one when not recorded)."""
        return (self.phases or {}).get(name) or Phase()


# Fields read by their own function: a training history is checked as a whole.
CUSTOM = {("TrainingReport", "history"): _history}
