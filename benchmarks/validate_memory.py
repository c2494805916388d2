"""Peak memory of ``searchtome validate`` on the worst inputs within the limits, and on a valid
250 MB submission, against the bound docs/submissions.md promises.

A synthetic dataset (six books, 600 leaves, ``--queries`` test questions) and one submission
folder per case are written to a temporary folder; each case then runs the real command line,
``python -m searchtome.cli validate CASE --data DATA``, as the only child of a small wrapper
that reads the child's peak resident memory with ``resource.getrusage(RUSAGE_CHILDREN)``.
The reference is measured in the same run: the same command on a one-line submission (the
interpreter with the dataset loaded). The promise is that no case exceeds it by more than
``BOUND_MIB``. The last row is the Python API with ``keep_run=True`` (what ``leaderboard``
does), which also holds the valid rankings of the split's queries.

    nice -n 10 python benchmarks/validate_memory.py               # ~250 MB valid file
    python benchmarks/validate_memory.py --queries 5000 --quick   # a smoke run

Wall times are reported for orientation only (the machine is shared).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from searchtome.records import DOMAINS

# What docs/submissions.md promises above the reference: one line (1 MiB) parsed into Python
# objects (a list of up to ~250,000 items), the kept problems, and allocator slack.
BOUND_MIB = 256
GIB = 1 << 30

_WRAPPER = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "lines = (r.stdout + r.stderr).strip().splitlines()\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(r.returncode, peak, time.perf_counter() - t, sep='\\t')\n"
    "print('\\n'.join(lines[:1] + [x for x in lines if 'INVALID' in x or ': OK;' in x][:1]))\n"
)
_KEEP_RUN = (
    "import sys\n"
    "from searchtome.submissions import validate_submission\n"
    "r = validate_submission(sys.argv[1], sys.argv[2], keep_run=True)\n"
    "print(r.summary().splitlines()[0])\n"
)

META = {
    "system": "x",
    "description": "benchmark case",
    "models": [],
    "trained_on": [],
    "hardware": "cpu",
    "date": "2025-01-31",
    "dataset_revision": "synthetic",
    "license": "CC-BY-4.0",
    "command": "benchmarks/validate_memory.py",
}


def make_dataset(root: Path, n_queries: int, n_leaves: int = 600) -> tuple[Path, list, dict]:
    """Six books of two-level ToCs and ``n_queries`` test questions, with the real writer."""
    from searchtome.dataset.layout import BookInfo, write_dataset, write_manifest
    from searchtome.records import Book, Leaf, Query, TocNode, node_id

    books, toc, leaves = [], [], []
    per_book = n_leaves // len(DOMAINS)
    by_book: dict[str, list[str]] = {}
    for b, domain in enumerate(DOMAINS, 1):
        bid = f"book-{b}"
        books.append(BookInfo(Book(bid, domain, f"Book {b}"), n_pages=per_book))
        for c in range(1, per_book // 10 + 1):
            cid = node_id(bid, (c,))
            toc.append(TocNode(cid, bid, f"Chapter {c}", 1, c, None, False, (f"Chapter {c}",)))
            for i in range(1, 11):
                path = (f"Chapter {c}", f"Section {c}.{i}")
                lid = node_id(bid, (c, i))
                toc.append(TocNode(lid, bid, path[1], 2, c, cid, True, path))
                leaves.append(Leaf(lid, bid, path, path[1], f"Text of {lid}.", c, c))
                by_book.setdefault(bid, []).append(lid)
    queries = []
    for i in range(n_queries):
        bid = f"book-{i % len(DOMAINS) + 1}"
        gold = by_book[bid][(i * 7919) % len(by_book[bid])]
        queries.append(Query(f"q{i:07d}", bid, f"Question {i}?", gold, "test"))
    write_dataset(root, books=books, toc=toc, leaves=leaves, queries=queries)
    write_manifest(root, {"name": "validate-memory", "queries": n_queries})
    return root, queries, by_book


def folder(root: Path, name: str, file: str, chunks: Iterable[bytes], gz: bool = False) -> Path:
    """A submission folder whose predictions are ``chunks``, streamed to disk (gzip level 1)."""
    out = root / name
    out.mkdir()
    (out / "meta.json").write_text(json.dumps({**META, "system": name}))
    path = out / file
    with gzip.open(path, "wb", compresslevel=1) if gz else open(path, "wb") as fh:
        for chunk in chunks:
            fh.write(chunk)
    return out


def repeat(line: bytes, total: int) -> Iterable[bytes]:
    """``line`` repeated up to ``total`` bytes, in 16 MiB blocks (never all in memory)."""
    block = line * max(1, (16 << 20) // len(line))
    left = total
    while left >= len(block):
        yield block
        left -= len(block)
    yield line * (left // len(line))


def valid_lines(queries: list, by_book: dict, target: int) -> Iterable[bytes]:
    """One line per query, 100 ids with scores, until ``target`` bytes (a real-looking file)."""
    written = 0
    for n, q in enumerate(queries):
        pool = by_book[q.book_id]
        turned = pool[n % len(pool) :] + pool[: n % len(pool)]
        ids = [q.leaf_id, *[x for x in turned if x != q.leaf_id][:99]]
        scores = [round(30.0 - 0.123456789 * i, 9) for i in range(len(ids))]
        line = json.dumps({"query_id": q.query_id, "leaf_ids": ids, "scores": scores}) + "\n"
        written += len(line)
        if written > target:
            return
        yield line.encode()


def cases(root: Path, queries: list, by_book: dict, quick: bool) -> list[tuple[str, Path, list]]:
    """(description, folder, extra flags) for every case, reference first."""
    big = GIB if not quick else 64 << 20  # decompressed bytes of the gzip cases
    plain = (255 << 20) if not quick else 32 << 20
    q0 = queries[0]
    one = json.dumps({"query_id": q0.query_id, "leaf_ids": [q0.leaf_id]}).encode() + b"\n"
    wide_ids = ",".join(f'"x{i}"' for i in range(100_000))
    wide = f'{{"query_id": "{q0.query_id}", "leaf_ids": [{wide_ids}]}}\n'.encode()
    pad = b" " * ((1 << 20) - 200)

    def padded() -> Iterable[bytes]:
        total = 0
        for q in queries:
            line = b'{"query_id": "%s", %s"leaf_ids": ["%s"]}\n' % (
                q.query_id.encode(),
                pad,
                q.leaf_id.encode(),
            )
            total += len(line)
            if total > big:
                return
            yield line

    def unknown() -> Iterable[bytes]:
        total, i = 0, 0
        while total < plain:
            block = b"".join(
                b'{"query_id": "made-up-%09d", "leaf_ids": []}\n' % (i + k) for k in range(10_000)
            )
            i += 10_000
            total += len(block)
            yield block

    made: list[tuple[str, Path, list]] = [
        (
            "reference: one valid line (--partial)",
            folder(root, "reference", "predictions.jsonl", [one]),
            ["--partial"],
        ),
        (
            "valid ~250 MB, 100 ids + scores a line",
            folder(root, "valid", "predictions.jsonl", valid_lines(queries, by_book, 255 << 20)),
            [],
        ),
        (
            f"gzip: `[]` lines, {big >> 20:,} MiB decompressed",
            folder(root, "empty-lists-gz", "predictions.jsonl.gz", repeat(b"[]\n", big), gz=True),
            [],
        ),
        (
            f"plain: `[]` lines, {plain >> 20} MiB",
            folder(root, "empty-lists", "predictions.jsonl", repeat(b"[]\n", plain)),
            [],
        ),
        (
            f"plain: distinct unknown query ids, {plain >> 20} MiB",
            folder(root, "unknown", "predictions.jsonl", unknown()),
            [],
        ),
        (
            # 256 lines only: each takes ~0.1 s to check; memory is per line, not per file.
            "gzip: 256 lines of 1 MiB, 100,000 ids each",
            folder(root, "wide-gz", "predictions.jsonl.gz", repeat(wide, 256 * len(wide)), gz=True),
            [],
        ),
        (
            "gzip: 1 MiB space-padded valid lines",
            folder(root, "padded-gz", "predictions.jsonl.gz", padded(), gz=True),
            ["--partial"],
        ),
        (
            "gzip: 1 MiB lines nested `[[[…`",
            folder(
                root,
                "nested-gz",
                "predictions.jsonl.gz",
                repeat(b"[" * ((1 << 20) - 1) + b"\n", big),
                gz=True,
            ),
            [],
        ),
        (
            "gzip: newlines only (line cap)",
            folder(root, "newlines-gz", "predictions.jsonl.gz", repeat(b"\n" * 4096, big), gz=True),
            [],
        ),
        (
            "gzip: zeros, one endless line (bomb)",
            folder(
                root,
                "zeros-gz",
                "predictions.jsonl.gz",
                repeat(b"\0" * 4096, big + (1 << 20)),
                gz=True,
            ),
            [],
        ),
    ]
    return made


def measure(command: list[str]) -> tuple[int, float, float, str]:
    """(exit status, peak RSS MiB, wall s, first and summary line) of ``command`` as a child."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *command], capture_output=True, text=True
    )
    head, _, text = proc.stdout.partition("\n")
    rc, peak, wall = head.split("\t")
    return int(rc), int(peak) / 1024, float(wall), " | ".join(text.strip().splitlines())[:160]


