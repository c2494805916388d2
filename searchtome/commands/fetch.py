"""``searchtome fetch``: download and verify the catalog's PDFs; list the catalog; check books
against the paper's figures."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from searchtome.errors import SearchTomeError
from searchtome.ingest.fetch import DEFAULT_RETRIES, DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from searchtome.ingest.figures import FigureCheck
    from searchtome.ingest.lock import Lock
    from searchtome.records import Book


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fetch",
        help="download and verify the catalog's PDFs into the cache",
        description=(
            "Download the catalog's PDFs into $SEARCHTOME_HOME/downloads, verifying size and "
            "SHA-256 while streaming. Books that cannot be downloaded can be supplied by hand "
            "with --source-dir (file named <book_id>.pdf or the URL's file name). The default "
            "catalog is SearchTome v2, the paper's 18 books: each PDF that arrives is checked "
            "against the paper's page and leaf counts."
        ),
    )
    parser.add_argument(
        "--catalog",
        metavar="FILE",
        help="catalog TOML, or a packaged catalog: v2 (default, the paper's 18 books) or v1 "
        "(the earlier reconstruction)",
    )
    parser.add_argument("--books", metavar="ID,...", help="comma-separated book ids (default: all)")
    parser.add_argument(
        "--source-dir", metavar="DIR", help="folder of PDFs supplied by hand (checked first)"
    )
    parser.add_argument(
        "--lock",
        metavar="FILE",
        help="lock file pinning unpinned entries (default: $SEARCHTOME_HOME/locks/<catalog>.lock.json)",
    )
    parser.add_argument(
        "--repin",
        action="store_true",
        help="forget the lock pins of the selected books and pin what is fetched now",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=DEFAULT_RETRIES,
        metavar="N",
        help=f"retries per URL after a transient failure, with exponential backoff (default {DEFAULT_RETRIES})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"limit for connecting and for each read; a stall this long is a failure (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the catalog (with the paper's figures) and cache state; fetch nothing",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="after fetching, print each book's pages and leaves against the paper's and a "
        "verdict; exit non-zero unless every book matches or comes close",
    )
    parser.add_argument(
        "--write-pinned",
        metavar="FILE",
        help="after fetching, write the catalog with every lock pin filled in to FILE",
    )
    parser.set_defaults(func=_run)


def _parse_ids(text: str | None) -> list[str] | None:
    if not text:
        return None
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise SearchTomeError("--books is empty; give comma-separated book ids")
    return ids


def _run(args: argparse.Namespace) -> int:
    from searchtome.ingest.catalog import catalog_to_toml, load_catalog
    from searchtome.ingest.fetch import fetch_books, verify_books
    from searchtome.ingest.lock import Lock, default_lock_path, pinned_catalog
    from searchtome.io import atomic_write

    catalog = load_catalog(args.catalog)
    ids = _parse_ids(args.books)
    books = [catalog.get(b) for b in ids] if ids else list(catalog.books)
    lock = Lock.load(args.lock or default_lock_path(catalog), catalog)
    if args.retries < 0 or args.timeout <= 0:
        raise SearchTomeError("--retries must be >= 0 and --timeout > 0")

    if args.list:
        _print_list(books, lock)
        return 0

    result = fetch_books(
        catalog,
        [b.book_id for b in books],
        args.source_dir,
        lock=lock,
        repin=args.repin,
        retries=args.retries,
        timeout=args.timeout,
    )
    for book_id, path in result.paths.items():
        print(f"{book_id}\t{result.sources[book_id]}\t{path}")
    for message in result.failures.values():
        print(f"searchtome: error: {message}", file=sys.stderr)
    if args.write_pinned:
        text = catalog_to_toml(pinned_catalog(catalog, Lock.load(result.lock_path)))
        with atomic_write(args.write_pinned) as fh:
            fh.write(text)
    verified = True
    if args.verify:
        checks = verify_books(catalog, [b.book_id for b in books], result, lock)
        verified = _print_verification(checks)
    return 0 if result.ok and verified else 1


_LIST_HEADER = (
    "book_id",
    "domain",
    "status",
    "pages",
    "leaves",
    "test",
    "train",
    "dev",
    "pin",
    "cached",
    "restrictions",
    "title",
)


def _print_list(books: Sequence[Book], lock: Lock) -> None:
    """One tab-separated row per book under a header; figures are the paper's (``-``: none)."""
    from searchtome.ingest.catalog import book_facts
    from searchtome.ingest.fetch import book_state

    print("\t".join(_LIST_HEADER))
    totals = [0, 0, 0, 0, 0]
    for book in books:
        facts = book_facts(book)
        paper = facts.paper
        figures = [paper.pages, paper.leaves, paper.test, paper.train, paper.dev] if paper else None
        if figures:
            totals = [t + f for t, f in zip(totals, figures, strict=True)]
        pinned, cached = book_state(book, lock)
        row = [
            book.book_id,
            book.domain,
            facts.status or "-",
            *(str(f) for f in figures or ["-"] * 5),
            pinned,
            "cached" if cached else "-",
            ",".join(book.restrictions) or "-",
            book.title,
        ]
        print("\t".join(row))
    if any(totals):
        print("\t".join(["total", "-", "-", *(str(t) for t in totals), "-", "-", "-", "-"]))


def _print_verification(checks: Sequence[FigureCheck]) -> bool:
    """A table of pages and leaves found against the paper's, a verdict per book and overall."""
    from collections import Counter

    from searchtome.ingest.figures import VERDICTS

    print()
    print("\t".join(("book_id", "pages", "paper", "leaves", "paper", "depth", "verdict")))
    for check in checks:
        paper = check.paper
        depth = "-" if check.leaves is None else (check.leaf_depth or "full")
        print(
            "\t".join(
                str(v)
                for v in (
                    check.book_id,
                    "-" if check.pages is None else check.pages,
                    paper.pages if paper else "-",
                    "-" if check.leaves is None else check.leaves,
                    paper.leaves if paper else "-",
                    depth,
                    check.verdict,
                )
            )
        )
    for check in checks:
        if not check.ok:
            print(f"  {check.summary()}")
    counts = Counter(c.verdict for c in checks)
    tally = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])
    good = all(c.ok for c in checks)
    verdict = (
        "every book matches the paper's figures or comes close"
        if good
        else "NOT the paper's books: see the lines above and docs/rebuild.md"
    )
    print(f"verdict: {verdict} ({tally})")
    return good
