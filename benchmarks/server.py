"""The scoring service under load: N participants uploading real 1,758-query Whole Child runs.

    python benchmarks/server.py [--participants 8] [--uploads 2] [--public data/wc-blind]

The blind release comes from ``searchtome import repro ../shared/peer/whole-child --blind test
--out data/wc-blind`` (it writes ``data/wc-blind-private`` beside it). The runs are the committed
submissions under ``submissions/`` renamed to the release's public query ids. Two set-ups, each a
real ``searchtome server run`` on 127.0.0.1: 1 web + 1 worker on SQLite, 2 web + 2 workers on a
PostgreSQL server started for the run (Debian's package). Each participant is a thread with its
own team token uploading ``--uploads`` runs one after the other, all participants at once.

Printed per set-up: uploads accepted per second (upload phase), time from the start of an upload
to its score (p50, p99), peak RSS of the server's processes together (sum of each one's peak),
and as a reference measured in the same run, the time to validate and score one run in-process:
the ratio p50 / reference is the overhead of queueing, HTTP and the database.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchtome.dataset.blind import rename_run, with_private  # noqa: E402
from searchtome.dataset.loader import load  # noqa: E402
from searchtome.service.checks import pack_scores, validate  # noqa: E402
from searchtome.service.client import Server as Client  # noqa: E402
from searchtome.submissions import Limits, read_submission, write_submission  # noqa: E402
from tests.service.helpers import Server, add_team, init_home, postgres, wait_until  # noqa: E402

SYSTEMS = ("bm25", "bm25-plain", "dpr", "hybrid", "navtree", "stair", "dsi", "zeroshot-llm")


def runs(private: Path, out: Path) -> list[Path]:
    """The committed Whole Child runs in the blind release's public ids, one folder each."""
    folders = []
    for name in SYSTEMS:
        src = ROOT / "submissions" / name
        if not (src / "meta.json").is_file():
            continue
        sub = rename_run(read_submission(src), private)
        folder = out / name
        write_submission(folder, sub.run, {**sub.meta, "system": name}, compress=True)
        folders.append(folder)
    return folders


def reference_seconds(public: Path, private: Path, folder: Path) -> float:
    full = with_private(load(public), private)
    start = time.perf_counter()
    report, error = validate(folder, full, "test", Limits())
    assert error is None, error
    pack_scores(report, full, "test")
    return time.perf_counter() - start


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            todo += [int(c) for c in task.read_text().split()]
    return out


def peak_mib(pid: int) -> float:
    total = 0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except FileNotFoundError:
            continue
        total += int(next(x.split()[1] for x in status.splitlines() if x.startswith("VmHWM")))
    return total / 1024


def unlimited(home: Path) -> None:
    """All participants share 127.0.0.1 here: lift the per-address rate limit."""
    path = home / "server.json"
    settings = json.loads(path.read_text())
    settings["requests_per_minute"] = 10**9
    path.write_text(json.dumps(settings))


def load_run(
    home: Path, folders: list[Path], participants: int, uploads: int, web: int, workers: int
) -> dict[str, float]:
    unlimited(home)
    tokens = [add_team(home, f"team{i}") for i in range(participants)]
    with Server(home, workers=workers, web=web) as server:
        started: dict[str, float] = {}
        token_of: dict[str, str] = {}
        lock = threading.Lock()
        barrier = threading.Barrier(participants)

        def participant(i: int) -> None:
            client = Client(server.url, tokens[i])
            barrier.wait()
            for k in range(uploads):
                folder = folders[(i + k) % len(folders)]
                t0 = time.perf_counter()
                reply = client.upload(folder / "predictions.jsonl.gz", folder / "meta.json")
                with lock:
                    started[reply["id"]] = t0
                    token_of[reply["id"]] = tokens[i]

        t0 = time.perf_counter()
        threads = [threading.Thread(target=participant, args=(i,)) for i in range(participants)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        upload_wall = time.perf_counter() - t0
        done: dict[str, float] = {}

        def all_scored() -> bool:
            for public_id in started:
                if public_id in done:
                    continue
                body = Client(server.url, token_of[public_id]).request(
                    "GET", f"/api/submissions/{public_id}"
                )
                if body["state"] == "scored":
                    done[public_id] = time.perf_counter()
                elif body["state"] in ("rejected", "failed"):
                    raise AssertionError(body)
            return len(done) == len(started)

        wait_until(all_scored, 1800)
        board_t = time.perf_counter()
        Client(server.url, tokens[0]).request("GET", "/api/leaderboard")
        board_s = time.perf_counter() - board_t
        latencies = sorted(done[i] - started[i] for i in started)
        memory = peak_mib(server.proc.pid)
    n = len(latencies)
    return {
        "uploads": n,
        "accepted_per_s": n / upload_wall,
        "p50_s": statistics.median(latencies),
        "p99_s": latencies[min(n - 1, round(0.99 * (n - 1)))],
        "peak_rss_mib": memory,
        "leaderboard_s": board_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=8)
    parser.add_argument("--uploads", type=int, default=2, help="uploads per participant")
    parser.add_argument("--public", type=Path, default=ROOT / "data" / "wc-blind")
    parser.add_argument("--private", type=Path, default=None)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    private = args.private or args.public.with_name(args.public.name + "-private")
    if not args.public.is_dir() or not private.is_dir():
        print(
            f"{args.public}: missing; run searchtome import repro ../shared/peer/whole-child "
            "--blind test --out data/wc-blind",
            file=sys.stderr,
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="searchtome-bench-server-"))
    results = {}
    try:
        folders = runs(private, work / "runs")
        reference = reference_seconds(args.public, private, folders[0])
        limit = str(args.uploads + 1)
        home = work / "sqlite"
        init_home(home, args.public, private, "--daily-limit", limit)
        results["SQLite, 1 web + 1 worker"] = load_run(
            home, folders, args.participants, args.uploads, 1, 1
        )
        if not args.no_postgres:
            with postgres() as url:
                home = work / "pg"
                init_home(home, args.public, private, "--daily-limit", limit, "--db", url)
                results["PostgreSQL, 2 web + 2 workers"] = load_run(
                    home, folders, args.participants, args.uploads, 2, 2
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()
    print(
        f"{args.participants} participants x {args.uploads} uploads of {len(folders)} real "
        f"1,758-query runs; load average {load1[0]:.1f} / {load1[1]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"reference: validate + score one run in-process: {reference:.2f} s")
    print(
        "| set-up | uploads | accepted/s | p50 to scored | p99 to scored | p50 / reference "
        "| peak RSS (all server processes) | GET /api/leaderboard |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['uploads']:.0f} | {r['accepted_per_s']:.2f} | {r['p50_s']:.2f} s "
            f"| {r['p99_s']:.2f} s | {r['p50_s'] / reference:.1f}x | {r['peak_rss_mib']:.0f} MiB "
            f"| {r['leaderboard_s']:.2f} s |"
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
