"""The books of a build and their extraction: where the PDFs come from (a catalog, fetched and
verified, or a folder of PDFs with optional metadata) and the extraction stage's cache.

Extractions are cached under ``$SEARCHTOME_HOME/builds/extract/<book>-<key>/``, keyed by the
PDF's SHA-256, the book id, the ToC options (the outline depth among them, when one is set) and
the searchtome/PyMuPDF versions.

A catalog book is cut at the outline depth whose leaves are the paper's: the catalog entry's
``leaf_depth``, else the one ``fetch`` recorded in the lock file when it first checked the PDF
(:func:`searchtome.ingest.depth.leaf_depth_for`). Books of a ``--pdf-dir`` build keep their
whole outline.
"""

from __future__ import annotations

import logging
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.dataset.manifest import CatalogCollection, PdfDirCollection
from searchtome.errors import SearchTomeError, unknown_name
from searchtome.generate.options import BuildOptions
from searchtome.io import atomic_dir, commit_dir, sha256_file, stable_hash
from searchtome.records import Book
from searchtome.settings import cache_dir, progress
from searchtome.version import __version__

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BookSource:
    """One book of the build: its catalog record, the verified PDF and the PDF's SHA-256."""

    book: Book
    pdf: Path
    sha256: str
    leaf_depth: int | None = None  # cut the outline at this depth; None: the whole outline


def _pdf_dir_metadata(path: Path) -> dict[str, dict[str, Any]]:
    """A small TOML file of ``[[books]]`` entries (catalog field names, any domain) for
    ``--pdf-dir`` builds; a full catalog file also works."""
    from searchtome.ingest.catalog import RESTRICTIONS

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SearchTomeError(f"{path}: catalog file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SearchTomeError(f"{path}: not valid TOML ({exc})") from None
    entries = data.get("books", [])
    if not isinstance(entries, list):
        raise SearchTomeError(f"{path}: 'books' must be a list of [[books]] tables")
    fields = set(Book.__dataclass_fields__)
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("book_id"), str):
            raise SearchTomeError(f"{path}: books entry {i} needs a book_id string")
        unknown = set(entry) - fields
        if unknown:
            raise SearchTomeError(
                f"{path}: books entry {i} ({entry['book_id']!r}) has unknown field(s) "
                f"{', '.join(sorted(unknown))}; known: {', '.join(sorted(fields))}"
            )
        for r in entry.get("restrictions", []):
            if r not in RESTRICTIONS:
                raise SearchTomeError(
                    f"{path}: books entry {i}: {unknown_name('restriction', r, RESTRICTIONS)}"
                )
        out[entry["book_id"]] = entry
    return out


@dataclass(frozen=True)
class CollectionInfo:
    """Where a build's books came from, as its manifest records it."""

    name: str | None
    description: str | None
    record: CatalogCollection | PdfDirCollection
    fetched: str = ""  # how the PDFs were obtained (the build summary's fetch stage)


def books_from_pdf_dir(opts: BuildOptions) -> tuple[list[BookSource], CollectionInfo]:
    """Every PDF of ``--pdf-dir`` (book id from the file name) and the collection's manifest info."""
    from searchtome.ingest.toc import default_book_id

    folder = opts.pdf_dir
    assert folder is not None
    if not folder.is_dir():
        raise SearchTomeError(f"{folder}: --pdf-dir must be an existing folder of PDF files")
    pdfs = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
    if not pdfs:
        raise SearchTomeError(f"{folder}: no .pdf files in this folder")
    meta = _pdf_dir_metadata(opts.catalog) if opts.catalog else {}
    seen: dict[str, Path] = {}
    sources = []
    for pdf in pdfs:
        book_id = default_book_id(pdf)
        if book_id in seen:
            raise SearchTomeError(
                f"{pdf}: gives book id {book_id!r}, like {seen[book_id].name}; rename one of them"
            )
        seen[book_id] = pdf
        entry = dict(meta.get(book_id, {}))
        entry.setdefault("domain", "unknown")
        entry.setdefault("title", pdf.stem)
        entry["book_id"] = book_id
        digest = sha256_file(pdf)
        entry["sha256"] = digest
        entry["size"] = pdf.stat().st_size
        book = Book.from_dict(entry)
        sources.append(BookSource(book, pdf, digest))
    stray = sorted(set(meta) - set(seen))
    if stray:
        raise SearchTomeError(
            f"{opts.catalog}: entries {', '.join(stray)} match no PDF in {folder} "
            f"(book ids come from file names: {', '.join(sorted(seen))})"
        )
    if opts.books:
        missing = [b for b in opts.books if b not in seen]
        if missing:
            raise unknown_name("book", missing[0], seen)
        sources = [s for s in sources if s.book.book_id in opts.books]
    info = CollectionInfo(
        name=opts.name or f"searchtome-{folder.resolve().name}",
        description=None,
        record=PdfDirCollection(
            files={s.pdf.name: s.sha256 for s in sources},
            metadata_sha256=stable_hash(meta) if meta else None,
        ),
    )
    return sources, info


