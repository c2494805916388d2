"""Honest teams' time to 202 with slow clients among them, with and without the upload guards.

    python benchmarks/slow_clients.py [--honest 8] [--uploads 2] [--slow 4] [--public data/wc-blind]

The blind release comes from ``searchtome import repro ../shared/peer/whole-child --blind test
--out data/wc-blind``; the honest runs are committed submissions renamed to its public ids. Each
scenario is a fresh ``searchtome server run`` on SQLite (1 web, no worker: only acceptance is
measured) with ``--honest`` teams, each a thread uploading ``--uploads`` real 1,758-query runs
one after the other, all teams at once. A slow client sends its headers, then one byte of its
body every 2 s for up to ``--slow-seconds``, then the rest. Scenarios:

* no slow clients (the reference);
* ``--slow`` slow uploads from one team, default guards (2 uploads per team of 4 slots, 8 KiB/s
  after 10 s);
* ``--slow`` slow uploads from as many teams, default guards (while a body held an upload slot
  as it arrived, they held every slot until the minimum rate cut them; a body is now received
  before its upload takes a slot);
* ``--slow`` slow uploads from one team with the guards switched off in ``server.json`` (one
  team may take every slot, no minimum rate): how the server behaved before them, when a body
  held its slot as it arrived.

Printed: each scenario's honest uploads, their p50 and p99 time to 202, the slowest, and what
the slow clients got back; the load average beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchtome.dataset.blind import rename_run  # noqa: E402
from searchtome.service.client import Server as Client  # noqa: E402
from searchtome.submissions import read_submission, write_submission  # noqa: E402
from tests.service.helpers import Server, add_team, init_home, multipart  # noqa: E402

SYSTEMS = ("bm25", "bm25-plain", "dpr", "hybrid")
DRIP_SECONDS = 2.0


def honest_runs(private: Path, out: Path) -> list[Path]:
    folders = []
    for name in SYSTEMS:
        src = ROOT / "submissions" / name
        if (src / "meta.json").is_file():
            sub = rename_run(read_submission(src), private)
            write_submission(out / name, sub.run, {**sub.meta, "system": name}, compress=True)
            folders.append(out / name)
    return folders


def slow_client(port: int, token: str, folder: Path, seconds: float, out: list[str]) -> None:
    """Drip the body, one byte per DRIP_SECONDS, until cut or ``seconds`` pass; then the rest."""
    preds = (folder / "predictions.jsonl.gz").read_bytes()
    body, ctype = multipart(
        {"meta": ("meta.json", (folder / "meta.json").read_bytes()), "predictions": ("p.gz", preds)}
    )
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(
            f"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )
        sent, end = 0, time.monotonic() + seconds
        sock.setblocking(False)
        while time.monotonic() < end:
            try:
                if sock.recv(1, socket.MSG_PEEK):
                    break  # the server answered (refused or cut)
            except BlockingIOError:
                pass
            try:
                sock.sendall(body[sent : sent + 1])
            except OSError:
                break
            sent += 1
            time.sleep(DRIP_SECONDS)
        sock.setblocking(True)
        reply = ""
        with contextlib.suppress(OSError):  # a cut connection may be closed or reset
            sock.sendall(body[sent:])
        with contextlib.suppress(OSError):
            reply = sock.recv(65536).split(b"\r\n", 1)[0].decode(errors="replace")
    out.append(reply.split(" ", 2)[1] if reply.count(" ") >= 2 else "closed")


def scenario(
    home: Path, folders: list[Path], args: argparse.Namespace, slow_teams: int, guards: bool
) -> dict[str, object]:
    path = home / "server.json"
    settings = json.loads(path.read_text())
    settings["requests_per_minute"] = 10**9  # every client is 127.0.0.1 here
    if not guards:
        settings.update(team_uploads=settings["upload_slots"], upload_grace=1e9, upload_timeout=1e9)
    path.write_text(json.dumps(settings))
    honest = [add_team(home, f"honest{i}") for i in range(args.honest)]
    slow = [add_team(home, f"slow{i}") for i in range(slow_teams)]
    times: list[float] = []
    failures: list[str] = []
    slow_replies: list[str] = []
    lock = threading.Lock()
    with Server(home, workers=0) as server:
        slow_threads = [
            threading.Thread(
                target=slow_client,
                args=(
                    server.port,
                    slow[i % slow_teams],
                    folders[0],
                    args.slow_seconds,
                    slow_replies,
                ),
            )
            for i in range(args.slow if slow_teams else 0)
        ]
        for t in slow_threads:
            t.start()
        time.sleep(1.0 if slow_threads else 0)  # let the slow ones take their slots first

        def team(i: int) -> None:
            client = Client(server.url, honest[i])
            for k in range(args.uploads):
                folder = folders[(i + k) % len(folders)]
                t0 = time.perf_counter()
                try:
                    client.upload(folder / "predictions.jsonl.gz", folder / "meta.json")
                except Exception as exc:  # counted and printed, never hidden
                    with lock:
                        failures.append(str(exc))
                    continue
                with lock:
                    times.append(time.perf_counter() - t0)

        threads = [threading.Thread(target=team, args=(i,)) for i in range(args.honest)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for t in slow_threads:
            t.join()
    times.sort()
    n = len(times)
    return {
        "accepted": n,
        "failed": len(failures),
        "p50": statistics.median(times) if times else float("nan"),
        "p99": times[min(n - 1, round(0.99 * (n - 1)))] if times else float("nan"),
        "max": times[-1] if times else float("nan"),
        "slow replies": ", ".join(sorted(slow_replies)) or "-",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--honest", type=int, default=8, help="honest teams")
    parser.add_argument("--uploads", type=int, default=2, help="uploads per honest team")
    parser.add_argument("--slow", type=int, default=4, help="slow uploads")
    parser.add_argument("--slow-seconds", type=float, default=40.0)
    parser.add_argument("--public", type=Path, default=ROOT / "data" / "wc-blind")
    args = parser.parse_args()
    private = args.public.with_name(args.public.name + "-private")
    if not args.public.is_dir() or not private.is_dir():
        print(f"{args.public}: missing; see this file's docstring", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="searchtome-bench-slow-"))
    rows = {}
    before = os.getloadavg()
    try:
        folders = honest_runs(private, work / "runs")
        plans = {
            "no slow clients": (0, True),
            f"{args.slow} slow uploads, 1 team, guards on": (1, True),
            f"{args.slow} slow uploads, {args.slow} teams, guards on": (args.slow, True),
            f"{args.slow} slow uploads, 1 team, guards off": (1, False),
        }
        for i, (name, (teams, guards)) in enumerate(plans.items()):
            home = work / f"srv{i}"
            init_home(home, args.public, private, "--daily-limit", str(args.uploads + args.slow))
            rows[name] = scenario(home, folders, args, teams, guards)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    after = os.getloadavg()
    print(
        f"{args.honest} honest teams x {args.uploads} uploads of real 1,758-query runs; SQLite, "
        f"1 web, no worker; load average {before[0]:.1f} before, {after[0]:.1f} after "
        f"(1 min) on {os.cpu_count()} CPUs"
    )
    print(
        "| scenario | honest accepted | failed | p50 to 202 | p99 to 202 | slowest | slow clients got |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['accepted']} | {r['failed']} | {r['p50']:.2f} s | {r['p99']:.2f} s "
            f"| {r['max']:.2f} s | {r['slow replies']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
