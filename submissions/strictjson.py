"""JSON as the submission format reads it: strict parsing, type names, the line of each key.

The standard parser accepts NaN, Infinity and repeated keys; a submission may not, so
:func:`loads_strict` rejects them. :func:`key_lines` finds where each top-level key of a JSON
object sits, so ``meta.json`` problems can name their line.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate field {key!r}")
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity and duplicate keys (``ValueError``)."""
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)


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
