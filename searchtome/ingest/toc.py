"""A book's table of contents: the PDF outline (or an inferred one) as a tree of ToC nodes.

``searchtome toc PDF [--json]`` prints it. The outline is MuPDF's resolved outline tree
(``Document.outline``), cleaned up: titles are whitespace-normalised (empty ones get a
placeholder), entries that point nowhere keep their place in the tree with ``page=None``, level
skips are attached to the nearest possible parent, and every such repair is reported in
``warnings``.

One PyMuPDF behaviour needs care: when a single outline entry points to a page index beyond the
document, ``get_toc()`` returns an empty list for the whole document, without an error. An empty
result for a file whose catalog has a non-empty ``/Outlines`` is therefore never taken as "no
ToC": the outline is read again with pypdf, entry by entry.
"""

from __future__ import annotations

import argparse
import io
import logging
import math
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from searchtome.errors import SearchTomeError
from searchtome.records import BOOK_ID_RE, TocNode, node_id, slugify

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

Source = Literal["outline", "inferred"]
InferMode = bool | Literal["auto", "always"]

UNTITLED = "(untitled)"


@dataclass(frozen=True)
class OutlineEntry:
    """One outline entry as read, before it becomes a node: level, title, where it points."""

    level: int
    title: str
    page: int | None  # 1-based, None when it points nowhere in this document
    x: float | None = None  # destination point in top-left page coordinates, when given
    y: float | None = None


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


_SPACE_RE = re.compile(r"\s+")


def clean_title(title: str) -> str:
    """NFC, control characters dropped, whitespace runs collapsed to one space, stripped."""
    title = unicodedata.normalize("NFC", title or "")
    title = "".join(
        " " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
        for c in title
        if c not in "\u200b\ufeff\u00ad"
    )
    return _SPACE_RE.sub(" ", title).strip()


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


# --------------------------------------------------------------------------------------------
# Reading the outline


def has_outline(doc: pymupdf.Document) -> bool:
    """Whether the catalog holds a non-empty ``/Outlines`` tree, whatever get_toc says."""
    try:
        kind, value = doc.xref_get_key(doc.pdf_catalog(), "Outlines")
        if kind != "xref":
            return False
        outlines = int(value.split()[0])
        return doc.xref_get_key(outlines, "First")[0] == "xref"
    except Exception:  # not a PDF catalog we can inspect
        return False


def _valid_y(y: float | None, height: float | None) -> float | None:
    if y is None or math.isnan(y) or y < -1.0 or (height is not None and y > height + 1.0):
        return None
    return max(y, 0.0) if height is None else min(max(y, 0.0), height)


def _walk_outline(doc: pymupdf.Document, path: Path, warns: list[str]) -> list[OutlineEntry]:
    """MuPDF's outline tree, depth first.

    ``Document.outline`` items carry the resolved page and the destination point already in
    top-left page coordinates, for named destinations too (``get_toc(simple=False)`` reports
    named ones in raw PDF coordinates, and resolves every entry again, 15x slower).
    """
    entries: list[OutlineEntry] = []
    n_pages = doc.page_count
    heights: dict[int, float] = {}
    stack = [(doc.outline, 1)]
    while stack:
        item, level = stack.pop()
        while item is not None:
            title = item.title or ""
            number = len(entries) + 1
            page: int | None = item.page + 1 if item.page is not None and item.page >= 0 else None
            x = y = None
            if item.is_external:
                warns.append(
                    f"entry {number} {clean_title(title)!r} links to {item.uri}, not into this book"
                )
                page = None
            elif page is None:
                uri = item.uri or ""
                detail = (
                    f"named destination {uri.split('=', 1)[1]!r} is not defined"
                    if uri.startswith("#nameddest=")
                    else "no destination"
                )
                warns.append(f"entry {number} {clean_title(title)!r} points nowhere ({detail})")
            elif page <= n_pages:
                if page not in heights:
                    heights[page] = doc.page_cropbox(page - 1).height
                x = _valid_y(getattr(item, "x", None), None)
                y = _valid_y(getattr(item, "y", None), heights[page])
            entries.append(OutlineEntry(level, title, page, x, y))
            if item.down is not None:
                # Children come before the next sibling: finish them first.
                stack.append((item.next, level))
                item, level = item.down, level + 1
                continue
            item = item.next
    return entries


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _outline_with_pypdf(doc: pymupdf.Document, path: Path) -> list[OutlineEntry]:
    """Read the outline entry by entry with pypdf (used when PyMuPDF returns nothing)."""
    import pymupdf
    import pypdf

    if doc.metadata and doc.metadata.get("encryption"):
        # pypdf would need the optional `cryptography` package for AES; MuPDF already
        # decrypted the file, so hand pypdf an unencrypted copy.
        data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_NONE)
    else:
        data = path.read_bytes()
    pypdf_log = logging.getLogger("pypdf")
    old_level = pypdf_log.level
    pypdf_log.setLevel(logging.ERROR)  # its "multiple definitions" chatter is not ours to show
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        entries: list[OutlineEntry] = []

        def walk(items: Sequence[Any], level: int) -> None:
            for item in items:
                if isinstance(item, list):
                    walk(item, level + 1)
                    continue
                index = reader.get_destination_page_number(item)
                page = index + 1 if index is not None and 0 <= index < doc.page_count else None
                x = y = None
                if page is not None:
                    pdf_page = doc[page - 1]
                    left, top = _number(item.left), _number(item.top)
                    if top is not None:
                        point = pymupdf.Point(left or 0.0, top) * pdf_page.transformation_matrix
                        x, y = float(point.x), _valid_y(float(point.y), pdf_page.rect.height)
                entries.append(OutlineEntry(level, str(item.title or ""), page, x, y))

        walk(reader.outline, 1)
        return entries
    except Exception as exc:
        raise SearchTomeError(
            f"{path}: has an outline that neither PyMuPDF nor pypdf can read ({exc}); "
            "use --infer-toc to infer the ToC from the page layout"
        ) from None
    finally:
        pypdf_log.setLevel(old_level)


