"""The service's board refresh in process: its peak memory (tracemalloc) and CPU seconds.

    python benchmarks/board_memory.py [--runs 1200] [--public data/wc-blind]
    python benchmarks/board_memory.py --code /tmp/other-checkout   # the same, older code

A real SQLite server home (``server init``, 200 teams) holds ``--runs`` scored runs: copies of
the committed Whole Child runs renamed to the blind release's ids, each validated and scored
once as a worker does (``pack_scores``), spread over the teams in turn, as ``benchmarks/
server.py --stored`` adds them. The board is computed once and stored (its tests against the
top are then reused, as a worker's refresh reuses them), then :func:`cache.compute` (the
worker's refresh: the scored rows read, unpacked into runs, the board document built) is
measured: its peak traced memory (one run under tracemalloc), what the unpacked runs alone
hold (``runs_from_rows`` under tracemalloc), and its CPU seconds (the median of ``--repeat``
runs without tracing). Printed with the document's SHA-256, so two checkouts' documents can be
compared.

tracemalloc counts Python's and numpy's allocations, not the interpreter, the imports or the
allocator's slack: the peak RSS of a worker is higher (see ``benchmarks/server.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("bm25", "bm25-plain", "dpr", "hybrid", "navtree", "stair", "dsi", "zeroshot-llm")
MIB = 1 << 20
TEAMS = 200


def scored_blobs(public: Path, private: Path) -> list[tuple[str, bytes, bytes]]:
    """(system, meta.json, packed scores) of each committed run in the release's ids."""
    from searchtome.dataset.blind import rename_run, with_private
    from searchtome.dataset.loader import load
    from searchtome.service.checks import pack_scores
    from searchtome.submissions import read_submission, validate_submission, write_submission

    full = with_private(load(public), private)
    out = []
    with tempfile.TemporaryDirectory(prefix="searchtome-board-") as tmp:
        for name in SYSTEMS:
            src = ROOT / "submissions" / name
            if not (src / "meta.json").is_file():
                continue
            sub = rename_run(read_submission(src), private)
            folder = Path(tmp) / name
            write_submission(folder, sub.run, {**sub.meta, "system": name})
            report = validate_submission(folder, full, "test")
            assert report.ok, report.lines()[:3]
            meta = (folder / "meta.json").read_bytes()
            out.append((name, meta, pack_scores(report, full, "test")))
    return out


def make_home(home: Path, public: Path, private: Path, runs: int) -> None:
    """A server home whose database holds ``runs`` scored runs of ``TEAMS`` teams."""
    import sqlalchemy as sa

    from searchtome.cli import main as cli
    from searchtome.service.db import submissions, teams

    base = ["--home", str(home)]
    init = ["server", "init", *base, "--public", str(public), "--private", str(private)]
    names = [f"team{i}" for i in range(TEAMS)]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):  # the tokens
        assert cli([*init, "--no-progress"]) == 0
        assert cli(["server", "add-team", *base, *names, "--no-progress"]) == 0
    blobs = scored_blobs(public, private)
    engine = sa.create_engine(f"sqlite:///{home / 'server.db'}")
    with engine.begin() as conn:
        ids = dict(conn.execute(sa.select(teams.c.name, teams.c.id)).all())
        for k in range(runs):
            system, meta, blob = blobs[k % len(blobs)]
            at = 1.7e9 + k
            conn.execute(
                submissions.insert().values(
                    public_id=f"{k:016x}", team_id=ids[names[k % TEAMS]], system=system,
                    state="scored", meta=meta.decode(), predictions_name="predictions.jsonl",
                    created_at=at, day="2000-01-01", attempts=1, times_scored=1,
                    scored_at=at, scores=blob, counts="{}", final=False,
                )
            )  # fmt: skip
    engine.dispose()


def measure(home: Path, repeat: int) -> dict[str, float | str]:
    from searchtome.dataset.loader import load
    from searchtome.service import cache, store
    from searchtome.service.board import Scopes, runs_from_rows
    from searchtome.service.db import make_engine
    from searchtome.service.home import open_home

    opened = open_home(home)
    settings = opened.settings
    engine = make_engine(settings.db, settings.busy_timeout_ms)
    scopes = Scopes.of(load(opened.public), settings)
    cache.save(engine, cache.compute(engine, scopes, settings))  # the tests, stored for reuse
    cpu = []
    for _ in range(repeat):
        t0 = time.process_time()
        board = cache.compute(engine, scopes, settings)
        cpu.append(time.process_time() - t0)
    with engine.connect() as conn:
        rows = store.scored_rows(conn)
    tracemalloc.start()
    runs = runs_from_rows(rows)
    held = tracemalloc.get_traced_memory()[0]
    del runs
    tracemalloc.stop()
    del rows
    tracemalloc.start()
    traced = cache.compute(engine, scopes, settings)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    engine.dispose()
    assert traced.document == board.document
    return {
        "runs_held_mib": held / MIB,
        "refresh_peak_mib": peak / MIB,
        "refresh_cpu_s": statistics.median(cpu),
        "document_sha256": hashlib.sha256(board.document.encode()).hexdigest(),
        "rows": len(json.loads(board.document)["public"]["rows"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1200, help="scored runs stored (1200)")
    parser.add_argument("--repeat", type=int, default=3, help="untraced refreshes timed (3)")
    parser.add_argument("--public", type=Path, default=ROOT / "data" / "wc-blind")
    parser.add_argument("--private", type=Path, default=None)
    parser.add_argument("--code", type=Path, default=None, help="checkout whose board runs")
    args = parser.parse_args()
    sys.path.insert(0, str((args.code or ROOT).resolve()))
    os.environ["SEARCHTOME_NO_PROGRESS"] = "1"
    public = args.public.resolve()
    private = (args.private or public.with_name(public.name + "-private")).resolve()
    if not public.is_dir() or not private.is_dir():
        print(f"{public}: missing; run searchtome import repro ../shared/peer/whole-child "
              "--blind test --out data/wc-blind", file=sys.stderr)  # fmt: skip
        return 2
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="searchtome-board-home-") as tmp:
        make_home(Path(tmp) / "home", public, private, args.runs)
        result = measure(Path(tmp) / "home", args.repeat)
    load_after = os.getloadavg()
    import searchtome

    print(
        f"board refresh, {args.runs:,} scored runs ({TEAMS} teams), code "
        f"{Path(searchtome.__file__).parents[1]}; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} / {load_after[1]:.1f} / {load_after[2]:.1f} after"
    )
    print(
        f"runs held {result['runs_held_mib']:.1f} MiB, refresh peak "
        f"{result['refresh_peak_mib']:.1f} MiB (tracemalloc), refresh "
        f"{result['refresh_cpu_s']:.2f} s CPU (median of {args.repeat}), "
        f"{result['rows']} rows, document sha256 {result['document_sha256'][:16]}"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
