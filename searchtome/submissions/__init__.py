"""The submission format and its validator, installed as ``searchtome.submissions``.

The folders next to this file (``submissions/<system>/``) are the submitted runs themselves.
The code, lowest first: ``schema`` (file names, fields, the id cap), ``problems`` (findings and
parsed predictions), ``lines`` (bomb-safe line reading and its :class:`Limits`), ``strictjson``,
the parsers ``jsonl`` and ``trec``, ``meta`` (``meta.json``), ``reader``, ``writer``, and
``validate`` (a submission checked against a dataset).

>>> from searchtome.submissions import write_submission, read_submission

Names are resolved lazily, so ``searchtome --help`` (which imports the ``validate`` command)
does not pay for numpy.
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

_EXPORTS = {
    "MAX_IDS": "schema",
    "META_FILE": "schema",
    "META_OPTIONAL": "schema",
    "META_REQUIRED": "schema",
    "PREDICTION_FILES": "schema",
    "Limits": "lines",
    "Problem": "problems",
    "load_submission": "reader",
    "make_meta": "meta",
    "read_predictions": "reader",
    "read_submission": "reader",
    "write_predictions": "writer",
    "write_submission": "writer",
    "write_trec": "writer",
    "ValidationReport": "validate",
    "validate_submission": "validate",
    "validate_upload": "validate",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
