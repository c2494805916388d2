"""Reading a model's reply into questions, and refusing replies that no build can use.

Replies are read at one of three strictness levels:

* ``strict``  — a JSON object ``{"questions": [...]}``, optionally inside a fenced code block;
* ``json``    — also a bare JSON list, JSON with prose around it, items ``{"question": ...}``;
* ``lenient`` — also numbered or bulleted lists and plain lines ending in ``?``, and a reply cut
  off at the token limit keeps its complete items (small local models rarely follow JSON).

Hostile replies. A reply is screened before it is cached (:func:`screen_reply`): one over
:data:`MAX_REPLY_CHARS` characters, or text that is not valid Unicode, is stored as an empty
reply whose finish reason says why (so ``--endpoint cache`` replays the same failure without
storing megabytes, and a repair request never echoes it). Reading never raises: a reply of
thousands of ``[`` (which makes :func:`json.loads` raise :class:`RecursionError`) is "not JSON",
and at most :func:`question_cap` questions are read from one reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from searchtome.errors import unknown_name

STRICTNESS = ("strict", "json", "lenient")
# A 512-token reply is 2-3 kB; 32 kB leaves room for verbose models and wide scripts while an
# 8 MB degenerate reply is refused before it reaches the cache or a repair request.
MAX_REPLY_CHARS = 32_768
# Finish reasons this module writes for a refused reply begin with this (never a server's).
REFUSED = "searchtome-refused: "
# How many places inside a reply are tried as the start of a JSON value: a reply of many
# ``[`` would otherwise be decoded from each of them.
_SCAN_STARTS = 64


def question_cap(n_asked: int) -> int:
    """The most questions read from one reply asked for ``n_asked``: the rest could only be
    dropped as "more than asked for", after filters that cost time per question."""
    return max(50, 4 * n_asked)


def screen_reply(
    content: Any, finish_reason: Any, served_model: Any, max_chars: int = MAX_REPLY_CHARS
) -> tuple[str | None, str | None, str | None]:
    """``(content, finish_reason, served_model)`` safe to cache: strings or ``None``, content
    within ``max_chars`` and valid Unicode (else ``None`` with a :data:`REFUSED` reason)."""
    finish = finish_reason if isinstance(finish_reason, str) else None
    served = served_model if isinstance(served_model, str) else None
    if finish is not None:
        finish = finish[:100]
    if served is not None:
        served = served[:200]
    if not isinstance(content, str):
        return None, finish, served
    if len(content) > max_chars:
        return (
            None,
            f"{REFUSED}reply too large ({len(content):,} characters, limit {max_chars:,})",
            served,
        )
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        return None, f"{REFUSED}reply is not valid Unicode text (lone surrogates)", served
    return content, finish, served


def reply_problem(
    content: str | None, finish_reason: str | None, length: int | None = None
) -> str | None:
    """Why a cached reply cannot be used under any strictness (``None``: some build can use it).
    ``length`` is the content's length when ``content`` was not loaded (too large to read)."""
    size = length if length is not None else len(content or "")
    if size > MAX_REPLY_CHARS:
        return f"reply too large ({size:,} characters, limit {MAX_REPLY_CHARS:,})"
    parsed = parse_reply(content, finish_reason, "lenient")
    return parsed.error


@dataclass(frozen=True)
class ParsedReply:
    questions: tuple[str, ...]
    error: str | None = None
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_MARKER = re.compile(
    r"^\s*(?:(?:q(?:uestion)?\s*)?\d{1,3}\s*[.):\]-]|[-*•·–]|\(\d{1,3}\))\s*", re.I
)
_INLINE_NUMBER = re.compile(r"(?<=[?？])\s+(?=(?:\d{1,3}[.)]|[-*•])\s)")
_WS = re.compile(r"\s+")


def clean_question(text: str) -> str:
    """Strip list markers, wrapping quotes and extra whitespace."""
    text = _WS.sub(" ", text).strip()
    text = _MARKER.sub("", text, count=1).strip()
    if len(text) >= 2 and text[0] in "\"'“‘" and text[-1] in "\"'”’":
        text = text[1:-1].strip()
    return text.rstrip(",").strip()


