"""The write stage: the dataset folder, written whole or not at all.

Output is built in a temporary sibling folder and moved into place at the end, so ``--out``
holds either the previous dataset or the new one. The stage is skipped when ``--out`` already
holds a dataset whose manifest records the same build fingerprint and whose files still match
their recorded SHA-256.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.generate.manifest import SPLITS_FILE
from searchtome.generate.options import BuildOptions
from searchtome.generate.sources import BookSource
from searchtome.generate.splits import split_file_hashes
from searchtome.generate.summary import REPORT_FILE
from searchtome.io import read_json, staged_dir, write_json
from searchtome.records import SPLITS, Leaf, Paragraph, Query, TocNode, Unit
from searchtome.settings import progress

log = logging.getLogger(__name__)


def up_to_date(out: Path, fingerprint: str) -> bool:
    """True when ``out`` holds an intact dataset built with this exact fingerprint."""
    from searchtome.dataset.layout import MANIFEST_FILE, verify_manifest

    manifest = out / MANIFEST_FILE
    if not manifest.is_file():
        return False
    try:
        recorded = read_json(manifest).get("build", {}).get("fingerprint")
        return recorded == fingerprint and not verify_manifest(out)
    except (SearchTomeError, AttributeError):
        return False


def write_output(
    opts: BuildOptions,
    sources: Sequence[BookSource],
    extractions: dict[str, Any],
    toc: list[TocNode],
    leaves: list[Leaf],
    paragraphs: list[Paragraph],
    units: list[Unit],
    queries: list[Query],
    info: dict[str, Any],
    report: dict[str, Any],
    split: Any,
) -> None:
    """Write every file of the dataset to ``opts.out``, replacing what was there atomically."""
    from searchtome.dataset.layout import (
        BookInfo,
        qrels_file,
        queries_file,
        write_dataset,
        write_manifest,
    )

    out = opts.out
    if out.exists() and not out.is_dir():
        raise SearchTomeError(f"{out}: exists and is not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise SearchTomeError(
            f"{out}: folder exists and is not a SearchTome dataset; choose an empty or new --out"
        )
    books = [
        BookInfo(
            s.book,
            n_pages=extractions[s.book.book_id].toc.n_pages,
            toc_source=extractions[s.book.book_id].toc.source,
        )
        for s in sources
    ]
    with staged_dir(out) as tmp:
        for _ in progress(range(1), desc="write", unit="dataset"):
            write_dataset(
                tmp,
                books=books,
                toc=toc,
                leaves=leaves,
                queries=queries,
                paragraphs=paragraphs,
                units=units,
            )
            files = {s: [queries_file(s), qrels_file(s)] for s in SPLITS}
            write_json(
                tmp / SPLITS_FILE, {**split.manifest, "sha256": split_file_hashes(tmp, files)}
            )
            write_json(tmp / REPORT_FILE, report)
            write_manifest(tmp, info)
            if opts.card:
                _write_card(tmp)


def _write_card(folder: Path) -> None:
    try:
        from searchtome.dataset.card import write_card
    except ImportError:  # the card module is optional while the project grows
        log.info("no dataset card writer available; skipping README.md")
        return
    write_card(folder)
