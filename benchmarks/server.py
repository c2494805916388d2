"""The scoring service under load: N teams uploading real 1,758-query Whole Child runs at once.

    python benchmarks/server.py [--burst 200] [--stored 1000] [--public data/wc-blind]
    python benchmarks/server.py --burst 200 --code /tmp/main-checkout   # the same, older code

The blind release comes from ``searchtome import repro ../shared/peer/whole-child --blind test
--out data/wc-blind`` (it writes ``data/wc-blind-private`` beside it). The runs are the committed
submissions under ``submissions/`` renamed to the release's public query ids, gzip-compressed.
Two set-ups, each a real ``searchtome server run`` on 127.0.0.1: 1 web + 1 worker on SQLite, 2
web + 2 workers on a PostgreSQL server started for the run (Debian's package). Each of the
``--burst`` teams is a thread with its own token: all upload one run at the same instant and,
once every upload is answered, poll their status once a second (as ``submit --wait`` does)
until it is scored.

Printed per set-up: accepted uploads per second and scored per second (from the start of the
burst; a run is scored at the worker's ``scored_at``), time to the 202 and to scored (p50,
p99), CPU seconds of the web processes per upload (from the burst's start to its last 202, no
polls yet) and per status poll (the polling phase), and of the scoring workers per job (read from /proc, so a shared machine still gives comparable
figures), peak RSS of all server processes together (the sum of each one's peak), and lost
uploads (sent but never scored: must be 0); then the PostgreSQL / SQLite ratio. A second table
gives each server process's memory: resident once its workers are live and before the burst
(idle), its peak by the end of the burst, resident once the burst is scored and polling has
ended + ``SETTLE_SECONDS`` (whether it gives memory back), and its peak and resident at the end
(after the ``--stored`` reads). After the burst,
``--stored`` scored runs are added to the database (copies of the burst's scores) and the
medians of ``GET /api/submissions/{id}`` and ``GET /`` are measured with that history, the
board refreshed first. ``--code DIR`` runs the servers from another checkout's ``searchtome``
(the "before" figures), with the same client and the same machine.

``--slow N`` runs each set-up twice, without and then with N slow clients among the honest
teams (each its own team, sending its headers and then one byte of its body every 2 s for up to
``--slow-seconds``, as ``benchmarks/slow_clients.py`` does), and prints the honest teams' p99 to
the 202 and to scored in both, and what the slow clients got back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from slow_clients import slow_client  # noqa: E402

from searchtome.dataset.blind import rename_run, with_private  # noqa: E402
from searchtome.dataset.loader import load  # noqa: E402
from searchtome.service.checks import pack_scores  # noqa: E402
from searchtome.service.client import Server as Client  # noqa: E402
from searchtome.submissions import (  # noqa: E402
    read_submission,
    validate_submission,
    write_submission,
)
from tests.service.helpers import Server, postgres, wait_until  # noqa: E402

SYSTEMS = ("bm25", "bm25-plain", "dpr", "hybrid", "navtree", "stair", "dsi", "zeroshot-llm")
CLOCK = os.sysconf("SC_CLK_TCK")
SIZES: list[int] = []
SETTLE_SECONDS = 5.0  # after the last poll, before the RSS "after the burst" is read


def runs(public: Path, private: Path, out: Path, ids: int, gz: bool) -> list[Path]:
    """The committed Whole Child runs in the blind release's public ids, one folder each, each
    ranking filled up to ``ids`` ids (the run's own first, then the book's other leaves) with
    descending scores: 100 ids make the 5.2 MB JSON-lines files of issue 39."""
    from searchtome.runs import Run

    leaves = sorted(leaf.leaf_id for leaf in load(public).leaves())
    folders = []
    for name in SYSTEMS:
        src = ROOT / "submissions" / name
        if not (src / "meta.json").is_file():
            continue
        sub = rename_run(read_submission(src), private)
        rankings, scores = {}, {}
        for qid, ranking in sub.run.rankings.items():
            seen = set(ranking)
            full = list(ranking) + [leaf for leaf in leaves if leaf not in seen]
            rankings[qid] = tuple(full[:ids])
            scores[qid] = tuple(round(1.0 - k / 1000, 4) for k in range(len(rankings[qid])))
        run = Run(name, rankings, scores)
        folder = out / name
        write_submission(folder, run, {**sub.meta, "system": name}, compress=gz)
        folders.append(folder)
        SIZES.append(next(folder.glob("predictions.*")).stat().st_size)
    return folders


def reference_cpu(public: Path, private: Path, folder: Path) -> float:
    """CPU seconds to validate and score one run in-process: the worker's floor."""
    full = with_private(load(public), private)
    start = time.process_time()
    report = validate_submission(folder, full, "test")
    assert report.ok, report.lines()[:3]
    pack_scores(report, full, "test")
    return time.process_time() - start


