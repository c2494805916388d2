"""``searchtome extract``: write a PDF's ToC, leaf texts and paragraphs to a folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from searchtome.commands.toc import add_source_arguments, infer_mode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="extract the text of every ToC leaf and its paragraphs",
        description="Split a PDF into its ToC sections: each starts at its heading's position "
        "on the page and ends where the next ToC entry starts. Writes toc.jsonl, leaves.jsonl, "
        "paragraphs.jsonl and meta.json to --out.",
    )
    add_source_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from searchtome.ingest.extract import META_FILE, extract_book, write_extraction

    extraction = extract_book(
        args.pdf, book_id=args.book_id, password=args.password, infer_toc=infer_mode(args)
    )
    write_extraction(extraction, args.out)
    n_chars = sum(len(leaf.text) for leaf in extraction.leaves)
    print(
        f"{extraction.book_id}: {len(extraction.toc.nodes)} ToC nodes "
        f"({extraction.toc.source}), {len(extraction.leaves)} leaves, "
        f"{len(extraction.paragraphs)} paragraphs, {n_chars:,} characters -> {args.out}"
    )
    warnings = extraction.toc.warnings
    # Ten warnings are enough to judge a book by; meta.json keeps the whole list.
    for w in warnings[:10]:
        print(f"warning: {w}", file=sys.stderr)
    if len(warnings) > 10:
        print(
            f"warning: ... and {len(warnings) - 10} more, listed in {Path(args.out) / META_FILE}",
            file=sys.stderr,
        )
    return 0
