"""The outline depth whose leaves are a book's retrieval targets.

A PDF outline can be deeper than the table of contents a benchmark counts: a Pressbooks export
may list every heading of a chapter, where the paper counts 118 leaves. Cutting the outline at
depth ``d`` keeps the entries of level ``d`` or less; an entry of level ``d``, or a shallower one
without children, is then a leaf, and its text runs on to the next kept entry. The kept entries
keep their node ids (an ordinal path depends only on the entry's ancestors and earlier
siblings), so a cut tree's leaves are nodes of the full tree.

The rule searched is the depth alone. The paper numbers its sections by outline entries, front
matter included (it shows "9 Chapter 5: Non-Democracies…"), so no entry is dropped by its title.

Where the depth comes from, in order (:func:`leaf_depth_for`): the catalog entry's
``leaf_depth``, else the one ``fetch`` recorded in the lock file when it first checked the PDF
against the paper's leaf count, else none (the full outline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from searchtome.ingest.catalog import book_facts
from searchtome.ingest.lock import Lock
from searchtome.ingest.toc import TocTree
from searchtome.io import PathLike
from searchtome.records import Book, TocNode


@dataclass(frozen=True)
class DepthChoice:
    """The depth whose leaf count comes closest to an expected count, and how close."""

    expected: int
    depth: int | None  # None: the full outline, nothing cut
    leaves: int  # leaves at that depth
    counts: tuple[int, ...]  # leaves when cut at depth 1, 2, ..., the outline's maximum depth

    @property
    def difference(self) -> int:
        return self.leaves - self.expected

    @property
    def exact(self) -> bool:
        return self.leaves == self.expected

    def describe(self) -> str:
        """One line: which depth, how many leaves, how far from the expected count."""
        max_depth = len(self.counts)
        where = (
            f"the full outline (depth {max_depth})"
            if self.depth is None
            else f"depth {self.depth} of {max_depth}"
        )
        if self.exact:
            closeness = f"exactly the expected {self.expected}"
        else:
            share = abs(self.difference) / self.expected * 100
            more = "more" if self.difference > 0 else "fewer"
            closeness = (
                f"{abs(self.difference)} {more} than the expected {self.expected} ({share:.1f} %)"
            )
        per_depth = ", ".join(f"{d}: {n}" for d, n in enumerate(self.counts, 1))
        return f"{where}: {self.leaves} leaves, {closeness} (leaves per depth: {per_depth})"


def leaf_counts(nodes: Sequence[TocNode]) -> tuple[int, ...]:
    """Leaves of the outline cut at depth 1, 2, ..., its maximum depth (empty: no nodes)."""
    max_depth = max((n.level for n in nodes), default=0)
    return tuple(
        sum(1 for n in nodes if n.level == depth or (n.level < depth and n.is_leaf))
        for depth in range(1, max_depth + 1)
    )


def choose_depth(nodes: Sequence[TocNode], expected: int) -> DepthChoice:
    """The cut whose leaf count is closest to ``expected``.

    Ties go to the deeper cut, which drops fewer entries; the deepest is reported as ``None``
    (the full outline), so a book whose outline already has the expected leaves needs no cut.
    """
    if expected < 1:
        raise ValueError("the expected leaf count must be positive")
    counts = leaf_counts(nodes)
    if not counts:
        return DepthChoice(expected, None, 0, ())
    best = min(range(len(counts), 0, -1), key=lambda d: abs(counts[d - 1] - expected))
    depth = None if best == len(counts) else best
    return DepthChoice(expected, depth, counts[best - 1], counts)


def cut_tree(tree: TocTree, depth: int | None) -> TocTree:
    """``tree`` without the entries deeper than ``depth`` (``None``: unchanged)."""
    if depth is None:
        return tree
    nodes = [
        replace(n, is_leaf=n.is_leaf or n.level == depth) for n in tree.nodes if n.level <= depth
    ]
    return tree.with_nodes(nodes)


def leaf_depth_for(book: Book, lock: Lock | PathLike | None = None) -> int | None:
    """The outline depth to cut ``book`` at (``None``: use the full outline).

    The catalog entry's ``leaf_depth`` wins; else the depth ``fetch`` recorded in ``lock`` for
    the file the book is pinned to (by the catalog or by the lock itself).
    """
    known = book_facts(book).leaf_depth
    if known is not None or lock is None:
        return known
    lock = lock if isinstance(lock, Lock) else Lock.load(lock)
    pin = lock.entry(book) if book.sha256 is None else None
    sha = book.sha256 or (pin or {}).get("sha256")
    found = lock.check(book.book_id, sha) if sha else None
    depth = (found or {}).get("leaf_depth")
    return depth if isinstance(depth, int) else None
