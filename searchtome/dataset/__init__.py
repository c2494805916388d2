"""The dataset: its layout and schemas, loading, the card, publishing and exports.

>>> from searchtome.dataset import load
>>> ds = load("data/whole-child")  # or "hf://ORG/NAME@REVISION"
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

# No submodule is named after an export: importing it would replace the export on the package.
_EXPORTS = {"BookInfo": "layout", "Dataset": "loader", "load": "loader"}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
