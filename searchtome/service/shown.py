"""Text a participant chose, as the page and the JSON show it: invisible characters escaped.

A run's system name and description come from its ``meta.json``. Control characters and the
Unicode bidirectional controls (which can make a name read backwards or hide part of it) are
shown as ``\\uXXXX`` instead of being sent as they are; everything else is kept.
"""

from __future__ import annotations

import re

INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def visible(text: str) -> str:
    return INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