# -- processes -----------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except FileNotFoundError:
                continue
    return out


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK  # utime + stime


def roles(pid: int) -> dict[int, str]:
    """Each server process: ``web`` or ``worker``. Workers are forked by ``server run`` (the
    same command line); extra web processes are spawned by uvicorn (``spawn_main``)."""
    main_cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    out = {}
    for p in descendants(pid):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"resource_tracker" in cmd:
            continue
        out[p] = "worker" if p != pid and cmd == main_cmd else "web"
    return out


def cpu_by_role(pid: int) -> dict[str, float]:
    totals = {"web": 0.0, "worker": 0.0}
    for p, role in roles(pid).items():
        totals[role] += cpu_seconds(p)
    return totals


def peak_mib(pid: int) -> float:
    total = 0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except FileNotFoundError:
            continue
        total += int(next(x.split()[1] for x in status.splitlines() if x.startswith("VmHWM")))
    return total / 1024


def memory(pid: int) -> dict[int, tuple[str, float, float]]:
    """Each server process's role, resident and peak resident MiB (VmRSS, VmHWM) now."""
    out = {}
    for p, role in roles(pid).items():
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except FileNotFoundError:
            continue
        kib = {x.split(":")[0]: int(x.split()[1]) for x in lines if x.startswith("Vm")}
        out[p] = (role, kib["VmRSS"] / 1024, kib["VmHWM"] / 1024)
    return out


# -- set-up --------------------------------------------------------------------------------------


