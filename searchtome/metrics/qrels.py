"""Relevance judgements: ``query id → {doc id: relevance}``, from a dataset, TREC or BEIR files."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.errors import SearchTomeError

if TYPE_CHECKING:
    from searchtome.dataset.loader import Dataset


class Qrels(Mapping[str, Mapping[str, int]]):
    """Relevance judgements: ``query id → {doc id: relevance}`` (relevant means > 0).

    The query order is kept as given; it is the order of every per-query output.
    """

    def __init__(self, mapping: Mapping[str, Mapping[str, int]], name: str = "qrels") -> None:
        self._data: dict[str, dict[str, int]] = {}
        for qid, docs in mapping.items():
            self._data[str(qid)] = {str(d): int(r) for d, r in docs.items()}
        self.name = name

    # Mapping protocol
    def __getitem__(self, qid: str) -> Mapping[str, int]:
        return self._data[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Qrels({self.name!r}, queries={len(self)})"

    def query_ids(self) -> list[str]:
        return list(self._data)

    def relevant(self, qid: str) -> set[str]:
        return {d for d, r in self._data.get(qid, {}).items() if r > 0}

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {q: dict(d) for q, d in self._data.items()}

    # Constructors
    @classmethod
    def from_dataset(cls, dataset: Dataset | str | Path, split: str = "test") -> Qrels:
        """The gold leaf of every query of ``split`` (relevance 1), in the dataset's query order.

        Refused on the held-back split of a blind release's public half (no gold there).
        """
        from searchtome.dataset.loader import Dataset, load

        ds = dataset if isinstance(dataset, Dataset) else load(dataset)
        return cls({r.query_id: {r.leaf_id: 1} for r in ds.qrels(split)}, name=f"{split}")

    @classmethod
    def from_trec(cls, path: str | Path) -> Qrels:
        """A TREC qrels file: ``qid iter docno rel`` per line (whitespace-separated)."""
        path = Path(path)
        data: dict[str, dict[str, int]] = {}
        for lineno, line in _read_text_lines(path):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise SearchTomeError(
                    f"{path}:{lineno}: line: expected 4 fields 'qid iter docno rel' in a TREC "
                    f"qrels file, got {len(parts)}"
                )
            qid, _, doc, rel = parts
            try:
                value = int(rel)
            except ValueError:
                try:
                    as_float = float(rel)
                except ValueError:
                    as_float = math.nan
                if not as_float.is_integer():
                    raise SearchTomeError(
                        f"{path}:{lineno}: rel: {rel!r} is not an integer relevance"
                    ) from None
                value = int(as_float)
            data.setdefault(qid, {})[doc] = value
        if not data:
            raise SearchTomeError(f"{path}: no judgements found; is this a TREC qrels file?")
        return cls(data, name=path.name)

    @classmethod
    def from_beir(cls, path: str | Path) -> Qrels:
        """A BEIR/MTEB qrels TSV with the header ``query-id corpus-id score``."""
        path = Path(path)
        data: dict[str, dict[str, int]] = {}
        lines = _read_text_lines(path)
        for lineno, line in lines:
            parts = line.rstrip("\n").split("\t")
            if lineno == 1 and parts[:2] == ["query-id", "corpus-id"]:
                continue
            if len(parts) != 3:
                raise SearchTomeError(
                    f"{path}:{lineno}: line: expected 3 tab-separated fields "
                    f"'query-id corpus-id score', got {len(parts)}"
                )
            try:
                data.setdefault(parts[0], {})[parts[1]] = int(float(parts[2]))
            except ValueError:
                raise SearchTomeError(
                    f"{path}:{lineno}: score: {parts[2]!r} is not a number"
                ) from None
        return cls(data, name=path.name)

    @classmethod
    def from_file(cls, path: str | Path) -> Qrels:
        """TREC qrels or a BEIR TSV, told apart by the content."""
        path = Path(path)
        for _, line in _read_text_lines(path):
            if line.strip():
                if "\t" in line and len(line.rstrip("\n").split("\t")) == 3:
                    return cls.from_beir(path)
                return cls.from_trec(path)
        raise SearchTomeError(f"{path}: the qrels file is empty")

    def to_trec(self, path: str | Path) -> Path:
        from searchtome.io import atomic_write

        with atomic_write(path) as fh:
            for qid, docs in self._data.items():
                for doc, rel in docs.items():
                    fh.write(f"{qid} 0 {doc} {rel}\n")
        return Path(path)


def _read_text_lines(path: Path) -> list[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return list(enumerate(fh, 1))
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise SearchTomeError(f"{path}: not UTF-8 text ({exc.reason})") from None
