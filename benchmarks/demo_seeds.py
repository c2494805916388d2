"""How much the demo's LLM rows move with the seed: a yardstick for differences between machines.

    searchtome demo --out /tmp/demo                       # builds the dataset, runs seed 42
    python benchmarks/demo_seeds.py /tmp/demo --seeds 42 1 2 3 4 [--out /tmp/demo-seeds]

Runs the demo's trained LLM baselines (``stair``, ``dsi``) on the demo dataset's test split
with the demo's own settings (:data:`searchtome.commands.demo.PROFILES`) once per seed — the
seed sets the LoRA initialisation, the shuffling of the training questions and the dev sample —
and prints R@1, R@3, nDCG@3 and invalid@1 per seed with their mean, standard deviation and
range. ``zeroshot-llm`` is left out: greedy decoding without training has no seed.

Why it matters: bfloat16 kernels round differently between CPU families, so another machine's
training drifts apart from this one's much as a new seed does. A machine whose figures land
inside the seed range agrees with this one as far as the demo can tell. The runs are written to
``--out`` (one folder per system and seed; reruns reuse cached adapters and predictions), and
the table, with the CPU and thread facts, to ``--out/seeds.json``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from searchtome.baselines.runner import OutputOptions, RunOptions, run_baseline

from searchtome.commands.demo import PROFILES
from searchtome.dataset import load
from searchtome.hardware import cpu_facts
from searchtome.io import write_json
from searchtome.leaderboard import score_runs
from searchtome.submissions import read_submission

SYSTEMS = ("stair", "dsi")
MEASURES = ("R@1", "R@3", "nDCG@3", "Invalid@1")


def run_seeds(demo: Path, seeds: list[int], out: Path, threads: int) -> dict[str, dict]:
    """Scores (in %) per system and seed."""
    dataset = load(demo / "data")
    overrides = PROFILES["full"].baselines
    table: dict[str, dict] = {}
    for system in SYSTEMS:
        table[system] = {}
        for seed in seeds:
            folder = run_baseline(
                system,
                dataset,
                RunOptions("test", overrides={**overrides[system], "threads": threads}, seed=seed),
                OutputOptions(out=out / f"{system}-seed{seed}", depth=10, force=True),
            )
            board = score_runs(
                [read_submission(folder)], data=dataset, split="test", measures=list(MEASURES[:3])
            )
            scores = board.aggregate(board.systems[0].system)
            table[system][seed] = {m: round(100 * scores[m], 1) for m in MEASURES}
            print(system, seed, table[system][seed], flush=True)
    return table


def summary(table: dict[str, dict]) -> list[str]:
    lines = [
        "| system | seeds | " + " | ".join(f"{m} mean ± sd [min, max]" for m in MEASURES) + " |",
        "|---|---|" + "---:|" * len(MEASURES),
    ]
    for system, by_seed in table.items():
        cells = []
        for m in MEASURES:
            xs = [v[m] for v in by_seed.values()]
            sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
            cells.append(f"{statistics.mean(xs):.1f} ± {sd:.1f} [{min(xs):.1f}, {max(xs):.1f}]")
        seeds = ", ".join(str(s) for s in by_seed)
        lines.append(f"| `{system}` | {seeds} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("demo", type=Path, help="a `searchtome demo --out` folder")
    p.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2, 3, 4])
    p.add_argument("--out", type=Path, default=None, help="default: DEMO/seeds")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    out = args.out or args.demo / "seeds"
    table = run_seeds(args.demo, args.seeds, out, args.threads)
    lines = summary(table)
    print("\n".join(lines))
    write_json(
        out / "seeds.json",
        {"scores": table, "table": lines, "machine": cpu_facts(), "threads": args.threads},
    )


if __name__ == "__main__":
    main()
