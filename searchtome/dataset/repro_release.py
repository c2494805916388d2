"""Reading an independent reproduction's release (``stair-rag-reproduction`` layout).

The release keeps one book under ``data/``::

    data/derived/{book}-toc-nodes.json          every ToC node (id, level, title, page, parent_id,
                                                path, is_leaf, is_retrieval_leaf)
    data/derived/{book}-retrieval-leaves.json   the nodes that are retrieval targets
    data/derived/{book}-sections.json           raw section text of each retrieval leaf
    data/derived/{book}-paragraphs.json         paragraphs ({leaf}-pNNN)
    data/derived/{book}-generation-units.json   merged paragraph groups ({leaf}-gNNN)
    data/splits/{book}/{train,dev,test}.jsonl   questions, with a manifest of their SHA-256
    data/retriever/{book}/manifest.json         (optional) hashes of the ToC and split manifest

This module finds the book, verifies the recorded SHA-256 values before anything is read for
conversion, reads every file (remembering each one's hash for provenance) and works out the
book's catalog entry. Converting the records is :mod:`searchtome.dataset.repro`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import read_json, read_jsonl, sha256_file
from searchtome.records import SPLITS, Book

log = logging.getLogger(__name__)

DEFAULT_REPOSITORY = "https://github.com/NaveenGali11/stair-rag-reproduction"
# Used only when neither the packaged catalog nor the release names the book's domain.
_KNOWN_DOMAINS = {"whole-child": "Education"}
_CC_URLS = {
    "CC BY 4.0": "https://creativecommons.org/licenses/by/4.0/",
    "CC BY-SA 4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "CC BY-NC 4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "CC BY-NC-SA 4.0": "https://creativecommons.org/licenses/by-nc-sa/4.0/",
}


# -- locating and verifying the release ------------------------------------------------------------
def data_root(src: Path) -> Path:
    """The release's ``data/`` folder: ``src/data``, or ``src`` itself."""
    for cand in (src / "data", src):
        if (cand / "derived").is_dir() and (cand / "splits").is_dir():
            return cand
    raise SearchTomeError(
        f"{src}: not a reproduction release (expected data/derived/ and data/splits/ inside); "
        "pass the folder that holds data/"
    )


def find_book(data: Path, book: str | None) -> str:
    """The book to import: ``book`` if the release has it, else the release's only book."""
    books = sorted(p.name for p in (data / "splits").iterdir() if p.is_dir())
    if book is not None:
        if book not in books:
            raise unknown_name(f"book in {data / 'splits'}", book, books)
        return book
    if len(books) != 1:
        raise SearchTomeError(
            f"{data / 'splits'}: holds {len(books)} books ({', '.join(books) or 'none'}); "
            "choose one with --book"
        )
    return books[0]


class ReleaseReader:
    """Reads release files and remembers the SHA-256 of each one (provenance)."""

    def __init__(self, root: Path, data: Path) -> None:
        self.root, self.data = root, data
        self.hashes: dict[str, str] = {}

    def key(self, rel: str) -> str:
        """``rel`` (inside data/) as a path relative to the release root."""
        return (self.data / rel).relative_to(self.root).as_posix()

    def path(self, rel: str) -> Path:
        path = self.data / rel
        if not path.is_file():
            raise SearchTomeError(f"{path}: missing from the release; the import needs it")
        return path

    def _record(self, path: Path) -> None:
        self.hashes[path.relative_to(self.root).as_posix()] = sha256_file(path)

    def json(self, rel: str) -> Any:
        path = self.path(rel)
        self._record(path)
        return read_json(path)

    def jsonl(self, rel: str) -> list[dict[str, Any]]:
        path = self.path(rel)
        self._record(path)
        return list(read_jsonl(path))

    def text(self, rel: str) -> str | None:
        """A file relative to the release root (not data/), or ``None`` when it is absent."""
        path = self.root / rel
        if not path.is_file():
            return None
        self._record(path)
        return path.read_text(encoding="utf-8")

    def check_hash(self, rel: str, expected: str | None, what: str) -> str:
        """``"verified"`` or ``"unrecorded"``; a mismatch stops the import."""
        path = self.path(rel)
        actual = sha256_file(path)
        if expected is None:
            return "unrecorded"
        if actual != expected:
            raise SearchTomeError(
                f"{path}: SHA-256 {actual} does not match {expected} recorded in {what}; "
                "the release is modified or incomplete — fetch it again"
            )
        return "verified"


