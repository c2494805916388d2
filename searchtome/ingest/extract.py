"""Leaf sections and paragraphs: the text of every ToC entry, cut at its heading's position.

``searchtome extract PDF --out DIR`` writes ``toc.jsonl`` (every node, with a non-leaf's own
introduction in ``text``), ``leaves.jsonl`` and ``paragraphs.jsonl``, plus ``meta.json``
(source, warnings and the SHA-256 of the other three, so a mixed set is detected on reading).

How a page becomes section text:

1. MuPDF text blocks in reading order, ligatures expanded, with running headers, footers, page
   numbers and side notes dropped (:mod:`searchtome.ingest.layout`).
2. Each ToC entry starts at its heading, the line(s) that spell its title near the outline
   destination's point (:mod:`searchtome.ingest.headings`). The heading lines themselves are
   not section text.
3. A section runs to the start of the next entry in document order, so several sections on
   one page each get only their own text. Lines join into paragraphs per block (a hyphen at a
   line end before a lowercase word is removed); a paragraph cut by a page break is joined
   when it does not end a sentence and the next page goes on in lowercase.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.errors import SearchTomeError
from searchtome.ingest.depth import cut_tree
from searchtome.ingest.headings import Start, locate_starts
from searchtome.ingest.layout import Page, mark_furniture, read_pages
from searchtome.ingest.outline import OutlineEntry
from searchtome.ingest.pdf import opened
from searchtome.ingest.toc import InferMode, TocTree, toc_from_doc
from searchtome.io import collector_paused
from searchtome.records import Leaf, Paragraph, TocNode

if TYPE_CHECKING:
    import pymupdf

log = logging.getLogger(__name__)

FORMAT = "searchtome-extraction-v1"
TOC_FILE = "toc.jsonl"
LEAVES_FILE = "leaves.jsonl"
PARAGRAPHS_FILE = "paragraphs.jsonl"
META_FILE = "meta.json"


@dataclass(frozen=True)
class Extraction:
    """Everything extracted from one book: the ToC (with intro texts), leaves, paragraphs."""

    book_id: str
    toc: TocTree
    leaves: tuple[Leaf, ...]
    paragraphs: tuple[Paragraph, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.toc.warnings

    def paragraphs_of(self, leaf_id: str) -> list[Paragraph]:
        return [p for p in self.paragraphs if p.leaf_id == leaf_id]


# --------------------------------------------------------------------------------------------
# Sections and paragraphs

_SENTENCE_END_RE = re.compile(r"[.!?:;…]['\"”’)\]]*$")


def _join_lines(lines: Sequence[str]) -> str:
    """One paragraph's lines as one string: hyphenation undone, whitespace collapsed."""
    parts: list[str] = []
    for line in lines:
        if parts:
            prev = parts[-1]
            if len(prev) > 1 and prev[-1] == "-" and prev[-2].isalpha() and line[:1].islower():
                parts[-1] = prev[:-1]  # "hyphen-" + "ated" -> "hyphenated"
            else:
                parts.append(" ")
        parts.append(line)
    return " ".join("".join(parts).split())


def _continues(previous: str, following: str) -> bool:
    """Whether a paragraph cut by a page break goes on in ``following``."""
    return not _SENTENCE_END_RE.search(previous) and following[:1].islower()


@dataclass
class _Section:
    paragraphs: list[tuple[int, list[str]]] = field(default_factory=list)  # (page, lines)
    last_page: int | None = None
    # Whether the last paragraph ended on the last kept block of its page.
    open_at_page_end: bool = False

    def texts(self) -> list[tuple[int, str]]:
        """(page, text) of each paragraph."""
        return [(page, _join_lines(lines)) for page, lines in self.paragraphs]


