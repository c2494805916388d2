"""The write stage: the dataset folder, written whole or not at all.

Output is built in a temporary sibling folder and moved into place at the end, so ``--out``
holds either the previous dataset or the new one. The stage is skipped when ``--out`` already
holds a dataset whose manifest records the same build fingerprint and whose files still match
their recorded SHA-256.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.dataset.layout import BookInfo, qrels_file, queries_file, write_dataset
from searchtome.dataset.manifest import (
    MANIFEST_FILE,
    DatasetManifest,
    read_manifest,
    verify_manifest,
    write_manifest,
)
from searchtome.errors import SearchTomeError
from searchtome.generate.manifest import SPLITS_FILE
from searchtome.generate.options import BuildOptions
from searchtome.generate.sources import BookSource
from searchtome.generate.splits import SplitResult, split_file_hashes
from searchtome.generate.summary import REPORT_FILE
from searchtome.io import staged_dir, write_json
from searchtome.records import SPLITS, Leaf, Paragraph, Query, TocNode, Unit
from searchtome.settings import progress

log = logging.getLogger(__name__)


def up_to_date(out: Path, fingerprint: str) -> bool:
    """True when ``out`` holds an intact dataset built with this exact fingerprint."""
    if not (out / MANIFEST_FILE).is_file():
        return False
    try:
        build = read_manifest(out).build
        recorded = build.fingerprint if build is not None else None
        return recorded == fingerprint and not verify_manifest(out)
    except SearchTomeError:
        return False


@dataclass(frozen=True)
class BuildOutput:
    """Everything the write stage puts into the dataset folder."""

    sources: Sequence[BookSource]
    extractions: Mapping[str, Any]  # book id → its extraction (ToC source and page count)
    toc: list[TocNode]
    leaves: list[Leaf]
    paragraphs: list[Paragraph]
    units: list[Unit]
    queries: list[Query]
    manifest: DatasetManifest  # without file hashes: those are computed as it is written
    report: dict[str, Any]
    split: SplitResult

    def books(self) -> list[BookInfo]:
        return [
            BookInfo(
                s.book,
                n_pages=self.extractions[s.book.book_id].toc.n_pages,
                toc_source=self.extractions[s.book.book_id].toc.source,
            )
            for s in self.sources
        ]


def write_output(opts: BuildOptions, output: BuildOutput) -> None:
    """Write every file of the dataset to ``opts.out``, replacing what was there atomically."""
    out = opts.out
    if out.exists() and not out.is_dir():
        raise SearchTomeError(f"{out}: exists and is not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST_FILE).is_file():
        raise SearchTomeError(
            f"{out}: folder exists and is not a SearchTome dataset; choose an empty or new --out"
        )
    with staged_dir(out) as tmp:
        for _ in progress(range(1), desc="write", unit="dataset"):
            write_dataset(
                tmp,
                books=output.books(),
                toc=output.toc,
                leaves=output.leaves,
                queries=output.queries,
                paragraphs=output.paragraphs,
                units=output.units,
            )
            files = {s: [queries_file(s), qrels_file(s)] for s in SPLITS}
            write_json(
                tmp / SPLITS_FILE,
                {**output.split.manifest, "sha256": split_file_hashes(tmp, files)},
            )
            write_json(tmp / REPORT_FILE, output.report)
            write_manifest(tmp, output.manifest)
            if opts.card:
                _write_card(tmp)


def _write_card(folder: Path) -> None:
    try:
        from searchtome.dataset.card import write_card
    except ImportError:  # the card module is optional while the project grows
        log.info("no dataset card writer available; skipping README.md")
        return
    write_card(folder)