def searchtome(code: Path | None, *args: str) -> str:
    """``searchtome ARGS`` in a subprocess running ``code``'s package (or this checkout's)."""
    env = {**os.environ, "PYTHONPATH": str(code or ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "searchtome", *args, "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(code or ROOT),
    )
    if done.returncode:
        raise RuntimeError(f"searchtome {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return done.stdout


def make_home(
    code: Path | None, home: Path, public: Path, private: Path, teams: int, db: str | None
) -> list[str]:
    extra = ["--db", db] if db else []
    searchtome(code, "server", "init", "--home", str(home), "--public", str(public),
               "--private", str(private), "--daily-limit", "5", *extra)  # fmt: skip
    path = home / "server.json"
    settings = json.loads(path.read_text())
    settings["requests_per_minute"] = 10**9  # every team shares 127.0.0.1 here
    path.write_text(json.dumps(settings))
    names = [f"team{i}" for i in range(teams)]
    try:  # the bulk form, one transaction
        out = searchtome(
            code, "server", "add-team", "--home", str(home), *names, "--from", "/dev/null"
        )
        return [line.split("\t")[1] for line in out.splitlines()]
    except RuntimeError:  # an older searchtome: one team a command
        return [
            searchtome(code, "server", "add-team", "--home", str(home), n).strip() for n in names
        ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values) or [float("nan")]  # nothing accepted: the failures say why
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the burst -----------------------------------------------------------------------------------


def scored_times(db: str, ids: list[str], t0: float) -> list[float]:
    """Seconds from the burst's start to each run's ``scored_at`` (the worker's own clock)."""
    import sqlalchemy as sa

    engine = sa.create_engine(db)
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("SELECT public_id, scored_at FROM submissions WHERE state = 'scored'")
        ).all()
    engine.dispose()
    wanted = set(ids)
    return [at - t0 for public_id, at in found if public_id in wanted]


def burst(server: Server, tokens: list[str], folders: list[Path], db: str) -> dict[str, Any]:
    """Every team uploads at once; once all are accepted, each polls once a second."""
    n = len(tokens)
    to_202: dict[int, float] = {}
    ids: dict[int, str] = {}
    failures: list[str] = []
    polls = [0] * n
    start, accepted = threading.Barrier(n + 1), threading.Barrier(n + 1)

    def team(i: int) -> None:
        client = Client(server.url, tokens[i], timeout=900)
        folder = folders[i % len(folders)]
        start.wait()
        t0 = time.perf_counter()
        try:
            preds = next(folder.glob("predictions.*"))
            ids[i] = client.upload(preds, folder / "meta.json").id
            to_202[i] = time.perf_counter() - t0
        except Exception as exc:  # a lost upload, counted and shown
            failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            accepted.wait(timeout=3600)
        while i in ids:
            time.sleep(1.0)
            polls[i] += 1
            state = client.request("GET", f"/api/submissions/{ids[i]}")
            if state["state"] in ("rejected", "failed"):
                failures.append(f"{state['state']}: {state.get('error')}")
            if state["state"] in ("scored", "rejected", "failed"):
                return

    threads = [threading.Thread(target=team, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    cpu0 = cpu_by_role(server.proc.pid)
    start.wait()
    t0, t0_wall = time.perf_counter(), time.time()
    accepted.wait(timeout=3600)
    accepted_wall = time.perf_counter() - t0
    cpu1 = cpu_by_role(server.proc.pid)
    for t in threads:
        t.join(timeout=3600)
    cpu2 = cpu_by_role(server.proc.pid)
    time.sleep(SETTLE_SECONDS)
    after = memory(server.proc.pid)
    to_scored = scored_times(db, list(ids.values()), t0_wall)
    return {
        "uploads": n,
        "accepted_per_s": len(to_202) / accepted_wall,
        "scored_per_s": len(to_scored) / max(to_scored, default=float("nan")),
        "p50_202_s": percentile(list(to_202.values()), 0.5),
        "p99_202_s": percentile(list(to_202.values()), 0.99),
        "p50_scored_s": percentile(to_scored or [float("nan")], 0.5),
        "p99_scored_s": percentile(to_scored or [float("nan")], 0.99),
        "web_cpu_per_upload_s": (cpu1["web"] - cpu0["web"]) / n,
        "web_cpu_per_poll_ms": 1000 * (cpu2["web"] - cpu1["web"]) / max(1, sum(polls)),
        "worker_cpu_per_job_s": (cpu2["worker"] - cpu0["worker"]) / n,
        "peak_rss_mib": peak_mib(server.proc.pid),
        "memory_after": after,
        "lost": n - len(to_scored),
        "failures": failures[:3],
        "ids": list(ids.values()),
        "tokens": {ids[i]: tokens[i] for i in ids},
    }


# -- history -------------------------------------------------------------------------------------


def add_history(db: str, stored: int) -> None:
    """``stored`` more scored runs: copies of the stored ones' rows and uploads, new ids."""
    import secrets

    import sqlalchemy as sa

    engine = sa.create_engine(db)
    with engine.begin() as conn:
        meta = sa.MetaData()
        subs = sa.Table("submissions", meta, autoload_with=conn)
        uploads = (
            sa.Table("uploads", meta, autoload_with=conn)
            if sa.inspect(conn).has_table("uploads")
            else None
        )
        rows = [
            dict(r._mapping) for r in conn.execute(sa.select(subs).where(subs.c.state == "scored"))
        ]
        blobs = {}
        if uploads is not None:
            blobs = {r.submission_id: dict(r._mapping) for r in conn.execute(sa.select(uploads))}
        for k in range(stored):
            row = dict(rows[k % len(rows)])
            source = row.pop("id")
            row.update(public_id=secrets.token_hex(8), final=False, day="2000-01-01")
            new_id = conn.execute(subs.insert().values(**row)).inserted_primary_key[0]
            if uploads is not None:
                conn.execute(uploads.insert().values({**blobs[source], "submission_id": new_id}))
    engine.dispose()


def median_ms(call: Callable[[], Any], times: int = 30) -> float:
    call()  # warm
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def reads(server: Server, result: dict[str, Any], timeout: float) -> dict[str, float]:
    """Medians of a status poll and of the page, once the board holds the history."""
    public_id = result["ids"][0]
    token = result["tokens"][public_id]
    client = Client(server.url, token)

    def board_current() -> bool:
        with urllib.request.urlopen(server.url + "/api/leaderboard", timeout=600) as r:
            return len(json.loads(r.read())["public"]["rows"]) >= result["expected_rows"]

    t0 = time.perf_counter()
    wait_until(board_current, timeout)
    settled = time.perf_counter() - t0

    def page() -> None:
        with urllib.request.urlopen(server.url + "/", timeout=600) as r:
            r.read()

    return {
        "board_ready_s": settled,
        "status_ms": median_ms(lambda: client.request("GET", f"/api/submissions/{public_id}")),
        "page_ms": median_ms(page),
    }


# -- main ----------------------------------------------------------------------------------------


def setup_run(
    args: argparse.Namespace, work: Path, folders: list[Path], name: str, db: str | None,
    web: int, workers: int, slow: int = 0,
) -> dict[str, Any]:  # fmt: skip
    home = work / name
    tokens = make_home(args.code, home, args.public, args.private, args.burst + slow, db)
    honest, slow_tokens = tokens[: args.burst], tokens[args.burst :]
    env = {"PYTHONPATH": str(args.code or ROOT)}
    os.chdir(work)  # `python -m` puts the working folder first on the path: not a checkout
    url = db or f"sqlite:///{home / 'server.db'}"
    replies: list[str] = []
    with Server(home, workers=workers, web=web, env=env) as server:
        drip = gz_copy(folders[0], work / "slow-run")
        slow_threads = [
            threading.Thread(
                target=slow_client,
                args=(server.port, token, drip, args.slow_seconds, replies),
                daemon=True,
            )
            for token in slow_tokens
        ]
        for t in slow_threads:
            t.start()
        time.sleep(1.0 if slow_threads else 0)  # the slow ones take their slots first
        wait_until(lambda: live_workers(server) >= workers, 120)  # the release loaded
        idle = memory(server.proc.pid)
        result = burst(server, honest, folders, url)
        for t in slow_threads:
            t.join(timeout=args.slow_seconds + 600)
        result["slow_replies"] = sorted(replies)
        if args.stored and not slow:
            add_history(url, args.stored)
            result["expected_rows"] = args.burst + args.stored
            result.update(reads(server, result, timeout=args.board_timeout))
        result["peak_rss_mib"] = peak_mib(server.proc.pid)
        result["processes"] = processes(idle, result.pop("memory_after"), memory(server.proc.pid))
    return result


def live_workers(server: Server) -> int:
    with urllib.request.urlopen(server.url + "/api/health", timeout=60) as r:
        return int(json.loads(r.read())["workers"]["live"])


def processes(
    idle: dict[int, tuple[str, float, float]],
    after: dict[int, tuple[str, float, float]],
    end: dict[int, tuple[str, float, float]],
) -> list[dict[str, Any]]:
    """Per server process (by role, in pid order): resident MiB idle before the burst, its peak
    by the end of the burst, resident after the burst (polling over + SETTLE_SECONDS), its peak
    by the end (the reads with the history included) and resident then."""
    out = []
    for pid in sorted(idle):
        if pid not in after or pid not in end:  # a replaced worker: its figures went with it
            continue
        role = idle[pid][0]
        out.append(
            {
                "process": f"{role} {sum(1 for p in out if p['role'] == role) + 1}",
                "role": role,
                "idle_mib": idle[pid][1],
                "burst_peak_mib": after[pid][2],
                "after_burst_mib": after[pid][1],
                "peak_mib": end[pid][2],
                "end_mib": end[pid][1],
            }
        )
    return out


def gz_copy(folder: Path, out: Path) -> Path:
    """``folder``'s run as ``predictions.jsonl.gz`` + ``meta.json`` (what a slow client drips)."""
    import gzip

    out.mkdir(parents=True, exist_ok=True)
    preds = next(folder.glob("predictions.*"))
    data = preds.read_bytes()
    (out / "predictions.jsonl.gz").write_bytes(
        data if preds.suffix == ".gz" else gzip.compress(data, mtime=0)
    )
    shutil.copyfile(folder / "meta.json", out / "meta.json")
    return out


def table(results: dict[str, dict[str, Any]], stored: int) -> list[str]:
    stored += next(iter(results.values()))["uploads"] if results else 0  # the burst's own
    lines = [
        "| set-up | uploads | accepted/s | scored/s | to 202 p50 / p99 | to scored p50 / p99 "
        "| web CPU / upload | web CPU / poll | worker CPU / job | peak RSS, all | lost "
        f"| GET /api/submissions/ID, {stored:,} runs | GET /, {stored:,} runs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['uploads']} | {r['accepted_per_s']:.2f} | {r['scored_per_s']:.2f} "
            f"| {r['p50_202_s']:.1f} / {r['p99_202_s']:.1f} s "
            f"| {r['p50_scored_s']:.1f} / {r['p99_scored_s']:.1f} s "
            f"| {r['web_cpu_per_upload_s']:.3f} s | {r['web_cpu_per_poll_ms']:.1f} ms "
            f"| {r['worker_cpu_per_job_s']:.3f} s "
            f"| {r['peak_rss_mib']:.0f} MiB | {r['lost']} "
            f"| {r.get('status_ms', float('nan')):.1f} ms | {r.get('page_ms', float('nan')):.1f} ms |"
        )
    return lines


def memory_table(results: dict[str, dict[str, Any]], stored: int) -> list[str]:
    lines = [
        "| set-up | process | RSS idle | peak, burst | RSS after the burst "
        f"| peak, with {stored:,} runs | RSS at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for p in r["processes"]:
            lines.append(
                f"| {name} | {p['process']} | {p['idle_mib']:.0f} MiB "
                f"| {p['burst_peak_mib']:.0f} MiB | {p['after_burst_mib']:.0f} MiB "
                f"| {p['peak_mib']:.0f} MiB | {p['end_mib']:.0f} MiB |"
            )
    return lines


def main() -> int:
    os.environ["SEARCHTOME_NO_PROGRESS"] = "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=200, help="teams uploading at once (200)")
    parser.add_argument("--stored", type=int, default=0, help="runs added before the reads (0)")
    parser.add_argument("--public", type=Path, default=ROOT / "data" / "wc-blind")
    parser.add_argument("--private", type=Path, default=None)
    parser.add_argument("--ids", type=int, default=100, help="ids per ranking (100)")
    parser.add_argument("--gzip", action="store_true", help="upload .jsonl.gz (default: .jsonl)")
    parser.add_argument("--code", type=Path, default=None, help="checkout whose server runs")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--board-timeout", type=float, default=1800.0)
    parser.add_argument("--slow", type=int, default=0, help="slow clients among the teams (0)")
    parser.add_argument("--slow-seconds", type=float, default=40.0, help="a slow body's drip")
    args = parser.parse_args()
    args.public = args.public.resolve()
    args.private = (args.private or args.public.with_name(args.public.name + "-private")).resolve()
    args.code = args.code.resolve() if args.code else None
    if not args.public.is_dir() or not args.private.is_dir():
        print(
            f"{args.public}: missing; run searchtome import repro ../shared/peer/whole-child "
            "--blind test --out data/wc-blind",
            file=sys.stderr,
        )
        return 2
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="searchtome-bench-server-"))
    results: dict[str, dict[str, Any]] = {}
    try:
        folders = runs(args.public, args.private, work / "runs", args.ids, args.gzip)
        reference = reference_cpu(args.public, args.private, folders[0])
        with_slow = [0, args.slow] if args.slow else [0]
        for slow in with_slow if not args.no_sqlite else []:
            label = f", {slow} slow clients" if slow else ""
            results[f"SQLite, 1 web + 1 worker{label}"] = setup_run(
                args, work, folders, f"sqlite{slow}", None, 1, 1, slow
            )
        for slow in with_slow if not args.no_postgres else []:
            with postgres() as url:
                label = f", {slow} slow clients" if slow else ""
                results[f"PostgreSQL, 2 web + 2 workers{label}"] = setup_run(
                    args, work, folders, f"pg{slow}", url, 2, 2, slow
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    code = args.code or ROOT
    sizes = f"{min(SIZES) / 1e6:.1f}-{max(SIZES) / 1e6:.1f} MB"
    print(
        f"{args.burst} teams x 1 upload of {len(folders)} real 1,758-query runs "
        f"({args.ids} ids, {sizes}) at once, server "
        f"code {code}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} / "
        f"{load_after[1]:.1f} / {load_after[2]:.1f} after, on {os.cpu_count()} CPUs"
    )
    print(f"reference: validate + score one run in-process: {reference:.2f} s CPU")
    print("\n".join(table(results, args.stored)))
    runs_at_end = args.stored + args.burst if args.stored else args.burst
    print("\n".join(memory_table(results, runs_at_end)))
    plain = {k: r for k, r in results.items() if "slow clients" not in k}
    for name, r in results.items():
        if "slow clients" in name:
            base = plain[name.split(", ")[0] + ", " + name.split(", ")[1]]
            print(
                f"{name}: honest p99 to 202 {r['p99_202_s']:.1f} s (without: "
                f"{base['p99_202_s']:.1f} s), to scored {r['p99_scored_s']:.1f} s (without: "
                f"{base['p99_scored_s']:.1f} s); slow clients got {', '.join(r['slow_replies'])}"
            )
    if len(plain) == 2:
        sq, pg = plain.values()
        print(
            f"PostgreSQL 2+2 / SQLite 1+1: scored/s {pg['scored_per_s'] / sq['scored_per_s']:.2f}x, "
            f"p99 to scored {pg['p99_scored_s'] / sq['p99_scored_s']:.2f}x"
        )
    for name, r in results.items():
        for failure in r["failures"]:
            print(f"{name}: lost upload: {failure}")
    print(json.dumps({k: {m: v for m, v in r.items() if m not in ("ids", "tokens")}
                      for k, r in results.items()}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
