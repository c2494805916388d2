"""The records every part of searchtome passes around.

Small frozen dataclasses, one per thing. Identifier rules (relied on everywhere):

* ``book_id`` is a slug (``[a-z0-9][a-z0-9-]*``), never containing ``/``.
* ToC node and leaf ids are ``{book_id}/{ordinal path}``, e.g. ``whole-child/2.3.1``: always one
  ``/`` followed by dot-separated 1-based positions among siblings.
* Paragraph ids are ``{leaf_id}#p{n}`` and generation-unit ids ``{leaf_id}#u{n}`` (1-based).
* Query ids never contain ``/``, so a query id can never equal a leaf id (BEIR silently drops
  results whose id equals the query id).

Pages are 1-based physical page numbers, as PyMuPDF's ``get_toc()`` reports them; ``None`` when
an outline entry points nowhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Self

# The run records live on their own so that scoring a run imports no other record class
# (each frozen dataclass costs about 1 ms of start-up); every other import keeps this name.
from searchtome.runs import Run as Run
from searchtome.runs import Submission as Submission

SPLITS: tuple[str, ...] = ("train", "dev", "test")
# What kind of retriever a system is: a leaderboard column (run_info.system_type).
SYSTEM_TYPES: tuple[str, ...] = ("lexical", "dense", "hybrid", "generative", "zero-shot")
# The shipped baselines' types: the runner records them, and the leaderboard reads them for runs
# written before run_info.system_type existed (from run_info.baseline). A new baseline adds a line.
BASELINE_TYPES: dict[str, str] = {
    "bm25": "lexical",
    "bm25-plain": "lexical",
    "bm25-paper": "lexical",
    "dpr": "dense",
    "dpr-paper": "dense",
    "hybrid": "hybrid",
    "navtree": "hybrid",
    "toc-navtree": "hybrid",
    "finetune": "dense",
    "finetune-hybrid": "hybrid",
    "rerank": "hybrid",
    "stair": "generative",
    "stair-rerank": "hybrid",  # a first stage's ranks fused with STAIR's scores
    "dsi": "generative",
    "dsi-constrained": "generative",
    "zeroshot-llm": "zero-shot",
}
DOMAINS: tuple[str, ...] = (
    "Education",
    "Finance",
    "Law",
    "Medicine",
    "Natural Sciences",
    "Social Sciences",
)

_SLUG_RE = re.compile(r"[^a-z0-9]+")
BOOK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def slugify(name: str) -> str:
    """Book id from a file name or title: lowercase ASCII words joined by ``-``."""
    import unicodedata

    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = _SLUG_RE.sub("-", ascii_name.lower()).strip("-")
    return slug or "book"


def node_id(book_id: str, ordinal: Sequence[int]) -> str:
    """``whole-child`` + ``(2, 3, 1)`` → ``whole-child/2.3.1``."""
    return f"{book_id}/{'.'.join(str(i) for i in ordinal)}"


def book_of(item_id: str) -> str:
    """The book id inside a node, leaf, paragraph or unit id."""
    return item_id.split("/", 1)[0]


class _Record:
    """Dict conversion shared by the records (tuples become lists for JSON and back)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        kwargs: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue
            value = data[f.name]
            if isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        return cls(**kwargs)


@dataclass(frozen=True)
class Book(_Record):
    """One catalog entry: what the book is, where its PDF comes from, and on what terms."""

    book_id: str
    domain: str
    title: str
    authors: tuple[str, ...] = ()
    edition: str = ""
    publisher: str = ""
    landing_url: str = ""
    pdf_urls: tuple[str, ...] = ()
    sha256: str | None = None
    size: int | None = None
    license: str = ""
    license_url: str = ""
    # Machine-readable restrictions, e.g. "no-llm-training", "no-redistribution".
    restrictions: tuple[str, ...] = ()
    notes: str = ""

    def restricted(self, restriction: str) -> bool:
        return restriction in self.restrictions


@dataclass(frozen=True)
class Catalog(_Record):
    """A named, versioned set of books."""

    name: str
    version: str
    books: tuple[Book, ...]
    description: str = ""

    def get(self, book_id: str) -> Book:
        for book in self.books:
            if book.book_id == book_id:
                return book
        from searchtome.errors import unknown_name

        raise unknown_name("book", book_id, [b.book_id for b in self.books])

    def ids(self) -> list[str]:
        return [b.book_id for b in self.books]

    def by_domain(self) -> dict[str, list[Book]]:
        out: dict[str, list[Book]] = {}
        for book in self.books:
            out.setdefault(book.domain, []).append(book)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "books": [b.to_dict() for b in self.books],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Catalog:
        return cls(
            name=data["name"],
            version=str(data["version"]),
            description=data.get("description", ""),
            books=tuple(Book.from_dict(b) for b in data["books"]),
        )


@dataclass(frozen=True)
class TocNode(_Record):
    """One outline entry, leaf or not.

    ``text`` holds a non-leaf node's own introduction (the text between its heading and its first
    child's heading); a leaf's section text lives in its :class:`Leaf`, so it is empty here.
    ``y`` is the heading's vertical position on ``page`` in PDF points (top = 0) when known.
    """

    node_id: str
    book_id: str
    title: str
    level: int
    page: int | None
    parent_id: str | None
    is_leaf: bool
    path: tuple[str, ...]
    y: float | None = None
    text: str = ""

    @property
    def ordinal(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.node_id.split("/", 1)[1].split("."))

    def to_json(self) -> dict[str, Any]:
        """The shape ``searchtome toc --json`` prints."""
        return {
            "id": self.node_id,
            "title": self.title,
            "level": self.level,
            "page": self.page,
            "parent": self.parent_id,
            "is_leaf": self.is_leaf,
            "path": list(self.path),
        }


@dataclass(frozen=True)
class Leaf(_Record):
    """A retrieval target: a ToC leaf and the text of its section."""

    leaf_id: str
    book_id: str
    path: tuple[str, ...]
    title: str
    text: str
    page_start: int | None
    page_end: int | None


@dataclass(frozen=True)
class Paragraph(_Record):
    paragraph_id: str
    leaf_id: str
    text: str
    page: int | None


@dataclass(frozen=True)
class Unit(_Record):
    """A generation unit: consecutive paragraphs of one leaf that questions are written from."""

    unit_id: str
    leaf_id: str
    book_id: str
    paragraph_ids: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Query(_Record):
    """A question about one book, with its gold leaf and split."""

    query_id: str
    book_id: str
    text: str
    leaf_id: str
    split: str
    unit_id: str | None = None
    model_generated: bool = True


@dataclass(frozen=True)
class Qrel(_Record):
    query_id: str
    leaf_id: str
    score: int = 1
