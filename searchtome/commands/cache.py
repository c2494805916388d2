"""``searchtome cache export|import|info|check|drop``: share and mend the LLM reply cache.

The reply cache lets anyone rebuild a dataset without an LLM: export it after a build, import it
elsewhere, then ``searchtome build --endpoint cache ...``. ``check`` lists the replies no build
can use (empty, refused, too large, no questions under any strictness); ``drop --bad`` removes
them, so the next build asks for them again.
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


def _bad_entries(path: Path, model: str | None) -> tuple[int, list[tuple[Any, str]]]:
    """``(rows looked at, [(entry, problem), ...])`` for the cache at ``path``."""
    from searchtome.generate.replies import MAX_REPLY_CHARS, reply_problem
    from searchtome.llm.cache import ResponseCache

    seen, bad = 0, []
    with ResponseCache(path) as cache:
        for entry in cache.scan(MAX_REPLY_CHARS):
            if model is not None and entry.model != model:
                continue
            seen += 1
            problem = reply_problem(entry.content, entry.finish_reason, entry.length)
            if problem is not None:
                bad.append((entry, problem))
    return seen, bad


def _check(args: argparse.Namespace) -> int:
    from searchtome.llm.cache import default_cache_path

    path = args.cache or default_cache_path()
    seen, bad = _bad_entries(path, args.model)
    print(f"{path}: {seen:,} replies, {len(bad):,} unusable")
    for entry, problem in bad[: args.limit]:
        print(f"  {entry.key[:16]}  {entry.model}  via {entry.host}: {problem}")
    if len(bad) > args.limit:
        print(f"  ... and {len(bad) - args.limit:,} more")
    if bad:
        print("drop them with `searchtome cache drop --bad`; a build asks for them again")
        return 1
    return 0


def _drop(args: argparse.Namespace) -> int:
    from searchtome.errors import SearchTomeError
    from searchtome.llm.cache import ResponseCache, default_cache_path

    if not args.bad and not args.key:
        raise SearchTomeError("cache drop: say what to drop: --bad, or --key KEY")
    path = args.cache or default_cache_path()
    keys = [e.key for e, _ in _bad_entries(path, args.model)[1]] if args.bad else []
    with ResponseCache(path) as cache:
        if args.key:
            known = {e.key for e in cache.scan(0)}
            for key in args.key:
                matches = [k for k in known if k.startswith(key)]
                if len(matches) != 1:
                    raise SearchTomeError(
                        f"{path}: {len(matches)} replies have a key starting {key!r}; "
                        "give more of the key (`searchtome cache check` lists them)"
                    )
                keys.append(matches[0])
        dropped = cache.delete(dict.fromkeys(keys))
        total = len(cache)
    print(f"dropped {dropped:,} replies from {path}; {total:,} left")
    return 0


def register(subparsers: Any) -> None:
    c = subparsers.add_parser(
        "cache",
        help="export, import, inspect, check or mend the LLM reply cache",
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
    k = csub.add_parser(
        "check",
        help="list cached replies that no build can use",
        description="List the cached replies no build can use (empty, refused as too large or "
        "not Unicode, cut off with no complete question, no questions under any strictness); "
        "exit 1 when there are any.",
    )
    k.add_argument("--model", help="only this model's replies")
    k.add_argument("--limit", type=int, default=20, metavar="N", help="list at most N (default 20)")
    k.add_argument("--cache", type=Path, metavar="DB", help=db_help)
    k.set_defaults(func=_check)
    d = csub.add_parser(
        "drop",
        help="remove unusable (or chosen) replies from the cache",
        description="Remove replies from the cache; the next build asks for them again.",
    )
    d.add_argument("--bad", action="store_true", help="every reply `cache check` lists")
    d.add_argument(
        "--key", action="append", metavar="KEY", help="the reply with this key (or key prefix)"
    )
    d.add_argument("--model", help="with --bad: only this model's replies")
    d.add_argument("--cache", type=Path, metavar="DB", help=db_help)
    d.set_defaults(func=_drop)
