"""A book's table of contents: outline entries, read or inferred, as a tree of ToC nodes.

``searchtome toc PDF [--json]`` prints it. The entries come from the PDF outline
(:mod:`searchtome.ingest.outline`) or, with ``--infer-toc``, from the headings on the pages
(:mod:`searchtome.ingest.infer_toc`). Building the tree cleans them up: titles are
whitespace-normalised (empty ones get a placeholder), entries that point nowhere keep their
place in the tree with ``page=None``, level skips are attached to the nearest possible parent,
and every such repair is reported in ``warnings``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from searchtome.errors import SearchTomeError
from searchtome.ingest.infer_toc import infer_entries
from searchtome.ingest.outline import OutlineEntry, outline_entries
from searchtome.ingest.pdf import is_damaged, opened
from searchtome.records import BOOK_ID_RE, TocNode, node_id, slugify
from searchtome.titles import clean_title

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

Source = Literal["outline", "inferred"]
InferMode = bool | Literal["auto", "always"]

UNTITLED = "(untitled)"


@dataclass(frozen=True)
class TocTree:
    """The ToC of one book: nodes in document (outline) order plus what had to be repaired."""

    book_id: str
    source: Source
    n_pages: int
    nodes: tuple[TocNode, ...]
    warnings: tuple[str, ...] = ()
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({n.node_id: i for i, n in enumerate(self.nodes)})

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, node_id: str) -> TocNode:
        try:
            return self.nodes[self._index[node_id]]
        except KeyError:
            raise SearchTomeError(f"{self.book_id}: no ToC node {node_id!r}") from None

    def leaves(self) -> list[TocNode]:
        return [n for n in self.nodes if n.is_leaf]

    def children(self, node_id: str | None) -> list[TocNode]:
        """Direct children of ``node_id`` (``None``: the top level)."""
        return [n for n in self.nodes if n.parent_id == node_id]

    def with_nodes(self, nodes: Sequence[TocNode]) -> TocTree:
        return replace(self, nodes=tuple(nodes))

    def to_json(self) -> dict[str, Any]:
        """The object ``searchtome toc --json`` prints."""
        return {
            "book_id": self.book_id,
            "source": self.source,
            "n_pages": self.n_pages,
            "nodes": [n.to_json() for n in self.nodes],
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------------------------
# Titles and tree building


def build_tree(
    entries: Sequence[OutlineEntry],
    *,
    book_id: str,
    n_pages: int,
    source: Source,
    warnings: Iterable[str] = (),
) -> TocTree:
    """Nodes with ordinal ids, parents and paths from a flat, levelled list of entries."""
    warns = list(warnings)
    nodes: list[dict[str, Any]] = []
    # Stack of (declared level, index into nodes); a node's real level is its stack depth.
    stack: list[tuple[int, int]] = []
    child_counts: dict[int | None, int] = {}
    for i, entry in enumerate(entries):
        declared = max(1, int(entry.level))
        while stack and stack[-1][0] >= declared:
            stack.pop()
        parent = stack[-1][1] if stack else None
        expected = stack[-1][0] + 1 if stack else 1
        title = clean_title(entry.title)
        if not title:
            title = UNTITLED
            warns.append(f"entry {i + 1} has an empty title; shown as {UNTITLED!r}")
        if declared > expected:
            warns.append(
                f"entry {i + 1} {title!r} jumps from level {expected - 1} to {declared}; "
                f"placed at level {len(stack) + 1}"
            )
        child_counts[parent] = child_counts.get(parent, 0) + 1
        ordinal = (
            (*nodes[parent]["ordinal"], child_counts[parent])
            if parent is not None
            else (child_counts[parent],)
        )
        page = entry.page
        if page is not None and not 1 <= page <= n_pages:
            warns.append(
                f"entry {i + 1} {title!r} points to page {page} of a {n_pages}-page document; "
                "it gets no text"
            )
            page = None
        parent_path = nodes[parent]["path"] if parent is not None else ()
        nodes.append(
            {
                "ordinal": ordinal,
                "title": title,
                "level": len(ordinal),
                "page": page,
                "parent": parent,
                "path": (*parent_path, title),
                "y": entry.y if page is not None else None,
                "has_children": False,
            }
        )
        if parent is not None:
            nodes[parent]["has_children"] = True
        stack.append((declared, len(nodes) - 1))
    toc_nodes = tuple(
        TocNode(
            node_id=node_id(book_id, n["ordinal"]),
            book_id=book_id,
            title=n["title"],
            level=n["level"],
            page=n["page"],
            parent_id=node_id(book_id, nodes[n["parent"]]["ordinal"])
            if n["parent"] is not None
            else None,
            is_leaf=not n["has_children"],
            path=n["path"],
            y=None if n["y"] is None else round(float(n["y"]), 2),
        )
        for n in nodes
    )
    return TocTree(book_id, source, n_pages, toc_nodes, tuple(warns))


def default_book_id(path: str | Path) -> str:
    return slugify(Path(path).stem)


def check_book_id(book_id: str) -> str:
    if not BOOK_ID_RE.match(book_id):
        raise SearchTomeError(
            f"book id {book_id!r} is not a slug; use lowercase letters, digits and '-' "
            f"(e.g. {slugify(book_id)!r})"
        )
    return book_id


def _infer_mode(infer: InferMode) -> str:
    if infer is True:
        return "auto"
    if infer is False or infer is None:
        return "never"
    if infer in ("auto", "always"):
        return str(infer)
    raise SearchTomeError(f"infer must be True, False, 'auto' or 'always', not {infer!r}")


def toc_from_doc(
    doc: pymupdf.Document,
    path: str | Path,
    *,
    book_id: str | None = None,
    infer: InferMode = False,
) -> tuple[TocTree, list[OutlineEntry]]:
    """The tree for an opened document, plus the entries it was built from."""
    path = Path(path)
    book_id = check_book_id(book_id) if book_id else default_book_id(path)
    mode = _infer_mode(infer)
    entries: list[OutlineEntry] = []
    warns: list[str] = []
    if mode != "always":
        entries, warns = outline_entries(doc, path)
    source: Source = "outline"
    damaged = is_damaged(doc)
    if damaged:
        warns.insert(0, "the file is damaged (MuPDF repaired it): pages or text may be missing")
    if not entries:
        if mode == "never" and damaged:
            raise SearchTomeError(
                f"{path}: no outline found, and the file is damaged or truncated (MuPDF had to "
                "repair it); download it again, or add --infer-toc to use what is left"
            )
        if mode == "never":
            raise SearchTomeError(
                f"{path}: has no outline (bookmarks), so there is no ToC to read; "
                "add --infer-toc to infer one from headings on the pages"
            )
        entries, warns = infer_entries(doc, path)
        source = "inferred"
        if not entries:
            raise SearchTomeError(
                f"{path}: no outline and no headings could be inferred from the page layout; "
                "this PDF cannot be split into sections"
            )
    tree = build_tree(
        entries, book_id=book_id, n_pages=doc.page_count, source=source, warnings=warns
    )
    for w in tree.warnings:
        log.info("%s: %s", path, w)
    return tree, entries


def read_toc(
    path: str | Path,
    *,
    book_id: str | None = None,
    password: str | None = None,
    infer: InferMode = False,
) -> TocTree:
    """The ToC tree of the PDF at ``path``.

    ``infer``: ``False`` requires an outline; ``True``/``"auto"`` infers headings from the page
    layout when there is none; ``"always"`` ignores the outline and infers.
    """
    with opened(path, password=password) as doc:
        tree, _ = toc_from_doc(doc, path, book_id=book_id, infer=infer)
    return tree


def format_tree(tree: TocTree) -> str:
    """A readable indented outline with page numbers, one node per line."""
    n_leaves = sum(1 for n in tree.nodes if n.is_leaf)
    origin = "outline" if tree.source == "outline" else "headings inferred from the page layout"
    lines = [
        f"{tree.book_id}: {len(tree.nodes)} ToC entries ({n_leaves} leaves) from the "
        f"{origin} of a {tree.n_pages}-page PDF",
        "(+ marks an entry with sub-entries; the leaves, unmarked, are the retrieval targets)",
    ]
    width = max((len(n.node_id.split("/", 1)[1]) for n in tree.nodes), default=1)
    for n in tree.nodes:
        ordinal = n.node_id.split("/", 1)[1]
        page = f"p. {n.page}" if n.page is not None else "p. ?"
        marker = "" if n.is_leaf else " +"
        lines.append(f"{ordinal:<{width}}  {'  ' * (n.level - 1)}{n.title}{marker}  [{page}]")
    return "\n".join(lines)
