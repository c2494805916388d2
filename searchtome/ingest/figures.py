"""The paper's figures as checks: does a PDF have the pages and ToC leaves the paper counts?

A catalog entry of SearchTome v2 carries its row of the paper's Table 1. A PDF whose page count
and leaf count (at the outline depth that comes closest, see :mod:`searchtome.ingest.depth`)
equal the paper's is almost certainly the paper's edition; one within a small tolerance is most
likely the same book exported on another day (Pressbooks regenerates its PDFs, and *The Whole
Child*'s pinned file has 183 pages where the paper counts 182); anything further off is another
edition or another book.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.ingest.catalog import PaperFigures, book_facts
from searchtome.ingest.depth import choose_depth, cut_tree
from searchtome.records import Book

# What each verdict means, in the words ``fetch --verify`` prints.
VERDICTS: dict[str, str] = {
    "match": "pages and leaves equal the paper's",
    "close": "pages and leaves within the tolerance of the paper's: most likely the same book "
    "(another export of the same edition)",
    "differs": "pages or leaves differ from the paper's: another edition or another book",
    "unchecked": "the catalog gives no paper figures for this book",
    "unreadable": "the PDF or its outline could not be read",
    "missing": "no PDF: not fetched",
}
NOT_FETCHED = "not fetched"


def within_tolerance(found: int, expected: int) -> bool:
    """Close enough to count as the same book: 2 apart, or 1 % of larger counts."""
    return abs(found - expected) <= max(2, round(expected * 0.01))


@dataclass(frozen=True)
class FigureCheck:
    """What one book's PDF holds, against the paper's figures for it."""

    book_id: str
    paper: PaperFigures | None
    pages: int | None = None
    outline_leaves: int | None = None  # leaves of the full outline
    leaves: int | None = None  # leaves at ``leaf_depth``
    leaf_depth: int | None = None  # None: the full outline
    problem: str = ""  # why the PDF could not be checked ("" when it could)

    @property
    def verdict(self) -> str:
        """One of :data:`VERDICTS`."""
        if self.problem:
            return "missing" if self.problem == NOT_FETCHED else "unreadable"
        if self.paper is None:
            return "unchecked"
        if self.pages == self.paper.pages and self.leaves == self.paper.leaves:
            return "match"
        if (
            self.pages is not None
            and self.leaves is not None
            and within_tolerance(self.pages, self.paper.pages)
            and within_tolerance(self.leaves, self.paper.leaves)
        ):
            return "close"
        return "differs"

    @property
    def ok(self) -> bool:
        return self.verdict in ("match", "close")

    def found(self) -> dict[str, Any]:
        """What the lock file records for the checked file."""
        return {
            "pages": self.pages,
            "outline_leaves": self.outline_leaves,
            "leaves": self.leaves,
            "leaf_depth": self.leaf_depth,
        }

    def summary(self) -> str:
        """One line: the counts against the paper's, and the verdict."""
        if self.problem:
            return f"{self.book_id}: {self.problem}"
        depth = "the full outline" if self.leaf_depth is None else f"depth {self.leaf_depth}"
        pages = _against(self.pages, self.paper.pages if self.paper else None)
        leaves = _against(self.leaves, self.paper.leaves if self.paper else None)
        return (
            f"{self.book_id}: pages {pages}, leaves {leaves} at {depth}: "
            f"{self.verdict} ({VERDICTS[self.verdict]})"
        )


def _against(found: int | None, expected: int | None) -> str:
    if found is None:
        return "?"
    if expected is None or found == expected:
        return f"{found}" + ("" if expected is None else " (as the paper)")
    return f"{found} (paper {expected}, {found - expected:+d})"


def missing(book: Book) -> FigureCheck:
    """The check of a book whose PDF is not available."""
    return FigureCheck(book.book_id, book_facts(book).paper, problem=NOT_FETCHED)


def check_pdf(book: Book, path: Path) -> FigureCheck:
    """Count the pages and outline leaves of ``book``'s PDF and compare them with the paper's.

    The leaf count is taken at the catalog entry's ``leaf_depth`` when it gives one, else at the
    depth whose count comes closest to the paper's (the full outline when it matches).
    """
    from searchtome.ingest.pdf import opened
    from searchtome.ingest.toc import toc_from_doc

    facts = book_facts(book)
    try:
        with opened(path) as doc:
            pages = doc.page_count
            tree, _ = toc_from_doc(doc, path, book_id=book.book_id, infer=False)
    except SearchTomeError as exc:
        return FigureCheck(book.book_id, facts.paper, problem=str(exc))
    outline_leaves = len(tree.leaves())
    depth = facts.leaf_depth
    if depth is None and facts.paper is not None:
        depth = choose_depth(tree.nodes, facts.paper.leaves).depth
    leaves = len(cut_tree(tree, depth).leaves())
    return FigureCheck(book.book_id, facts.paper, pages, outline_leaves, leaves, depth)


def leaf_count_problem(book: Book, leaves: int) -> str | None:
    """For the build, after extraction: why ``leaves`` is not the paper's count (None: it is)."""
    paper = book_facts(book).paper
    if paper is None or leaves == paper.leaves:
        return None
    how = "within tolerance of" if within_tolerance(leaves, paper.leaves) else "unlike"
    return (
        f"{book.book_id}: {leaves} leaves extracted, {how} the paper's {paper.leaves}; "
        "another edition, or an outline cut at another depth (see searchtome fetch --verify)"
    )
