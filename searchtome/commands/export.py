"""``searchtome export {beir,trec,mteb,run}``: datasets and runs in formats other tools read.

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
    _register_run(export_sub)
    _register_mteb(export_sub)


def _register_run(export_sub: argparse._SubParsersAction) -> None:
    run = export_sub.add_parser(
        "run",
        help="a submission or run file as a TREC run or predictions JSON lines",
        description=(
            "Convert a submission folder, predictions.jsonl[.gz] or TREC run file into the other "
            "format (or the same one, normalised). The order of every ranking is kept, so "
            "`searchtome score` gives the same values for both files; scores are kept exactly, "
            "except in a TREC file for a ranking without scores or whose tied ids are not in "
            "trec_eval's order (id descending): those get scores n, n-1, ..., 1."
        ),
    )
    run.add_argument("submission", metavar="SUBMISSION", help="submission folder or run file")
    run.add_argument(
        "--format", dest="to", choices=("trec", "jsonl"), required=True, help="format to write"
    )
    run.add_argument("--out", required=True, help="file to write (.gz compresses JSON lines)")
    run.add_argument(
        "--run-format",
        choices=("auto", "jsonl", "trec"),
        default="auto",
        help="format of SUBMISSION (default: detected from the content)",
    )
    run.add_argument("--tag", help="TREC run tag (default: the system name)")
    run.set_defaults(func=_run_run)


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


def _run_run(args: argparse.Namespace) -> int:
    from searchtome.submissions import read_submission, write_predictions, write_trec
    from searchtome.submissions.writer import rank_scored_queries

    sub = read_submission(args.submission, args.run_format)
    run = sub.run
    if args.to == "trec":
        write_trec(args.out, run, tag=args.tag or sub.system)
        derived = len(rank_scored_queries(run))
        note = f"; rank-derived scores for {derived} of them (see --help)" if derived else ""
    else:
        write_predictions(args.out, run)
        note = ""
    print(f"{args.out}: {len(run)} queries of {sub.system} as {args.to}{note}")
    return 0


def _register_mteb(export_sub: argparse._SubParsersAction) -> None:
    mteb = export_sub.add_parser(
        "mteb",
        help="the Hub layout MTEB 2.x loads: {book}-corpus/-queries/-qrels configs",
        description=(
            "Write one MTEB subset per book (SearchTome ranks within a book): OUT/README.md "
            "declares the configs {book}-corpus, {book}-queries and {book}-qrels over parquet "
            "files with the columns MTEB reads (id, title, text; query-id, corpus-id, score). "
            "Upload OUT to the Hub to add the dataset to MTEB (docs/integrations.md)."
        ),
    )
    mteb.add_argument("data", metavar="DATA", help="dataset folder or hf://ORG/NAME@REV")
    mteb.add_argument("--out", required=True, help="output folder (replaced if an earlier export)")
    mteb.add_argument("--books", type=_csv, help="comma-separated book ids (default: all)")
    mteb.add_argument("--splits", type=_csv, default=None, help="default: train,dev,test")
    mteb.set_defaults(func=_run_mteb)


def _run_mteb(args: argparse.Namespace) -> int:
    from searchtome.dataset.mteb_layout import export_mteb
    from searchtome.records import SPLITS

    summary = export_mteb(args.data, args.out, books=args.books, splits=args.splits or SPLITS)
    for book, counts in summary["subsets"].items():
        qs = ", ".join(f"{s} {n}" for s, n in counts["queries"].items())
        print(f"{args.out}/{book}: {counts['corpus']} leaves; queries {qs}")
    return 0
