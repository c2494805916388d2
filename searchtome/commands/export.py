"""``searchtome export {beir,trec}``: write a dataset in formats other tools read.

The conversion itself is :mod:`searchtome.dataset.beir`; this module only parses and prints.
"""

from __future__ import annotations

import argparse


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export",
        help="write a dataset in another format (BEIR, TREC)",
        description="Convert a SearchTome dataset folder into files other tools read.",
    )
    export_sub = export.add_subparsers(dest="format", metavar="FORMAT", required=True)

    beir = export_sub.add_parser(
        "beir",
        help="BEIR folders: corpus.jsonl, queries.jsonl, qrels/{split}.tsv",
        description=(
            "Write one BEIR folder per book and one pooled folder (OUT/pooled) holding every "
            "book. SearchTome scores a query against its own book's leaves; the per-book folders "
            "are that task."
        ),
    )
    beir.add_argument("data", metavar="DATA", help="dataset folder or hf://ORG/NAME@REV")
    beir.add_argument("--out", required=True, help="output folder (replaced if an earlier export)")
    beir.add_argument("--books", type=_csv, help="comma-separated book ids (default: all)")
    beir.add_argument("--splits", type=_csv, default=None, help="default: train,dev,test")
    beir.add_argument("--no-pooled", action="store_true", help="only the per-book folders")
    beir.add_argument("--no-per-book", action="store_true", help="only the pooled folder")
    beir.set_defaults(func=_run_beir)

    trec = export_sub.add_parser(
        "trec",
        help="TREC qrels (qid 0 docno rel) and query TSVs per split",
        description="Write {split}.qrels and {split}.queries.tsv for trec_eval-style tools.",
    )
    trec.add_argument("data", metavar="DATA", help="dataset folder or hf://ORG/NAME@REV")
    trec.add_argument("--out", required=True, help="output folder (replaced if an earlier export)")
    trec.add_argument("--books", type=_csv, help="comma-separated book ids (default: all)")
    trec.add_argument("--splits", type=_csv, default=None, help="default: train,dev,test")
    trec.set_defaults(func=_run_trec)


def _run_beir(args: argparse.Namespace) -> int:
    # Imported here so that `searchtome --help` does not load pyarrow.
    from searchtome.dataset.beir import export_beir
    from searchtome.errors import SearchTomeError
    from searchtome.records import SPLITS

    if args.no_pooled and args.no_per_book:
        raise SearchTomeError("--no-pooled and --no-per-book together leave nothing to write")
    summary = export_beir(
        args.data,
        args.out,
        books=args.books,
        splits=args.splits or SPLITS,
        per_book=not args.no_per_book,
        pooled=not args.no_pooled,
    )
    for folder, counts in summary["folders"].items():
        qs = ", ".join(f"{s} {n}" for s, n in counts["queries"].items())
        print(f"{args.out}/{folder}: {counts['corpus']} leaves; queries {qs}")
    return 0


def _run_trec(args: argparse.Namespace) -> int:
    from searchtome.dataset.beir import export_trec
    from searchtome.records import SPLITS

    summary = export_trec(args.data, args.out, books=args.books, splits=args.splits or SPLITS)
    for split, n in summary["queries"].items():
        print(f"{args.out}/{split}.qrels: {n} queries")
    return 0