def size_of(path: Path) -> tuple[int, int]:
    """(bytes on disk, bytes decompressed) of a case's predictions file."""
    (pred,) = [p for p in path.iterdir() if p.name.startswith("predictions")]
    on_disk = pred.stat().st_size
    if not pred.name.endswith(".gz"):
        return on_disk, on_disk
    total = 0
    with gzip.open(pred, "rb") as fh:
        while block := fh.read(1 << 24):
            total += len(block)
    return on_disk, total


def run(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(
        f"# validate memory: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at start"
    )
    with tempfile.TemporaryDirectory(prefix="validate-memory-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        data, queries, by_book = make_dataset(root / "data", args.queries)
        made = cases(root, queries, by_book, args.quick)
        print(f"# {args.queries:,} test queries; cases written in {time.perf_counter() - t:.0f} s")
        cli = [sys.executable, "-m", "searchtome.cli", "--no-progress", "validate"]
        rows = []
        for name, path, flags in made:
            rc, peak, wall, said = measure([*cli, str(path), "--data", str(data), *flags])
            rows.append((name, *size_of(path), rc, wall, peak, said))
        valid = root / "valid"
        rc, peak, wall, said = measure([sys.executable, "-c", _KEEP_RUN, str(valid), str(data)])
        rows.append(
            ("valid ~250 MB via the API, keep_run=True", *size_of(valid), rc, wall, peak, said)
        )
    reference = rows[0][5]
    print(
        f"\nreference peak {reference:.0f} MiB; promised bound: reference + {BOUND_MIB} MiB "
        f"= {reference + BOUND_MIB:.0f} MiB for the command line\n"
    )
    print(
        "| case | on disk | decompressed | exit | wall s | peak MiB | over reference | within bound |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, disk, plain, rc, wall, peak, _ in rows:
        over = peak - reference
        api = "keep_run" in name
        ok = "n/a (holds the run)" if api else ("yes" if over <= BOUND_MIB else "**NO**")
        print(
            f"| {name} | {disk / 1e6:,.1f} MB | {plain / 1e6:,.1f} MB | {rc} | {wall:.1f} | "
            f"{peak:.0f} | {over:+.0f} | {ok} |"
        )
    print("\nwhat each said (first line | summary):")
    for name, *_, said in rows:
        print(f"- {name}: {said}")
    load = os.getloadavg()
    print(f"\n# load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")
    failed = [r for r in rows if "keep_run" not in r[0] and r[5] - reference > BOUND_MIB]
    if failed:
        raise SystemExit(f"{len(failed)} case(s) above the promised bound")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--queries",
        type=int,
        default=87_500,
        help="test questions (default 87,500: a valid file of ~250 MB answering each)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="small hostile files (64 MiB, 32 MiB) for a smoke run"
    )
    run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
