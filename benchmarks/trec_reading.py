"""Reading TREC runs and scoring them from the command line: searchtome vs its peers, one run.

    python benchmarks/trec_reading.py [--queries 20000] [--depth 100] [--repeats 3]
        [--startup-repeats 21] [--rows read,score,start-up,help,top-help] [--skip ranx]

A synthetic run (``--queries`` × ``--depth`` lines, ids drawn from 500 leaves, distinct float
scores) and its qrels (one gold leaf per query) are written to a temporary folder. Every
measurement is a fresh child process, interleaved over ``--repeats`` rounds; the figure is the
child's own CPU time (user + system, from ``wait4``) and peak RSS, the median over rounds.

* **read**: the run file parsed into memory: ``searchtome`` (``read_predictions``, the
  scorer's reader: validation included), ``pytrec_eval.parse_run``, ``ranx.Run.from_file``
  and ``ir_measures.read_trec_run`` (materialised). Each child subtracts the CPU time it spent
  before reading (interpreter and imports), so only the parse counts.
* **score**: the whole process, ``searchtome score RUN --qrels QRELS`` against the
  ``ir_measures`` CLI and a pytrec_eval script (parse both files, evaluate, print the means),
  same five measures.
* **start-up**: the same three commands on a one-query run: what a user waits for before any
  work (interpreter, imports, argument parsing).
* **help**: ``searchtome score --help`` against ``ir_measures --help``: start-up without scoring.
* **top-help**: ``searchtome --help`` (every command listed, none imported) against
  ``ir_measures --help``.

Every child runs with its bytecode cached in a folder of its own (``PYTHONPYCACHEPREFIX``) and a
first, untimed round fills it: an installed package has its ``.pyc`` files (pip compiles them at
install), and with ``PYTHONDONTWRITEBYTECODE`` set (as on the shared machines) an editable
checkout would otherwise compile every searchtome module from source at each start (about 25 ms
of CPU), while the peers read theirs from site-packages.

It prints a table and, per row, searchtome's ratio to each peer (above 1 = slower). Peers that
are not installed are left out (ranx is in the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURES = ("R@1", "R@3", "R@5", "nDCG@3", "RR@10")
PYTREC_MEASURES = {"recall_1", "recall_3", "recall_5", "ndcg_cut_3", "recip_rank"}

# Each reader runs as ``python -c`` with the run path as argv[1]; it prints a JSON line.
_READ_PRELUDE = "import json, resource, sys, time\n"
_READ_CODE = {
    "searchtome": (
        "from searchtome.submissions.reader import read_predictions\n"
        "t0 = time.process_time()\n"
        "p = read_predictions(sys.argv[1], 'trec')\n"
        "assert not p.errors, p.errors[:3]\n"
        "n = sum(len(r) for r in p.run.rankings.values())\n"
    ),
    "pytrec_eval": (
        "import pytrec_eval\n"
        "t0 = time.process_time()\n"
        "with open(sys.argv[1]) as f:\n"
        "    run = pytrec_eval.parse_run(f)\n"
        "n = sum(len(r) for r in run.values())\n"
    ),
    "ranx": (
        "from ranx import Run\n"
        "t0 = time.process_time()\n"
        "run = Run.from_file(sys.argv[1], kind='trec')\n"
        "n = sum(len(r) for r in run.to_dict().values())\n"
    ),
    "ir_measures": (
        "import ir_measures\n"
        "t0 = time.process_time()\n"
        "n = len(list(ir_measures.read_trec_run(sys.argv[1])))\n"
    ),
}
_READ_END = (
    "print(json.dumps({'cpu': time.process_time() - t0, 'n': n, "
    "'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
)

_PYTREC_SCRIPT = """
import sys, pytrec_eval
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
measures = {MEASURES}
per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
for m in sorted(next(iter(per_query.values()))):
    print(m, sum(q[m] for q in per_query.values()) / len(qrels))
"""


def write_inputs(folder: Path, n_queries: int, depth: int, seed: int) -> tuple[Path, Path]:
    """A TREC run and its qrels: one gold leaf per query, ``depth`` scored leaves per query."""
    rng = random.Random(seed)
    leaves = [f"book/{i // 25 + 1}.{i % 25 + 1}" for i in range(500)]
    run, qrels = folder / f"run-{n_queries}.trec", folder / f"qrels-{n_queries}.txt"
    with run.open("w") as r, qrels.open("w") as q:
        for i in range(n_queries):
            qid = f"q{i:06d}"
            docs = rng.sample(leaves, depth)
            q.write(f"{qid} 0 {rng.choice(docs) if rng.random() < 0.7 else leaves[0]} 1\n")
            r.writelines(
                f"{qid} Q0 {doc} {rank} {1.0 / rank + rng.random() * 1e-9:.12f} bench\n"
                for rank, doc in enumerate(docs, 1)
            )
    return run, qrels


def child_env(folder: Path) -> dict[str, str]:
    """The children's environment: bytecode cached under ``folder`` for every tool alike."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def timed(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run ``cmd``: its own CPU seconds (user + system, from ``wait4``), peak RSS (MiB), stdout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"trec_reading: {' '.join(cmd[:4])} failed: {err.strip()[-1500:]}")
    return {
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
        "out": out,  # type: ignore[dict-item]
    }


