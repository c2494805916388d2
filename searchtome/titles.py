"""Titles on one line, and title paths: the one definition ingest and the baselines share.

Ingest cleans every ToC title with :func:`clean_title` before it is written to a dataset, and the
baselines clean titles (and queries) again before they put them in prompts, identifiers or
indexed text. Both must agree, or a title the dataset stores would not match the identifier a
model generates for it; and since the function is idempotent, cleaning an already clean title
changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

PATH_SEP = " > "

_SPACE_RE = re.compile(r"\s+")
# Invisible characters PDF text layers scatter inside words: zero-width space, byte-order mark,
# soft hyphen. Dropped outright, since a space there would split the word.
_INVISIBLE = frozenset("\u200b\ufeff\u00ad")
# Control characters and line/paragraph separators become spaces, then collapse with the rest.
_BREAKING = frozenset(("Cc", "Zl", "Zp"))


def clean_title(title: str | None) -> str:
    """NFC, invisible characters dropped, controls and whitespace runs one space, stripped.

    ``None`` reads as the empty string (PDF outlines may carry entries without a title).
    """
    title = unicodedata.normalize("NFC", title or "")
    title = "".join(
        " " if unicodedata.category(c) in _BREAKING else c for c in title if c not in _INVISIBLE
    )
    return _SPACE_RE.sub(" ", title).strip()


def title_path(path: Sequence[str]) -> str:
    """``("Chapter 1", " Cells ", "", "Lipids")`` → ``Chapter 1 > Cells > Lipids``.

    Every title is cleaned with :func:`clean_title`; titles that clean to nothing are left out.
    """
    return PATH_SEP.join(t for t in map(clean_title, path) if t)