def outline_entries(doc: pymupdf.Document, path: Path) -> tuple[list[OutlineEntry], list[str]]:
    """The outline as flat entries plus warnings; empty when the file has no outline at all."""
    warns: list[str] = []
    try:
        # ``doc.outline`` is a non-None wrapper even when there is no outline, so the catalog
        # decides whether there is one to walk.
        if has_outline(doc):
            entries = _walk_outline(doc, path, warns)
            if entries:
                return entries, warns
    except Exception as exc:  # MuPDF may fail on a broken outline tree
        log.warning("%s: PyMuPDF cannot read the outline (%s); trying pypdf", path, exc)
        warns = []
    if not has_outline(doc):
        return [], warns
    log.warning(
        "%s: PyMuPDF returns an empty ToC although the file has an outline; reading it with pypdf",
        path,
    )
    entries = _outline_with_pypdf(doc, path)
    if not entries:
        raise SearchTomeError(
            f"{path}: has an /Outlines entry but no readable outline items; "
            "use --infer-toc to infer the ToC from the page layout"
        )
    warns.append(
        "PyMuPDF returned an empty ToC although the file has an outline "
        "(an entry points outside the document); the outline was read with pypdf"
    )
    for i, entry in enumerate(entries):
        if entry.page is None:
            warns.append(f"entry {i + 1} {clean_title(entry.title)!r} points outside the document")
    return entries, warns


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
    from searchtome.ingest.pdf import is_damaged

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
        from searchtome.ingest.infer_toc import infer_entries

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
    from searchtome.ingest.pdf import opened

    with opened(path, password=password) as doc:
        tree, _ = toc_from_doc(doc, path, book_id=book_id, infer=infer)
    return tree


# --------------------------------------------------------------------------------------------
# CLI


def format_tree(tree: TocTree) -> str:
    """A readable indented outline with page numbers, one node per line."""
    n_leaves = sum(1 for n in tree.nodes if n.is_leaf)
    lines = [
        f"{tree.book_id}: {len(tree.nodes)} ToC entries ({n_leaves} leaves) from the "
        f"{tree.source} of a {tree.n_pages}-page PDF"
    ]
    width = max((len(n.node_id.split("/", 1)[1]) for n in tree.nodes), default=1)
    for n in tree.nodes:
        ordinal = n.node_id.split("/", 1)[1]
        page = f"p. {n.page}" if n.page is not None else "p. ?"
        marker = "" if n.is_leaf else " +"
        lines.append(f"{ordinal:<{width}}  {'  ' * (n.level - 1)}{n.title}{marker}  [{page}]")
    return "\n".join(lines)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``toc`` and ``extract``."""
    parser.add_argument("pdf", type=Path, metavar="PDF", help="the book's PDF file")
    parser.add_argument(
        "--book-id", help="book id used in node ids (default: slug of the file name)"
    )
    parser.add_argument("--password", help="user password of an encrypted PDF")
    parser.add_argument(
        "--infer-toc",
        action="store_true",
        help="when the PDF has no outline, infer the ToC from headings on the pages",
    )
    parser.add_argument(
        "--ignore-outline",
        action="store_true",
        help="infer the ToC from the page layout even when the PDF has an outline",
    )


def infer_mode(args: argparse.Namespace) -> InferMode:
    """The ``infer`` argument of :func:`read_toc` that the command-line options ask for."""
    if getattr(args, "ignore_outline", False):
        return "always"
    return bool(getattr(args, "infer_toc", False))


def _toc_command(args: argparse.Namespace) -> int:
    from searchtome.io import dumps

    tree = read_toc(args.pdf, book_id=args.book_id, password=args.password, infer=infer_mode(args))
    if args.json:
        sys.stdout.write(dumps(tree.to_json()))
    else:
        print(format_tree(tree))
        for w in tree.warnings:
            print(f"warning: {w}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "toc",
        help="print a PDF's table of contents as a tree",
        description="Read a PDF's outline (bookmarks) as a ToC tree. Leaves are the retrieval "
        "targets. Repairs (empty titles, dangling entries, level skips) are listed as warnings.",
    )
    add_source_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_toc_command)
