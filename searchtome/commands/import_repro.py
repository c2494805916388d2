"""``searchtome import repro``: convert an independent reproduction's release into a dataset.

The conversion itself is :mod:`searchtome.dataset.repro`; this module only parses and prints.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    imp = subparsers.add_parser(
        "import",
        help="convert an existing release into a SearchTome dataset",
        description="Convert data released by others into the SearchTome dataset layout.",
    )
    imp_sub = imp.add_subparsers(dest="format", metavar="FORMAT", required=True)
    repro = imp_sub.add_parser(
        "repro",
        help="an independent reproduction's release (data/derived, data/splits)",
        description=(
            "Convert a stair-rag-reproduction style release (data/derived, data/splits, "
            "data/retriever) into a dataset folder: same query ids and splits, leaves renamed to "
            "SearchTome ids (mapping in id_map.json). Split files are verified against the "
            "SHA-256 values in the release's split manifest."
        ),
    )
    repro.add_argument("src", metavar="DIR", help="release folder (holding data/)")
    repro.add_argument("--out", required=True, help="dataset folder to write (replaced if one)")
    repro.add_argument("--book", help="book id when the release holds several")
    repro.add_argument("--domain", help="domain when the book is not in the catalog")
    repro.add_argument("--repository", help="source repository URL to record (default: SOURCE.md)")
    repro.add_argument(
        "--blind",
        metavar="SPLIT",
        help="write a blind release: SPLIT's gold and units go to --private, ids become opaque",
    )
    repro.add_argument(
        "--private",
        metavar="DIR",
        help="private folder of a --blind release (default: OUT-private)",
    )
    repro.set_defaults(func=_run_repro)


def _run_repro(args: argparse.Namespace) -> int:
    # Imported here so that `searchtome --help` does not load pyarrow.
    from searchtome.dataset.repro import import_repro

    def write(out: object) -> object:
        return import_repro(
            args.src, out, book=args.book, domain=args.domain, repository=args.repository
        )

    if args.blind:
        from searchtome.dataset.blind import blind_release

        holder: list = []
        public = f"{_repository(args)} (the reproduction's own release)"
        blind = blind_release(
            lambda out: holder.append(write(out)), args.out, args.blind, args.private, public
        )
        result = holder[0]
        result.out_dir = blind.public
        print(f"blind {blind.split} split: {blind.n_blind} queries; gold in {blind.private}")
        print(
            f"  rehearsal only: these {blind.split} questions and their gold are public in "
            f"{public}, so matching question text recovers the gold; a real competition uses "
            "`searchtome build --blind` with fresh questions, or a private question set"
        )
    else:
        result = write(args.out)
    qs = ", ".join(f"{s} {n}" for s, n in result.queries.items())
    print(
        f"{result.out_dir}: {result.book_id}: {result.n_nodes} ToC nodes, {result.n_leaves} "
        f"retrieval leaves, {result.n_paragraphs} paragraphs, {result.n_units} units; "
        f"queries {qs}"
    )
    if result.non_retrieval_leaves:
        print(
            f"  {len(result.non_retrieval_leaves)} outline leaves are not retrieval targets "
            f"(kept in toc as non-leaf nodes): {', '.join(result.non_retrieval_leaves)}"
        )
    for w in result.warnings:
        print(f"  warning: {w}")
    return 0


def _repository(args: argparse.Namespace) -> str:
    from pathlib import Path

    from searchtome.dataset.repro_release import data_root, source_repository

    src = Path(args.src)
    data = data_root(src)
    return source_repository(data.parent if data != src else src, args.repository)
