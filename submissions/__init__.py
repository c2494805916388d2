"""The submission format and its validator, installed as ``searchtome.submissions``.

The folders next to this file (``submissions/<system>/``) are the submitted runs themselves.

>>> from searchtome.submissions import write_submission, read_submission

Names are resolved lazily, so ``searchtome --help`` (which imports the ``validate`` command)
does not pay for numpy.
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
