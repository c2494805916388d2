"""The book catalog: which PDFs make up a SearchTome release, where they come from, on what terms.

A catalog is a TOML file (format in ``docs/catalog.md``); the package ships SearchTome v1
(``searchtome/data/catalog-v1.toml``, 18 books, 3 per domain). Users point ``--catalog`` at their
own file to swap a book or build a different collection. Loading validates everything up front,
so a typo in entry 14 fails in one line naming the file, the entry and the field, before any
download starts.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import PathLike, stable_hash
from searchtome.records import BOOK_ID_RE, DOMAINS, Book, Catalog

DEFAULT_CATALOG = "catalog-v1.toml"

# What each machine-readable restriction means; the builder and the publisher act on them.
RESTRICTIONS: dict[str, str] = {
    "no-llm-training": "the publisher forbids using the book to train large language models "
    "without permission; fine-tuning baselines refuse it unless explicitly overridden",
    "no-redistribution": "text derived from the book (sections, paragraphs, questions) may not "
    "be redistributed; publishing keeps ids and labels only",
    "non-commercial": "licence forbids commercial use (CC BY-NC*): derived data inherits that",
    "share-alike": "adaptations must carry the same licence (CC *-SA): the dataset card says so",
    "no-derivatives": "licence forbids adaptations (CC *-ND): derived text may not be published",
}

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_URL_RE = re.compile(r"^(https?|file)://\S+$")
_CATALOG_KEYS = ("name", "version", "description", "books_per_domain", "books")
_BOOK_KEYS = tuple(Book.__dataclass_fields__)
_REQUIRED = ("book_id", "domain", "title")


def default_catalog_path() -> Path:
    """The packaged SearchTome v1 catalog file."""
    return Path(str(resources.files("searchtome") / "data" / DEFAULT_CATALOG))


def load_catalog(path: PathLike | None = None) -> Catalog:
    """Read and validate a catalog file (``None``: the packaged v1 catalog)."""
    path = Path(path) if path is not None else default_catalog_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SearchTomeError(
            f"{path}: catalog file not found; pass --catalog with an existing TOML file "
            "or omit it to use the packaged SearchTome v1 catalog"
        ) from None
    except IsADirectoryError:
        raise SearchTomeError(f"{path}: is a folder, not a catalog TOML file") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SearchTomeError(f"{path}: not UTF-8 text; a catalog is a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SearchTomeError(f"{path}: not valid TOML ({exc})") from None
    return catalog_from_dict(data, source=str(path))


def catalog_from_dict(data: dict[str, Any], source: str = "<catalog>") -> Catalog:
    """Validate the parsed TOML of a catalog and build the :class:`Catalog`."""

    def fail(message: str) -> SearchTomeError:
        return SearchTomeError(f"{source}: {message}")

    for key in data:
        if key not in _CATALOG_KEYS:
            raise fail(_unknown_key("top-level key", key, _CATALOG_KEYS))
    for key in ("name", "version"):
        if key not in data:
            raise fail(f'missing top-level {key!r} (e.g. {key} = "my-books")')
    name, version = data["name"], data["version"]
    if not isinstance(name, str) or not name.strip():
        raise fail("'name' must be a non-empty string")
    if not isinstance(version, str | int) or isinstance(version, bool) or str(version) == "":
        raise fail("'version' must be a string such as \"1\"")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("'description' must be a string")
    entries = data.get("books")
    if not isinstance(entries, list) or not entries:
        raise fail("no books: add at least one [[books]] table")

    books: list[Book] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries, 1):
        book = _book_from_entry(entry, f"{source}: books entry {index}")
        if book.book_id in seen:
            raise fail(
                f"books entry {index}: book_id {book.book_id!r} already used by entry "
                f"{seen[book.book_id]}; book ids must be unique"
            )
        seen[book.book_id] = index
        books.append(book)

    per_domain = data.get("books_per_domain")
    if per_domain is not None:
        if not isinstance(per_domain, int) or isinstance(per_domain, bool) or per_domain < 1:
            raise fail("'books_per_domain' must be a positive integer")
        counts = Counter(b.domain for b in books)
        wrong = [f"{d}: {counts.get(d, 0)}" for d in DOMAINS if counts.get(d, 0) != per_domain]
        if wrong:
            raise fail(
                f"books_per_domain = {per_domain}, but the catalog has {'; '.join(wrong)}; "
                "fix the entries or remove books_per_domain to allow any mix"
            )
    return Catalog(
        name=name.strip(), version=str(version), books=tuple(books), description=description
    )


def _unknown_key(kind: str, key: str, known: tuple[str, ...]) -> str:
    return str(unknown_name(kind, key, known))


def _book_from_entry(entry: Any, where: str) -> Book:
    if not isinstance(entry, dict):
        raise SearchTomeError(f"{where}: must be a table ([[books]]), not {type(entry).__name__}")
    book_id = entry.get("book_id")
    if isinstance(book_id, str):
        where = f"{where} ({book_id!r})"
    for key in entry:
        if key not in _BOOK_KEYS:
            raise SearchTomeError(f"{where}: {_unknown_key('field', key, _BOOK_KEYS)}")
    for key in _REQUIRED:
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise SearchTomeError(f"{where}: field {key!r} is required and must be a string")

    def bad(field: str, what: str) -> SearchTomeError:
        return SearchTomeError(f"{where}: field {field!r} {what}")

    if not BOOK_ID_RE.match(book_id):
        raise bad(
            "book_id", "must be a slug of lowercase letters, digits and '-' (e.g. 'biology-2e')"
        )
    if entry["domain"] not in DOMAINS:
        raise SearchTomeError(f"{where}: {unknown_name('domain', entry['domain'], DOMAINS)}")
    for key in ("edition", "publisher", "landing_url", "license", "license_url", "notes"):
        if key in entry and not isinstance(entry[key], str):
            raise bad(key, "must be a string")
    for key in ("authors", "pdf_urls", "restrictions"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad(key, "must be a list of non-empty strings")
    for url in entry.get("pdf_urls", []):
        if not _URL_RE.match(url):
            raise bad("pdf_urls", f"has {url!r}, which is not an http(s):// or file:// URL")
    for restriction in entry.get("restrictions", []):
        if restriction not in RESTRICTIONS:
            raise SearchTomeError(
                f"{where}: {unknown_name('restriction', restriction, RESTRICTIONS)}"
            )
    sha = entry.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not _SHA256_RE.match(sha)):
        raise bad("sha256", "must be 64 lowercase hex digits (or be left out while unpinned)")
    size = entry.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
        raise bad("size", "must be a positive number of bytes (or be left out)")
    return Book.from_dict(entry)


def catalog_hash(catalog: Catalog) -> str:
    """SHA-256 of the catalog's canonical content: same books and terms, same hash.

    Formatting, comments and key order of the TOML file do not matter; any change to a field
    (a new pin, a swapped URL, a licence note) does, so build caches keyed on it stay honest.
    """
    return stable_hash(catalog.to_dict())


def catalog_to_toml(catalog: Catalog, books_per_domain: int | None = None) -> str:
    """Render a catalog back to TOML (used to write edited or pinned catalogs)."""
    lines = [
        f"name = {_toml_str(catalog.name)}",
        f"version = {_toml_str(catalog.version)}",
    ]
    if catalog.description:
        lines.append(f"description = {_toml_str(catalog.description)}")
    if books_per_domain is not None:
        lines.append(f"books_per_domain = {books_per_domain}")
    for book in catalog.books:
        lines += ["", "[[books]]"]
        for key, value in book.to_dict().items():
            if value is None or value in ("", ()):
                continue
            if isinstance(value, tuple | list):
                lines.append(f"{key} = [{', '.join(_toml_str(v) for v in value)}]")
            elif isinstance(value, int):
                lines.append(f"{key} = {value}")
            else:
                lines.append(f"{key} = {_toml_str(value)}")
    return "\n".join(lines) + "\n"


def _toml_str(value: str) -> str:
    # JSON string escapes are a subset of TOML basic-string escapes.
    import json

    return json.dumps(value, ensure_ascii=False)
