"""The dataset revision: one hash of the data files, never of the card or the manifest.

Runs pin it (``meta.json``'s ``dataset_revision``, ``... (data sha256:0123456789abcdef)``) and
so do MTEB results of a local dataset (its first 40 hex digits). It is the SHA-256 of the
``sha256sum``-style listing (``<sha256>  <path>``, one line per file, sorted by path) of every
file except the card (``README.md``, rewritten by ``publish`` and by card edits) and
``manifest.json`` (which holds descriptive fields and the card's hash): a card edit leaves it
as it was, a changed data file changes it. It is computed from the hashes the manifest records
(the loader has checked them), or from the files when a folder has no manifest. The shell gives
the same digest::

    cd DATA && find . -type f ! -path '*/.*' -printf '%P\\n' | grep -vx 'README.md\\|manifest.json' \\
        | LC_ALL=C sort | xargs sha256sum | sha256sum

Pins written before this rule hash the whole manifest file (``(manifest sha256:...)``); they
are kept and read as the text they are, and the project's own were moved to this rule after
checking that the data files behind them are byte-identical (docs/datasets.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from searchtome.dataset.layout import CARD_FILE
from searchtome.dataset.manifest import MANIFEST_FILE, FileHash, file_hashes, read_manifest
from searchtome.io import PathLike

NOT_DATA = frozenset({CARD_FILE, MANIFEST_FILE})  # at the folder's top level only


def data_sha256(files: Mapping[str, FileHash]) -> str:
    """The digest of a listing of files (path → hash), the card and the manifest left out."""
    listing = "".join(
        f"{files[rel].sha256}  {rel}\n" for rel in sorted(files) if rel not in NOT_DATA
    )
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def dataset_revision(root: PathLike) -> str:
    """The revision of the dataset folder ``root`` (64 hex digits)."""
    folder = Path(root)
    recorded = read_manifest(folder).files if (folder / MANIFEST_FILE).is_file() else {}
    return data_sha256(recorded or file_hashes(folder))
