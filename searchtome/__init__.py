"""SearchTome: a long-document retrieval benchmark over the leaf entries of a book's ToC."""

from __future__ import annotations

from typing import TYPE_CHECKING

from searchtome.version import __version__

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset


def load(source: str) -> Dataset:
    """Open a SearchTome dataset: a local folder or ``hf://ORG/NAME[@REVISION]``."""
    from searchtome.dataset.loader import load as _load

    return _load(source)


__all__ = ["__version__", "load"]
