"""The book catalog: which PDFs make up a SearchTome release, where they come from, on what terms.

A catalog is a TOML file (format in ``docs/catalog.md``). The package ships two: ``v2`` (the
default, ``searchtome/data/catalog-v2.toml``), the 18 books of the paper's Table 1 with the
paper's figures per book, and ``v1`` (``catalog-v1.toml``), the list reconstructed before the
paper's book list was known. Users point ``--catalog`` at ``v1``, ``v2`` or their own file.
Loading validates everything up front, so a typo in entry 14 fails in one line naming the file,
the entry and the field, before any download starts.

Besides the fields of :class:`~searchtome.records.Book`, an entry may carry *facts* about the
book: the paper's figures for it, how sure the entry is (``status``), where each claim comes
from (``evidence``), its Open Textbook Library page, and the outline depth whose leaves are the
paper's. ``Book`` is the record every stage passes around and its fields are part of the dataset
layout, so these facts live beside it: :func:`book_facts` returns them for a loaded book.
"""

from __future__ import annotations

import re
import tomllib
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import PathLike, stable_hash
from searchtome.records import BOOK_ID_RE, DOMAINS, Book, Catalog

# Packaged catalogs by the short name ``--catalog`` accepts; the first is the default.
PACKAGED_CATALOGS: dict[str, str] = {"v2": "catalog-v2.toml", "v1": "catalog-v1.toml"}
DEFAULT_CATALOG = PACKAGED_CATALOGS["v2"]

# How sure a catalog entry is; ``fetch`` tells the user what each one means for them.
STATUSES: dict[str, str] = {
    "pinned": "the PDF is pinned by a SHA-256 taken from a download (see its evidence); "
    "fetch accepts only that file",
    "lead": "the book is identified and its PDF URL comes from public material, but nothing was "
    "downloaded to confirm it: the first download is pinned and checked against the paper's "
    "pages and leaves",
    "edition-open": "the book is identified, but which edition or version the paper used is "
    "open: the URL may serve another one, so compare the download (or a PDF you supply with "
    "--source-dir) with the paper's pages and leaves (searchtome fetch --verify)",
    "source-unknown": "the book is identified, but no PDF URL was found: obtain the PDF and "
    "supply it with --source-dir; fetch checks it against the paper's pages and leaves",
    "unidentified": "the paper's book is not identified; the entry records the paper's figures "
    "and any lead: supply the PDF you believe is the paper's with --source-dir and check it "
    "with searchtome fetch --verify",
}

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
_FACT_KEYS = ("status", "paper", "evidence", "otl_url", "leaf_depth")
_PAPER_KEYS = ("pages", "leaves", "test", "train", "dev")
_REQUIRED = ("book_id", "domain", "title")


@dataclass(frozen=True)
class PaperFigures:
    """A book's row of the paper's Table 1: pages, ToC leaves and questions per split."""

    pages: int
    leaves: int
    test: int
    train: int
    dev: int

    @property
    def questions(self) -> int:
        return self.test + self.train + self.dev


@dataclass(frozen=True)
class BookFacts:
    """What a catalog entry says about its book beyond the :class:`Book` record."""

    status: str = ""  # a key of STATUSES; "" when the catalog does not say
    paper: PaperFigures | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)  # claim (a field) -> its source
    otl_url: str = ""  # the book's Open Textbook Library page
    leaf_depth: int | None = None  # outline depth whose leaves are the paper's; None: all

    def to_dict(self) -> dict[str, Any]:
        """The entry keys these facts came from (empty ones left out)."""
        out: dict[str, Any] = {}
        if self.status:
            out["status"] = self.status
        if self.otl_url:
            out["otl_url"] = self.otl_url
        if self.leaf_depth is not None:
            out["leaf_depth"] = self.leaf_depth
        if self.paper is not None:
            out["paper"] = asdict(self.paper)
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out


# Facts of every loaded book, keyed by the identity of its Book object: two catalogs may hold
# equal Book records with different facts (a user's copy that adds a leaf_depth), so equality
# cannot be the key. An entry goes when its book does.
_FACTS: dict[int, tuple[weakref.ref[Book], BookFacts]] = {}


def _remember(book: Book, facts: BookFacts) -> None:
    key = id(book)

    def forget(ref: weakref.ref[Book]) -> None:
        if _FACTS.get(key, (None,))[0] is ref:
            del _FACTS[key]

    _FACTS[key] = (weakref.ref(book, forget), facts)


def book_facts(book: Book) -> BookFacts:
    """The facts the catalog that ``book`` was loaded from gives for it (empty if none)."""
    found = _FACTS.get(id(book))
    return found[1] if found is not None and found[0]() is book else BookFacts()


def replace_book(book: Book, **changes: Any) -> Book:
    """``dataclasses.replace`` for a catalog book that keeps the book's facts."""
    new = replace(book, **changes)
    _remember(new, book_facts(book))
    return new


