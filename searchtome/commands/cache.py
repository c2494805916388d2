"""``searchtome cache export|import|info``: share the LLM reply cache.

The reply cache lets anyone rebuild a dataset without an LLM: export it after a build, import it
elsewhere, then ``searchtome build --endpoint cache ...``.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any


def _export(args: argparse.Namespace) -> int:
    from searchtome.llm.cache import ResponseCache, default_cache_path

    with ResponseCache(args.cache or default_cache_path()) as cache:
        n = cache.export(args.file, model=args.model)
    print(f"exported {n:,} replies to {args.file}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from searchtome.llm.cache import ResponseCache, default_cache_path

    with ResponseCache(args.cache or default_cache_path()) as cache:
        stats = cache.import_file(args.file, replace=args.replace)
        total = len(cache)
    print(
        f"imported {args.file}: {stats['added']:,} new, {stats['same']:,} already present, "
        f"{stats['conflicts']:,} conflicting ({'replaced' if args.replace else 'kept ours'}); "
        f"cache now holds {total:,} replies"
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    from searchtome.llm.cache import ResponseCache, default_cache_path

    path = args.cache or default_cache_path()
    with ResponseCache(path) as cache:
        rows = Counter((r["host"], r["model"], r["prompt_version"]) for r in cache.rows())
    print(f"{path}: {sum(rows.values()):,} replies")
    for (host, model, prompt), n in sorted(rows.items()):
        print(f"  {n:>8,}  {model}  via {host}  prompt {prompt}")
    return 0


def register(subparsers: Any) -> None:
    c = subparsers.add_parser(
        "cache",
        help="export, import or inspect the LLM reply cache",
        description="The reply cache lets anyone rebuild a dataset without an LLM: export it "
        "after a build, import it elsewhere, then `searchtome build --endpoint cache ...`.",
    )
    csub = c.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    db_help = "the reply cache (default: $SEARCHTOME_HOME/llm/responses.sqlite)"
    e = csub.add_parser(
        "export",
        help="write every cached reply to one .jsonl.gz file",
        description="Write the cached replies to FILE, to publish next to a dataset.",
    )
    e.add_argument("file", type=Path, metavar="FILE", help="file to write (.jsonl.gz)")
    e.add_argument("--model", help="only this model's replies")
    e.add_argument("--cache", type=Path, metavar="DB", help=db_help)
    e.set_defaults(func=_export)
    i = csub.add_parser(
        "import",
        help="merge an exported file into the cache",
        description="Add the replies of an exported FILE to the cache; a build then asks the "
        "LLM nothing it has a reply for.",
    )
    i.add_argument("file", type=Path, metavar="FILE", help="a file written by `cache export`")
    i.add_argument("--replace", action="store_true", help="on conflict, take the file's reply")
    i.add_argument("--cache", type=Path, metavar="DB", help=db_help)
    i.set_defaults(func=_import)
    n = csub.add_parser(
        "info",
        help="count cached replies by model, endpoint and prompt",
        description="Count the cached replies by model, endpoint host and prompt version.",
    )
    n.add_argument("--cache", type=Path, metavar="DB", help=db_help)
    n.set_defaults(func=_info)