def assemble(pages: Sequence[Page], starts: Sequence[Start | None]) -> list[_Section | None]:
    """Walk the document once in reading order, handing every kept line to its section."""
    order = sorted((s.pos, i) for i, s in enumerate(starts) if s is not None)
    sections: list[_Section | None] = [None if s is None else _Section() for s in starts]
    skip = {pos for s in starts if s is not None for pos in s.heading}
    k = -1  # index into order of the current section
    nxt = order[0][0] if order else None  # where the next section starts
    current: _Section | None = None
    for pi, page in enumerate(pages):
        kept = [bi for bi, b in enumerate(page.blocks) if not b.dropped]
        last_kept = kept[-1] if kept else None
        first_on_page = True
        for bi, block in enumerate(page.blocks):
            new_paragraph = True
            if block.dropped:  # sections may still start inside it (at its end, in effect)
                end = (pi, bi, len(block.lines) - 1)
                while nxt is not None and nxt <= end:
                    k += 1
                    current = sections[order[k][1]]
                    nxt = order[k + 1][0] if k + 1 < len(order) else None
                continue
            for li, line in enumerate(block.lines):
                pos = (pi, bi, li)
                if nxt is not None and nxt <= pos:
                    while nxt is not None and nxt <= pos:
                        k += 1
                        current = sections[order[k][1]]
                        nxt = order[k + 1][0] if k + 1 < len(order) else None
                    new_paragraph = True
                if current is None or pos in skip:
                    new_paragraph = True
                    continue
                if new_paragraph:
                    if (
                        first_on_page
                        and current.open_at_page_end
                        and current.last_page == pi - 1
                        and _continues(current.paragraphs[-1][1][-1], line)
                    ):
                        current.paragraphs[-1][1].append(line)
                    else:
                        current.paragraphs.append((pi + 1, [line]))
                    new_paragraph = False
                else:
                    current.paragraphs[-1][1].append(line)
                current.last_page = pi
                current.open_at_page_end = bi == last_kept
                first_on_page = False
    return sections


def _build_extraction(
    tree: TocTree, pages: Sequence[Page], entries: Sequence[OutlineEntry]
) -> Extraction:
    starts = locate_starts(pages, tree.nodes, entries)
    sections = assemble(pages, starts)
    warnings = list(tree.warnings)
    nodes: list[TocNode] = []
    leaves: list[Leaf] = []
    paragraphs: list[Paragraph] = []
    for node, start, section in zip(tree.nodes, starts, sections, strict=True):
        y = start.y if start is not None else None
        if node.page is None and start is not None:
            node = replace(node, page=start.pos[0] + 1)
            warnings.append(
                f"entry {node.node_id} {node.title!r}: placed on page {node.page}, "
                "where its heading was found"
            )
        paras = section.texts() if section is not None else []
        text = "\n\n".join(t for _, t in paras)
        if not node.is_leaf:
            nodes.append(replace(node, y=y, text=text))
            continue
        nodes.append(replace(node, y=y, text=""))
        if node.page is not None and not paras:
            warnings.append(f"leaf {node.node_id} {node.title!r} has no text")
        for n, (page, para) in enumerate(paras, 1):
            paragraphs.append(Paragraph(f"{node.node_id}#p{n}", node.node_id, para, page))
        page_end = node.page
        if section is not None and section.last_page is not None:
            page_end = max(section.last_page + 1, node.page or 0)
        leaves.append(
            Leaf(
                leaf_id=node.node_id,
                book_id=node.book_id,
                path=node.path,
                title=node.title,
                text=text,
                page_start=node.page,
                page_end=page_end,
            )
        )
    toc = replace(tree.with_nodes(nodes), warnings=tuple(warnings))
    return Extraction(tree.book_id, toc, tuple(leaves), tuple(paragraphs))


def cut_outline(
    tree: TocTree, entries: Sequence[OutlineEntry], leaf_depth: int | None
) -> tuple[TocTree, list[OutlineEntry]]:
    """The tree and its outline entries without the entries deeper than ``leaf_depth``.

    Both are filtered alike because :func:`locate_starts` pairs them one to one. A dropped
    entry's heading is then not looked for, so its heading line and text fall to the kept
    entry before it: a cut leaf holds the whole text of its former sub-sections.
    """
    if leaf_depth is None:
        return tree, list(entries)
    kept = [
        entry for node, entry in zip(tree.nodes, entries, strict=True) if node.level <= leaf_depth
    ]
    cut = cut_tree(tree, leaf_depth)
    log.info(
        "%s: outline cut at depth %d: %d of %d entries kept, %d leaves",
        tree.book_id,
        leaf_depth,
        len(cut.nodes),
        len(tree.nodes),
        len(cut.leaves()),
    )
    return cut, kept


