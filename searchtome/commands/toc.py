"""``searchtome toc``: print a PDF's table of contents; also the PDF options ``extract`` shares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from searchtome.ingest.toc import InferMode


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
    """The ``infer`` argument of ``read_toc`` that the command-line options ask for."""
    if getattr(args, "ignore_outline", False):
        return "always"
    return bool(getattr(args, "infer_toc", False))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "toc",
        help="print a PDF's table of contents as a tree",
        description="Read a PDF's outline (bookmarks) as a ToC tree. Leaves are the retrieval "
        "targets. Repairs (empty titles, dangling entries, level skips) are listed as warnings.",
    )
    add_source_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--expect-leaves",
        type=int,
        metavar="N",
        help="cut the outline at the depth whose leaf count comes closest to N (e.g. the "
        "paper's count for the book) and say which depth that is and how close it came",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from searchtome.ingest.toc import format_tree, read_toc
    from searchtome.io import dumps

    tree = read_toc(args.pdf, book_id=args.book_id, password=args.password, infer=infer_mode(args))
    choice = None
    if args.expect_leaves is not None:
        from searchtome.errors import SearchTomeError
        from searchtome.ingest.depth import choose_depth, cut_tree

        if args.expect_leaves < 1:
            raise SearchTomeError("--expect-leaves must be a positive number of leaves")
        choice = choose_depth(tree.nodes, args.expect_leaves)
        tree = cut_tree(tree, choice.depth)
    if args.json:
        sys.stdout.write(dumps(tree.to_json()))
    else:
        print(format_tree(tree))
        for w in tree.warnings:
            print(f"warning: {w}", file=sys.stderr)
    if choice is not None:
        # After the tree, on stderr with --json so the JSON stays one object on stdout.
        print(f"leaf depth: {choice.describe()}", file=sys.stderr if args.json else sys.stdout)
    return 0