@dataclass(frozen=True)
class ReleaseSplitRecord:
    """What the release's ``data/splits/{book}/manifest.json`` says about its split (the
    fields the import records; the hashes are checked by :func:`read_release`)."""

    algorithm_version: str = "?"
    seed: Any = None
    group_key: Any = None
    actual_unit_counts: Any = None
    leaf_coverage: Any = None
    constraints: Any = None
    paper_reference_counts: Any = None
    total_questions: int | None = None  # absent: the import counts the questions itself
    total_units: Any = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReleaseSplitRecord:
        return cls(
            algorithm_version=data.get("algorithm_version", "?"),
            seed=data.get("seed"),
            group_key=data.get("group_key"),
            actual_unit_counts=data.get("actual_unit_counts"),
            leaf_coverage=data.get("leaf_coverage"),
            constraints=data.get("constraints"),
            paper_reference_counts=data.get("paper_reference_counts"),
            total_questions=data.get("total_questions"),
            total_units=data.get("total_units"),
        )


@dataclass
class Release:
    """One book's files from a release, as read (release ids, release field names)."""

    reader: ReleaseReader
    book_id: str
    split_manifest: ReleaseSplitRecord
    nodes: list[dict[str, Any]]
    retrieval: list[dict[str, Any]]
    sections: list[dict[str, Any]]
    paragraphs: list[dict[str, Any]]
    units: list[dict[str, Any]]
    questions: dict[str, list[dict[str, Any]]]
    removals: list[dict[str, Any]]
    fields: dict[str, str]  # the ``- Key: value`` lines of data/MANIFEST.md
    repository: str
    verification: dict[str, str] = field(default_factory=dict)  # file -> verified | unrecorded

    def path(self, kind: str) -> Path:
        """``data/derived/{book}-{kind}.json`` (for messages about that file)."""
        return self.reader.path(f"derived/{self.book_id}-{kind}.json")

    def split_path(self, split: str) -> Path:
        return self.reader.path(f"splits/{self.book_id}/{split}.jsonl")


def source_repository(root: Path, given: str | None = None) -> str:
    """The release's repository: ``given``, else the GitHub URL its SOURCE.md names."""
    if given is not None:
        return given
    path = root / "SOURCE.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    m = re.search(r"https://github\.com/[\w.-]+/[\w.-]+", text)
    return m.group(0) if m else DEFAULT_REPOSITORY


def read_release(root: Path, data: Path, book_id: str, repository: str | None = None) -> Release:
    """Verify, then read, every file of ``book_id``; the repository comes from SOURCE.md if unset."""
    reader = ReleaseReader(root, data)
    split_manifest, verification = _verify(reader, book_id)
    nodes = reader.json(f"derived/{book_id}-toc-nodes.json")
    retrieval = reader.json(f"derived/{book_id}-retrieval-leaves.json")
    sections = reader.json(f"derived/{book_id}-sections.json")
    paragraphs = reader.json(f"derived/{book_id}-paragraphs.json")
    units = reader.json(f"derived/{book_id}-generation-units.json")
    questions = {s: reader.jsonl(f"splits/{book_id}/{s}.jsonl") for s in SPLITS}
    removals_rel = f"derived/{book_id}-generation-removals.json"
    removals = reader.json(removals_rel) if (data / removals_rel).is_file() else []
    fields = manifest_fields(reader.text("data/MANIFEST.md"))
    reader.text("SOURCE.md")  # read for its hash
    repository = source_repository(root, repository)
    reader.text("DATA_LICENSE.md")  # read for its hash: the data licence is part of provenance
    return Release(
        reader=reader,
        book_id=book_id,
        split_manifest=ReleaseSplitRecord.from_dict(split_manifest),
        nodes=nodes,
        retrieval=retrieval,
        sections=sections,
        paragraphs=paragraphs,
        units=units,
        questions=questions,
        removals=removals,
        fields=fields,
        repository=repository,
        verification=verification,
    )