def readers(skip: set[str]) -> list[str]:
    names = ["searchtome", "pytrec_eval", "ranx", "ir_measures"]
    return [n for n in names if n == "searchtome" or (_importable(n) and n not in skip)]


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def scorers(run: Path, qrels: Path, script: Path) -> dict[str, list[str]]:
    """The whole-process commands, by tool."""
    py = sys.executable
    out = {
        "searchtome": [py, "-m", "searchtome.cli", "score", str(run), "--qrels", str(qrels)],
    }
    if _importable("ir_measures"):
        out["ir_measures"] = [py, "-m", "ir_measures", str(qrels), str(run), *MEASURES]
    if _importable("pytrec_eval"):
        out["pytrec_eval script"] = [py, str(script), str(qrels), str(run)]
    return out


def helpers(*words: str) -> dict[str, list[str]]:
    """``--help`` of each command line tool (``searchtome WORDS --help``): start-up and
    argument parsing, no scoring."""
    py = sys.executable
    out = {"searchtome": [py, "-m", "searchtome.cli", *words, "--help"]}
    if _importable("ir_measures"):
        out["ir_measures"] = [py, "-m", "ir_measures", "--help"]
    return out


# The --help rows and the searchtome words before --help.
HELP_ROWS = {"help": ("score",), "top-help": ()}


def measure(args: argparse.Namespace, folder: Path) -> dict[str, dict[str, list[dict]]]:
    """Every row's measurements, interleaved round by round."""
    run, qrels = write_inputs(folder, args.queries, args.depth, seed=1)
    tiny_run, tiny_qrels = write_inputs(folder, 1, 5, seed=2)
    script = folder / "pytrec_score.py"
    script.write_text(_PYTREC_SCRIPT.replace("{MEASURES}", repr(PYTREC_MEASURES)))
    wanted = args.rows.split(",")
    skip = set(args.skip.split(","))
    rows: dict[str, dict[str, list[dict]]] = {row: {} for row in wanted}
    env = child_env(folder)
    helps = [*helpers("score").values(), *helpers().values()]
    for cmd in [*scorers(tiny_run, tiny_qrels, script).values(), *helps]:
        timed(cmd, env)  # untimed: fills the bytecode cache (see the module's docstring)
    for round_no in range(args.repeats):
        print(f"round {round_no + 1} of {args.repeats} ...", flush=True)
        for name in readers(skip) if "read" in wanted else []:
            code = _READ_PRELUDE + _READ_CODE[name] + _READ_END
            res = timed([sys.executable, "-c", code, str(run)], env)
            inner = json.loads(str(res["out"]).strip().splitlines()[-1])
            assert inner["n"] == args.queries * args.depth, (name, inner["n"])
            rows["read"].setdefault(name, []).append({"cpu": inner["cpu"], "rss": res["rss"]})
        for name, cmd in scorers(run, qrels, script).items() if "score" in wanted else ():
            rows["score"].setdefault(name, []).append(timed(cmd, env))
    # A start is ~0.2 s and noisy on a shared machine: more rounds, still interleaved.
    print(f"start-up: {args.startup_repeats} rounds ...", flush=True)
    for _ in range(args.startup_repeats):
        for name, cmd in scorers(tiny_run, tiny_qrels, script).items():
            if "start-up" in wanted:
                rows["start-up"].setdefault(name, []).append(timed(cmd, env))
        for row, words in [(r, w) for r, w in HELP_ROWS.items() if r in wanted]:
            for name, cmd in helpers(*words).items():
                rows[row].setdefault(name, []).append(timed(cmd, env))
    return rows


def report(rows: dict[str, dict[str, list[dict]]]) -> None:
    print(f"\n{'row':<10} {'tool':<20} {'CPU s':>8} {'peak MiB':>9}   searchtome ÷ tool")
    for row, tools in rows.items():
        med = {
            t: (statistics.median(m["cpu"] for m in ms), statistics.median(m["rss"] for m in ms))
            for t, ms in tools.items()
        }
        ours_cpu, ours_rss = med["searchtome"]
        for tool, (cpu, rss) in med.items():
            ratio = (
                ""
                if tool == "searchtome"
                else f"CPU {ours_cpu / cpu:.2f}, RSS {ours_rss / rss:.2f}"
            )
            print(f"{row:<10} {tool:<20} {cpu:>8.3f} {rss:>9.1f}   {ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--startup-repeats", type=int, default=21, help="rounds of the short rows")
    parser.add_argument(
        "--rows", default="read,score,start-up,help,top-help", help="which rows, comma-separated"
    )
    parser.add_argument("--skip", default="", help="peers to leave out, e.g. ranx (minutes)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="searchtome-trec-bench-"))
    try:
        print(f"load average {os.getloadavg()[0]:.2f} before; CPU {_cpu_model()}", flush=True)
        rows = measure(args, folder)
        report(rows)
        print(f"load average {os.getloadavg()[0]:.2f} after")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
