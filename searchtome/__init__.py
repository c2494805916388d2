"""SearchTome: a long-document retrieval benchmark over the leaf entries of a book's ToC."""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from searchtome.dataset import Dataset


def load(source: str) -> Dataset:
    """Open a SearchTome dataset: a local folder or ``hf://ORG/NAME[@REVISION]``."""
    from searchtome.dataset import load as _load

    return _load(source)


__all__ = ["__version__", "load"]