def _verify(reader: ReleaseReader, book_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Check the split files, units and ToC against the hashes the release records.

    Nothing is converted from an unverified release, so this runs before any other file is read.
    """
    data = reader.data
    split_manifest_rel = f"splits/{book_id}/manifest.json"
    split_manifest = reader.json(split_manifest_rel)
    recorded = split_manifest.get("split_sha256") or {}
    verification: dict[str, str] = {}
    for split in SPLITS:
        if split not in recorded:
            raise SearchTomeError(
                f"{data / split_manifest_rel}: no SHA-256 recorded for split {split!r}; "
                "the split files cannot be verified"
            )
        rel = f"splits/{book_id}/{split}.jsonl"
        verification[reader.key(rel)] = reader.check_hash(
            rel, recorded[split], f"{data / split_manifest_rel} (split_sha256)"
        )
    units_rel = f"derived/{book_id}-generation-units.json"
    verification[reader.key(units_rel)] = reader.check_hash(
        units_rel,
        split_manifest.get("source_units_sha256"),
        f"{data / split_manifest_rel} (source_units_sha256)",
    )
    nodes_rel = f"derived/{book_id}-toc-nodes.json"
    retriever_rel = f"retriever/{book_id}/manifest.json"
    if (data / retriever_rel).is_file():
        retriever = reader.json(retriever_rel)
        verification[reader.key(nodes_rel)] = reader.check_hash(
            nodes_rel,
            retriever.get("source_nodes_sha256"),
            f"{data / retriever_rel} (source_nodes_sha256)",
        )
        verification[reader.key(split_manifest_rel)] = reader.check_hash(
            split_manifest_rel,
            retriever.get("source_split_manifest_sha256"),
            f"{data / retriever_rel} (source_split_manifest_sha256)",
        )
    return split_manifest, verification


# -- book metadata ---------------------------------------------------------------------------------
def manifest_fields(text: str | None) -> dict[str, str]:
    """``- Key: value`` lines of the release's MANIFEST.md (first book section)."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        m = re.match(r"^\s*-\s*([A-Za-z0-9 -]+):\s*(.+?)\s*$", line)
        if m and m.group(1) not in out:
            out[m.group(1).strip()] = m.group(2).strip().strip("*`").strip()
    return out


def fallback_book(book_id: str, fields: Mapping[str, str], domain: str | None) -> Book:
    """A catalog entry built from the release's MANIFEST.md, for a book the catalog lacks."""
    domain = domain or _KNOWN_DOMAINS.get(book_id)
    if not domain:
        raise SearchTomeError(
            f"book {book_id!r} is neither in the packaged catalog nor a known release; "
            "give its domain with --domain"
        )
    authors = tuple(a.strip() for a in re.split(r",| and ", fields.get("Authors", "")) if a.strip())
    license_ = fields.get("License", "")
    source = fields.get("Source", "")
    return Book(
        book_id=book_id,
        domain=domain,
        title=fields.get("Title", book_id),
        authors=authors,
        publisher=fields.get("Publisher", ""),
        landing_url=source,
        sha256=fields.get("SHA-256") or None,
        license=license_,
        license_url=_CC_URLS.get(license_, ""),
        notes="metadata from the reproduction's data/MANIFEST.md (book not in the catalog)",
    )


def book_metadata(
    book_id: str, fields: Mapping[str, str], domain: str | None, warnings: list[str]
) -> Book:
    """The catalog's entry for the book (or one from MANIFEST.md); disagreements are warned."""
    book: Book | None = None
    try:
        from searchtome.ingest.catalog import (
            load_catalog,  # written by the catalog owner; optional here
        )
    except ImportError:
        log.info("no packaged catalog yet; using the release's MANIFEST.md for %s", book_id)
    else:
        catalog = load_catalog()
        if book_id in catalog.ids():
            book = catalog.get(book_id)
    if book is None:
        book = fallback_book(book_id, fields, domain)
    elif domain and domain != book.domain:
        raise SearchTomeError(
            f"--domain {domain!r} contradicts the catalog, which files {book_id!r} under "
            f"{book.domain!r}"
        )
    release_sha = fields.get("SHA-256")
    if release_sha and book.sha256 and release_sha != book.sha256:
        warnings.append(
            f"the release was built from a PDF with SHA-256 {release_sha}, "
            f"the catalog pins {book.sha256}"
        )
    return book
