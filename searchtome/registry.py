"""One small lazy registry of named things (commands, baselines, measures).

Modelled on lm-evaluation-harness's ``lm_eval/api/registry.py``: an entry is either the object
itself (``add``, or the ``register`` decorator) or a lazy reference that is imported on first
:meth:`Registry.get`, so listing names never imports anything:

- ``"package.module:attr"``: the object is that attribute of the module;
- ``"package.module"``: importing the module registers the entry (a decorator in it calls
  :meth:`Registry.add` under the same name).

A declaration may carry a one-line summary (``(target, summary)``), read by :meth:`Registry.summary`
without importing the target: ``searchtome --help`` lists every command from these alone. An
unknown name fails with :func:`searchtome.errors.unknown_name`'s did-you-mean. Names keep the
order they were declared in (``searchtome --help`` lists commands in that order).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar, cast

from searchtome.errors import unknown_name

T = TypeVar("T")


class _Lazy:
    """A declared entry not imported yet: ``module`` or ``module:attr``."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        if not target.partition(":")[0] or target.endswith(":"):
            raise ValueError(f"lazy registry entry {target!r}: write 'module' or 'module:attr'")
        self.target = target

    def load(self) -> tuple[bool, object]:
        """Import the module; ``(True, obj)`` for ``module:attr``, ``(False, None)`` for a bare
        module (whose import is expected to have registered the entry)."""
        module, _, attr = self.target.partition(":")
        loaded = importlib.import_module(module)
        return (True, getattr(loaded, attr)) if attr else (False, None)


class Registry(Generic[T]):
    """Named entries of one ``kind`` (the word in error messages: ``unknown baseline ...``)."""

    def __init__(self, kind: str, lazy: Mapping[str, str | tuple[str, str]] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T | _Lazy] = {}
        self._summaries: dict[str, str] = {}
        for name, declared in (lazy or {}).items():
            target, summary = (declared, "") if isinstance(declared, str) else declared
            self.declare(name, target, summary)

    def declare(self, name: str, target: str, summary: str = "") -> None:
        """A lazy entry: ``target`` is ``"module:attr"`` or ``"module"`` (see the module doc);
        ``summary`` is its one line for listings."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} declared twice")
        if "\n" in summary:
            raise ValueError(f"{self.kind} {name!r}: a summary is one line")
        self._entries[name] = _Lazy(target)
        if summary:
            self._summaries[name] = summary

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` as ``name``, replacing a lazy declaration of it; the same object
        (or an equal one, as when a module is imported again) may be added twice."""
        current = self._entries.get(name)
        if current is not None and not isinstance(current, _Lazy) and current != obj:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`: ``@REGISTRY.register("name")``."""

        def deco(obj: T) -> T:
            return self.add(name, obj)

        return deco

    def names(self) -> list[str]:
        """Every name, declared or added, in that order; imports nothing."""
        return list(self._entries)

    def summary(self, name: str) -> str:
        """The one-line summary declared for ``name`` ("" when none was); imports nothing."""
        if name not in self._entries:
            raise unknown_name(self.kind, name, self._entries)
        return self._summaries.get(name, "")

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def is_loaded(self, name: str) -> bool:
        """Whether ``name`` is held as its object (no import left to do)."""
        return name in self._entries and not isinstance(self._entries[name], _Lazy)

    def get(self, name: str) -> T:
        """The entry ``name``, imported on first use; an unknown name gets a did-you-mean."""
        entry = self._entries.get(name)
        if entry is None:
            raise unknown_name(self.kind, name, self._entries)
        if not isinstance(entry, _Lazy):
            return entry
        direct, obj = entry.load()
        if direct:
            self._entries[name] = cast(T, obj)
        found = self._entries[name]
        if isinstance(found, _Lazy):
            raise LookupError(
                f"{self.kind} {name!r}: importing {entry.target} did not register it; "
                f"register it there under that name"
            )
        return found

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def values(self) -> list[T]:
        """Every entry, each imported, in :meth:`names` order."""
        for name in self.names():
            self.get(name)
        # Again: an import may have registered names that were not declared.
        return [self.get(name) for name in self.names()]
