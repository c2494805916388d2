"""JSON as the submission format reads it: strict parsing, type names, the line of each key.

The standard parser accepts NaN, Infinity and repeated keys; a submission may not, so
:func:`loads_strict` rejects them. It also turns nesting deeper than the parser can follow into a
``ValueError`` (not a ``RecursionError``), and reads an integer of more than
:data:`MAX_INT_DIGITS` digits as :class:`OutOfRange`, so a field check names the field holding
``10**400`` instead of a float conversion failing later; :func:`unusable` finds such values (and
non-finite numbers, and nesting deeper than :data:`MAX_DEPTH`) anywhere inside a value. :func:`key_lines` finds where each top-level key of a JSON
object sits, so ``meta.json`` problems can name their line.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

# Integers longer than this are no count, seed or score anyone means; 20 digits hold any 64-bit one.
MAX_INT_DIGITS = 20
# Nesting allowed inside meta.json values (configs are a few levels deep).
MAX_DEPTH = 32


class OutOfRange:
    """An integer literal of more than :data:`MAX_INT_DIGITS` digits, kept only as its length."""

    __slots__ = ("digits",)

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<integer of {self.digits:,} digits>"


def _parse_int(text: str) -> int | OutOfRange:
    # Checked before int(): Python refuses to convert more than 4,300 digits with a message
    # about sys.set_int_max_str_digits, which is no help to a submitter.
    if len(text) > MAX_INT_DIGITS + 1 or len(text.lstrip("-")) > MAX_INT_DIGITS:
        return OutOfRange(text)
    return int(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate field {key[:60]!r}")
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity, duplicate keys and runaway nesting (``ValueError``)."""
    try:
        return json.loads(
            text,
            parse_constant=_reject_constant,
            object_pairs_hook=_no_duplicate_keys,
            parse_int=_parse_int,
        )
    except RecursionError:
        raise ValueError("nested too deeply (arrays or objects inside each other)") from None


def unusable(value: Any, max_depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """``(where, what)`` of the first value no JSON tool can carry, else ``None``.

    Where is a path like ``[2].seeds[0]``; what is an out-of-range integer, a non-finite number,
    or nesting deeper than ``max_depth``. Iterative, so its own depth is no limit.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > max_depth:
            return where, f"nested more than {max_depth} levels deep"
        if isinstance(item, OutOfRange):
            return where, f"an integer of {item.digits:,} digits is out of range"
        if isinstance(item, float) and not math.isfinite(item):
            return where, f"{item} is not a finite number"
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend(
                (v, f"{where}[{i}]", depth + 1) for i, v in reversed(list(enumerate(item)))
            )
    return None


def type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages (``number``, ``list``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, OutOfRange):
        return f"an integer of {value.digits:,} digits (out of range)"
    return type(value).__name__


def is_number(value: Any) -> bool:
    """A JSON number (``true`` and ``false`` are not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def key_lines(text: str) -> dict[str, int]:
    """Line of each top-level key of a JSON object (for ``meta.json:LINE: field:`` messages).

    A small scanner rather than the parser, because ``json`` does not report positions of
    values it accepted; it only needs to track strings, nesting depth and commas.
    """
    lines: dict[str, int] = {}
    depth = 0
    lineno = 1
    i = 0
    n = len(text)
    expecting_key = False
    while i < n:
        ch = text[i]
        if ch == "\n":
            lineno += 1
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            token = text[i : j + 1]
            if depth == 1 and expecting_key:
                with contextlib.suppress(ValueError):
                    lines.setdefault(json.loads(token), lineno)
            lineno += token.count("\n")
            i = j
            expecting_key = False
        elif ch in "{[":
            depth += 1
            expecting_key = ch == "{" and depth == 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 1:
            expecting_key = True
        i += 1
    return lines
