"""The files MTEB 2.x loads a retrieval task from, one subset per book.

MTEB's ``RetrievalDatasetLoader`` reads a Hub repository (or a local folder) through
``datasets.load_dataset`` with three configs per subset::

    {book}-corpus    split "corpus":        id, title, text
    {book}-queries   splits train/dev/test: id, text
    {book}-qrels     splits train/dev/test: query-id, corpus-id, score

written here as ``OUT/{book}/corpus.parquet``, ``OUT/{book}/queries/{split}.parquet`` and
``OUT/{book}/qrels/{split}.parquet``, with ``OUT/README.md`` declaring the configs in its YAML
header. Only string columns go in: MTEB requires a column named ``id`` and batches every column
it is given, so the SearchTome layout's ``query_id``/``leaf_id`` names and its list-typed ``path``
column are what made MTEB reject the dataset as shipped. A book is one subset because
SearchTome ranks a query against its own book's leaves only. The title is the leaf's own ToC
title, as in the BEIR export.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchtome.dataset.beir import (
    check_id,
    check_splits,
    export_folder,
    selected_books,
)
from searchtome.dataset.loader import Dataset, load
from searchtome.io import PathLike, atomic_write, write_parquet
from searchtome.records import SPLITS

log = logging.getLogger(__name__)

CORPUS_SPLIT = "corpus"


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    text = pa.string()
    return {
        "corpus": pa.schema([("id", text), ("title", text), ("text", text)]),
        "queries": pa.schema([("id", text), ("text", text)]),
        "qrels": pa.schema([("query-id", text), ("corpus-id", text), ("score", pa.int32())]),
    }


def book_configs(book_id: str, splits: Sequence[str]) -> list[dict[str, Any]]:
    """The three ``datasets`` configs of one book, as the card's YAML ``configs`` list holds them."""
    return [
        {
            "config_name": f"{book_id}-corpus",
            "data_files": [{"split": CORPUS_SPLIT, "path": f"{book_id}/corpus.parquet"}],
        },
        {
            "config_name": f"{book_id}-queries",
            "data_files": [{"split": s, "path": f"{book_id}/queries/{s}.parquet"} for s in splits],
        },
        {
            "config_name": f"{book_id}-qrels",
            "data_files": [{"split": s, "path": f"{book_id}/qrels/{s}.parquet"} for s in splits],
        },
    ]


def _write_book(folder: Path, ds: Dataset, book_id: str, splits: Sequence[str]) -> dict[str, Any]:
    schema = _schemas()
    leaves = ds.leaves(book_id)
    write_parquet(
        folder / "corpus.parquet",
        [{"id": check_id(x.leaf_id, "leaf id"), "title": x.title, "text": x.text} for x in leaves],
        schema["corpus"],
    )
    counts = {}
    for split in splits:
        queries = ds.queries(split, book_id)
        write_parquet(
            folder / "queries" / f"{split}.parquet",
            [{"id": check_id(q.query_id, "query id"), "text": q.text} for q in queries],
            schema["queries"],
        )
        write_parquet(
            folder / "qrels" / f"{split}.parquet",
            [{"query-id": q.query_id, "corpus-id": q.leaf_id, "score": 1} for q in queries],
            schema["qrels"],
        )
        counts[split] = len(queries)
    return {"corpus": len(leaves), "queries": counts}


def _card(ds: Dataset, configs: list[dict[str, Any]]) -> str:
    """The export's README.md: as complete as the dataset's own card (``card.mteb_card``)."""
    from searchtome.dataset.card import mteb_card

    return mteb_card(ds, configs)


def export_mteb(
    data: PathLike | Dataset,
    out_dir: PathLike,
    *,
    books: Sequence[str] | None = None,
    splits: Sequence[str] = SPLITS,
) -> dict[str, Any]:
    """Write the MTEB Hub layout of ``data`` into ``out_dir``; return the counts written."""
    ds = data if isinstance(data, Dataset) else load(data)
    splits = check_splits(splits, ds)
    book_ids = selected_books(ds, books)
    out = Path(out_dir)
    summary: dict[str, Any] = {"format": "mteb", "splits": list(splits), "subsets": {}}
    with export_folder(out, summary, ds) as tmp:
        configs = []
        for b in book_ids:
            summary["subsets"][b] = _write_book(tmp / b, ds, b, splits)
            configs += book_configs(b, splits)
        with atomic_write(tmp / "README.md") as fh:
            fh.write(_card(ds, configs))
    log.info("wrote the MTEB layout of %d book(s) to %s", len(book_ids), out)
    return summary