def extract_doc(
    doc: pymupdf.Document,
    path: str | Path,
    *,
    book_id: str | None = None,
    infer_toc: InferMode = False,
    leaf_depth: int | None = None,
) -> Extraction:
    """:func:`extract_book` for an already opened document."""
    with collector_paused():
        tree, entries = toc_from_doc(doc, path, book_id=book_id, infer=infer_toc)
        tree, entries = cut_outline(tree, entries, leaf_depth)
        pages = read_pages(doc, path)
        dropped = mark_furniture(pages)
        log.info("%s: %d header/footer/page-number blocks dropped", path, dropped)
        return _build_extraction(tree, pages, entries)


def extract_book(
    path: str | Path,
    *,
    book_id: str | None = None,
    password: str | None = None,
    infer_toc: InferMode = False,
    leaf_depth: int | None = None,
) -> Extraction:
    """ToC, leaf texts and paragraphs of the PDF at ``path`` (deterministic).

    ``leaf_depth`` cuts the outline at that depth first (:func:`cut_outline`); ``None`` keeps
    every entry.
    """
    with opened(path, password=password) as doc:
        return extract_doc(doc, path, book_id=book_id, infer_toc=infer_toc, leaf_depth=leaf_depth)


# --------------------------------------------------------------------------------------------
# On disk


def write_extraction(extraction: Extraction, out_dir: str | Path) -> None:
    """Write the four files so that a reader sees the old set, the new set, or no set.

    Everything is written into a temporary sibling folder first. A fresh ``out_dir`` is then
    renamed into place in one step; an existing one loses its ``meta.json`` first, gets the
    new data files, and gets the new ``meta.json`` (which pins the others by SHA-256) last, so
    an interruption leaves a folder that :func:`read_extraction` rejects, never a mixed one.
    Other files in ``out_dir`` are left alone.
    """
    import shutil

    import pymupdf

    from searchtome.io import atomic_dir, sha256_file, write_json, write_jsonl
    from searchtome.version import __version__

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SearchTomeError(f"{out}: exists and is not a folder; choose another --out")
    rows = {
        TOC_FILE: [n.to_dict() for n in extraction.toc.nodes],
        LEAVES_FILE: [leaf.to_dict() for leaf in extraction.leaves],
        PARAGRAPHS_FILE: [p.to_dict() for p in extraction.paragraphs],
    }
    tmp = atomic_dir(out)
    try:
        files = {}
        for name, data in rows.items():
            write_jsonl(tmp / name, data)
            files[name] = sha256_file(tmp / name)
        write_json(
            tmp / META_FILE,
            {
                "format": FORMAT,
                "book_id": extraction.book_id,
                "source": extraction.toc.source,
                "n_pages": extraction.toc.n_pages,
                "warnings": list(extraction.toc.warnings),
                "counts": {
                    "nodes": len(extraction.toc.nodes),
                    "leaves": len(extraction.leaves),
                    "paragraphs": len(extraction.paragraphs),
                },
                "files": files,
                "versions": {"searchtome": __version__, "pymupdf": pymupdf.VersionBind},
            },
        )
        if not out.exists():
            os.replace(tmp, out)
            return
        (out / META_FILE).unlink(missing_ok=True)
        for name in (*rows, META_FILE):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_extraction(out_dir: str | Path) -> Extraction:
    """Read what :func:`write_extraction` wrote; a mixed or damaged set is an error."""
    from searchtome.io import read_json, read_jsonl, sha256_file

    out = Path(out_dir)
    meta_path = out / META_FILE
    if not meta_path.exists():
        raise SearchTomeError(
            f"{out}: no {META_FILE}, so not a complete extraction; run `searchtome extract` again"
        )
    meta = read_json(meta_path)
    if meta.get("format") != FORMAT:
        raise SearchTomeError(f"{meta_path}: unknown format {meta.get('format')!r}")
    for name, digest in meta["files"].items():
        if not (out / name).exists() or sha256_file(out / name) != digest:
            raise SearchTomeError(
                f"{out / name}: missing or changed since {META_FILE} was written; "
                "run `searchtome extract` again"
            )
    nodes = tuple(TocNode.from_dict(r) for r in read_jsonl(out / TOC_FILE))
    tree = TocTree(
        meta["book_id"], meta["source"], int(meta["n_pages"]), nodes, tuple(meta["warnings"])
    )
    leaves = tuple(Leaf.from_dict(r) for r in read_jsonl(out / LEAVES_FILE))
    paragraphs = tuple(Paragraph.from_dict(r) for r in read_jsonl(out / PARAGRAPHS_FILE))
    return Extraction(meta["book_id"], tree, leaves, paragraphs)