def default_catalog_path() -> Path:
    """The packaged default catalog file (SearchTome v2, the paper's 18 books)."""
    return packaged_catalog_path("v2")


def packaged_catalog_path(name: str) -> Path:
    """The file of a packaged catalog by its short name (``v1``, ``v2``)."""
    if name not in PACKAGED_CATALOGS:
        raise unknown_name("packaged catalog", name, PACKAGED_CATALOGS)
    return Path(str(resources.files("searchtome") / "data" / PACKAGED_CATALOGS[name]))


def resolve_catalog(path: PathLike | None) -> Path:
    """``None`` → the default catalog; ``v1``/``v2`` → that packaged file; else the path."""
    if path is None:
        return default_catalog_path()
    if str(path) in PACKAGED_CATALOGS:
        return packaged_catalog_path(str(path))
    return Path(path)


def load_catalog(path: PathLike | None = None) -> Catalog:
    """Read and validate a catalog (``None``: the packaged default; ``"v1"``/``"v2"`` by name)."""
    path = resolve_catalog(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SearchTomeError(
            f"{path}: catalog file not found; pass --catalog with an existing TOML file or a "
            f"packaged catalog ({', '.join(PACKAGED_CATALOGS)}), or omit it to use the packaged "
            "SearchTome v2 catalog"
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
        book, facts = _book_from_entry(entry, f"{source}: books entry {index}")
        _remember(book, facts)
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


def _book_from_entry(entry: Any, where: str) -> tuple[Book, BookFacts]:
    if not isinstance(entry, dict):
        raise SearchTomeError(f"{where}: must be a table ([[books]]), not {type(entry).__name__}")
    book_id = entry.get("book_id")
    if isinstance(book_id, str):
        where = f"{where} ({book_id!r})"
    for key in entry:
        if key not in _BOOK_KEYS + _FACT_KEYS:
            raise SearchTomeError(f"{where}: {_unknown_key('field', key, _BOOK_KEYS + _FACT_KEYS)}")
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
    book = Book.from_dict({k: v for k, v in entry.items() if k in _BOOK_KEYS})
    return book, _facts_from_entry(entry, where)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _facts_from_entry(entry: dict[str, Any], where: str) -> BookFacts:
    def bad(field: str, what: str) -> SearchTomeError:
        return SearchTomeError(f"{where}: field {field!r} {what}")

    status = entry.get("status", "")
    if status and status not in STATUSES:
        raise SearchTomeError(f"{where}: {unknown_name('status', str(status), STATUSES)}")
    otl_url = entry.get("otl_url", "")
    if not isinstance(otl_url, str) or (otl_url and not _URL_RE.match(otl_url)):
        raise bad("otl_url", "must be an http(s):// URL")
    depth = entry.get("leaf_depth")
    if depth is not None and not _positive_int(depth):
        raise bad("leaf_depth", "must be a positive outline depth (1 = top level)")
    paper = entry.get("paper")
    figures = None
    if paper is not None:
        if not isinstance(paper, dict) or set(paper) != set(_PAPER_KEYS):
            raise bad("paper", f"must be a table with exactly {', '.join(_PAPER_KEYS)}")
        if not all(_positive_int(paper[k]) for k in _PAPER_KEYS):
            raise bad("paper", "must hold positive whole numbers")
        figures = PaperFigures(**{k: paper[k] for k in _PAPER_KEYS})
    evidence = entry.get("evidence", {})
    if not isinstance(evidence, dict) or not all(
        isinstance(v, str) and v.strip() for v in evidence.values()
    ):
        raise bad("evidence", 'must be a table of claim = "where it comes from"')
    for claim in evidence:
        if claim not in _BOOK_KEYS + _FACT_KEYS:
            raise SearchTomeError(
                f"{where}: evidence for an {_unknown_key('field', claim, _BOOK_KEYS + _FACT_KEYS)}"
            )
    return BookFacts(str(status), figures, dict(evidence), otl_url, depth)


def catalog_hash(catalog: Catalog) -> str:
    """SHA-256 of the catalog's canonical content: same books and terms, same hash.

    Formatting, comments and key order of the TOML file do not matter; any change to a field
    (a new pin, a swapped URL, a licence note) does, so build caches keyed on it stay honest.
    """
    data = catalog.to_dict()
    facts = {b.book_id: book_facts(b).to_dict() for b in catalog.books}
    if any(facts.values()):
        # Only catalogs that carry facts hash them, so a catalog without any (a user's own, the
        # sample) keeps the hash its datasets' manifests record.
        data["facts"] = facts
    return stable_hash(data)


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
        for key, value in book_facts(book).to_dict().items():
            if isinstance(value, dict):
                pairs = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {pairs} }}")
            else:
                lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: str | int) -> str:
    return str(value) if isinstance(value, int) else _toml_str(value)


def _toml_str(value: str) -> str:
    # JSON string escapes are a subset of TOML basic-string escapes.
    import json

    return json.dumps(value, ensure_ascii=False)