def _loads(text: str) -> tuple[bool, Any]:
    """``(True, value)`` or ``(False, None)``: deep nesting is not JSON we can use either."""
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _json_candidates(content: str, scan: bool = True) -> list[Any]:
    """JSON values found in a reply: fenced blocks, the whole reply, then (``scan``) the first
    value that decodes at one of the first few ``{``/``[`` inside it."""
    found: list[Any] = []
    for block in _FENCE.findall(content):
        ok, value = _loads(block)
        if ok:
            found.append(value)
    stripped = content.strip()
    ok, value = _loads(stripped)
    if ok:
        found.append(value)
        return found
    if not scan:
        return found
    decoder = json.JSONDecoder()
    starts = (m.start() for m in re.finditer(r"[{\[]", stripped))
    for _, i in zip(range(_SCAN_STARTS), starts, strict=False):
        try:
            value, _ = decoder.raw_decode(stripped, i)
        except (ValueError, RecursionError):
            continue
        found.append(value)
        break
    return found


def _from_json(value: Any, strictness: str) -> list[str] | str:
    """The question list inside a decoded JSON value, or the reason it has the wrong shape."""
    items: Any = None
    if isinstance(value, dict):
        if "questions" in value:
            items = value["questions"]
        elif strictness != "strict":
            keys = [k for k in value if isinstance(k, str) and k.lower().strip() == "questions"]
            lists = [v for v in value.values() if isinstance(v, list)]
            if keys:
                items = value[keys[0]]
            elif len(value) == 1 and len(lists) == 1:
                items = lists[0]
    elif isinstance(value, list) and strictness != "strict":
        items = value
    if not isinstance(items, list):
        return 'wrong shape (expected {"questions": [...]})'
    out = []
    for item in items:
        if isinstance(item, dict) and strictness != "strict":
            item = item.get("question") or item.get("q")
        if not isinstance(item, str):
            return "wrong shape (questions must be strings)"
        out.append(item)
    return out


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"(?=\s*[,\]])')


def _salvage_json_list(content: str) -> list[str]:
    """Complete string items of a JSON list that was cut off or otherwise broken."""
    start = content.find("[")
    if start < 0:
        return []
    out = []
    for raw in _JSON_STRING.findall(content[start:]):
        ok, value = _loads(f'"{raw}"')
        if ok:
            out.append(value)
    return out


def _from_lines(content: str) -> list[str]:
    """Questions from a numbered/bulleted list or from lines that end in ``?`` (or ``？``)."""
    text = _INLINE_NUMBER.sub("\n", content)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    marked = [ln for ln in lines if _MARKER.match(ln)]
    chosen = marked if marked else [ln for ln in lines if ln.strip().endswith(("?", "？"))]
    return [clean_question(ln) for ln in chosen]


def parse_reply(
    content: str | None,
    finish_reason: str | None,
    strictness: str = "json",
    max_questions: int | None = None,
) -> ParsedReply:
    """Read a model's reply into questions, or say why it cannot be used; never raises on the
    reply's content. At most ``max_questions`` are kept (a note says how many there were)."""
    if strictness not in STRICTNESS:
        raise unknown_name("strictness", strictness, STRICTNESS)
    if finish_reason and finish_reason.startswith(REFUSED):
        return ParsedReply((), finish_reason[len(REFUSED) :])
    if content is not None and len(content) > MAX_REPLY_CHARS:  # cached by an older version
        return ParsedReply((), f"reply too large ({len(content):,} characters)")
    parsed = _parse(content, finish_reason, strictness)
    if max_questions is not None and len(parsed.questions) > max_questions:
        note = f"read the first {max_questions} of {len(parsed.questions):,} questions"
        return ParsedReply(parsed.questions[:max_questions], note=note)
    return parsed


def _parse(content: str | None, finish_reason: str | None, strictness: str) -> ParsedReply:
    if content is None or not content.strip():
        return ParsedReply((), "empty reply")
    truncated = finish_reason == "length"
    if truncated and strictness != "lenient":
        return ParsedReply((), "reply cut off at the token limit")
    reason = "not JSON"
    for value in _json_candidates(content, scan=strictness != "strict"):
        got = _from_json(value, strictness)
        if isinstance(got, str):
            reason = got
            continue
        questions = tuple(q for q in (clean_question(x) for x in got) if q)
        if not questions:
            return ParsedReply((), "no questions in the reply")
        return ParsedReply(questions)
    if strictness != "lenient":
        return ParsedReply((), reason)
    items = [q for q in (clean_question(x) for x in _salvage_json_list(content)) if q]
    if items:
        note = "broken JSON; kept its complete items" if not truncated else None
    else:
        items = [q for q in _from_lines(content) if q]
        note = None
    if truncated and items:
        # The last item may be cut mid-sentence: keep only complete ones.
        if not items[-1].endswith(("?", "？")):
            items = items[:-1]
        note = "reply cut off at the token limit; kept its complete items"
    if not items:
        return ParsedReply((), "reply cut off at the token limit" if truncated else reason)
    return ParsedReply(tuple(items), note=note)