def books_from_catalog(opts: BuildOptions) -> tuple[list[BookSource], CollectionInfo]:
    """The catalog's books, fetched and verified, and the collection's manifest info."""
    from searchtome.ingest.catalog import catalog_hash, load_catalog
    from searchtome.ingest.depth import leaf_depth_for
    from searchtome.ingest.fetch import fetch_books
    from searchtome.ingest.lock import Lock

    catalog = load_catalog(opts.catalog)
    ids = list(opts.books) if opts.books else None
    result = fetch_books(catalog, ids, opts.source_dir)
    result.raise_for_failures()
    lock = Lock.load(result.lock_path, catalog)
    sources = []
    for book_id, path in result.paths.items():
        book = catalog.get(book_id)
        depth = leaf_depth_for(book, lock)
        sources.append(BookSource(book, Path(path), sha256_file(path), depth))
    sources.sort(key=lambda s: s.book.book_id)
    fetched = Counter(result.sources.values())
    info = CollectionInfo(
        name=opts.name or catalog.name,
        description=catalog.description or None,
        record=CatalogCollection(
            catalog=catalog.name,
            catalog_version=catalog.version,
            catalog_sha256=catalog_hash(catalog),
            books=tuple(sorted(s.book.book_id for s in sources)),
        ),
        fetched=", ".join(f"{n} from {k}" for k, n in sorted(fetched.items())),
    )
    return sources, info


# ----------------------------------------------------------------------------------------------
# Extraction (content-addressed stage cache)


def extract_key(src: BookSource, infer_toc: bool) -> str:
    """The cache key of one book's extraction: every input that can change it."""
    import pymupdf

    from searchtome.ingest.extract import FORMAT

    inputs: dict[str, Any] = {
        "pdf": src.sha256,
        "book_id": src.book.book_id,
        "infer_toc": infer_toc,
        "format": FORMAT,
        "searchtome": __version__,
        "pymupdf": pymupdf.VersionBind,
    }
    if src.leaf_depth is not None:
        # Only when set, so the keys of uncut books (and their cached extractions) stay valid.
        inputs["leaf_depth"] = src.leaf_depth
    return stable_hash(inputs)


def extract_all(sources: Sequence[BookSource], infer_toc: bool) -> tuple[dict[str, Any], int]:
    """Every book's extraction by book id, and how many came from the cache."""
    from searchtome.ingest.extract import extract_book, read_extraction, write_extraction

    root = cache_dir("builds", "extract")
    out: dict[str, Any] = {}
    reused = 0
    for src in progress(sources, desc="extract", unit="book"):
        folder = root / f"{src.book.book_id}-{extract_key(src, infer_toc)[:16]}"
        if folder.is_dir():
            try:
                out[src.book.book_id] = read_extraction(folder)
                reused += 1
                continue
            except SearchTomeError as exc:
                log.warning("cached extraction %s unusable (%s); extracting again", folder, exc)
        log.info("extracting %s from %s", src.book.book_id, src.pdf)
        extraction = extract_book(
            src.pdf, book_id=src.book.book_id, infer_toc=infer_toc, leaf_depth=src.leaf_depth
        )
        if not extraction.leaves:
            raise SearchTomeError(
                f"{src.pdf}: no ToC leaves found (the PDF has no usable outline); "
                "pass --infer-toc to infer headings from the page layout"
            )
        tmp = atomic_dir(folder)
        write_extraction(extraction, tmp)
        commit_dir(tmp, folder)
        out[src.book.book_id] = extraction
    return out, reused
