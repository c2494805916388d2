"""The submission format and its validator, installed as ``searchtome.submissions``.

The folders next to this file (``submissions/<system>/``) are the submitted runs themselves.

>>> from searchtome.submissions import write_submission, read_submission

Names are resolved lazily, so ``searchtome --help`` (which imports the ``validate`` command)
does not pay for numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "MAX_IDS": "format",
    "META_OPTIONAL": "format",
    "META_REQUIRED": "format",
    "Limits": "format",
    "Problem": "format",
    "load_submission": "format",
    "make_meta": "format",
    "read_predictions": "format",
    "read_submission": "format",
    "write_predictions": "format",
    "write_submission": "format",
    "write_trec": "format",
    "ValidationReport": "validate",
    "validate_submission": "validate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
