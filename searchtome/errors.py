"""One exception type for every user-facing failure.

The CLI prints ``searchtome: error: <message>`` on one line and exits non-zero; no traceback.
Messages say which file, what is wrong and what to do about it.
"""

from __future__ import annotations

from collections.abc import Iterable


class SearchTomeError(Exception):
    """A failure caused by input or environment, reported to the user in one line."""

    exit_code = 1


class OfflineError(SearchTomeError):
    """Raised instead of touching the network while ``SEARCHTOME_OFFLINE=1``."""


def unknown_name(kind: str, name: str, choices: Iterable[str]) -> SearchTomeError:
    """``unknown baseline 'bm52' (did you mean 'bm25'?); known: ...``."""
    import difflib  # only for a mistyped name, not on every start

    choices = sorted(choices)
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    known = ", ".join(choices) if choices else "none"
    return SearchTomeError(f"unknown {kind} {name!r}{hint}; known: {known}")
