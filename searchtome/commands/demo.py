"""``searchtome demo``: the whole pipeline, offline, on the project's own sample books.

render the sample books → ``build --endpoint local`` (SmolLM2-135M writes the questions) → every
baseline with CPU-sized settings → ``leaderboard``. Everything lands in one folder::

    OUT/pdfs/            the rendered sample books
    OUT/data/            the dataset (parquet + card + manifest)
    OUT/submissions/     one submission per baseline
    OUT/leaderboard/     leaderboard.md, leaderboard.json, index.html

A second run reuses every cache: PDFs are re-rendered only when their sources change, LLM replies
come from the reply cache (no server starts), a baseline whose submission was produced from the
same dataset, configuration and searchtome version is not run again, and trained adapters and
embeddings are cached under ``$SEARCHTOME_HOME``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Profile:
    """How big the demo is: which books, how many questions, which baselines with what settings."""

    name: str
    books: tuple[str, ...] | None
    questions_per_unit: int
    max_tokens: int
    # baseline name → config overrides (CPU-sized; the baselines' own defaults otherwise)
    baselines: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


# The generative baselines' CPU defaults are sized for a 1,000-question book in about an hour;
# the demo's books are small, so a few epochs on few dev questions show the pipeline in minutes.
# Three beams, not the default ten: free-decoding DSI on a barely trained 135M model writes
# long non-answers, and ten beams of up to 64 tokens each made the DSI step 8x slower. The sample
# books' leaf lines are under 20 tokens, so 32 output tokens cut no real answer.
_BEAMS = {"num_beams": 3}
_LLM_FULL: dict[str, dict[str, Any]] = {
    "dsi": {
        "max_epochs": 3,
        "patience": 1,
        "dev_max_queries": 30,
        **_BEAMS,
        "max_output_tokens": 32,
    },
    # stair-fast's frozen ToC (baselines/configs/stair-fast.toml): the paper setting's adapted
    # ToC costs about twice as much per step.
    "stair": {"adapt_toc": False, "max_epochs": 3, "patience": 1, "dev_max_queries": 30, **_BEAMS},
    "zeroshot-llm": {"max_new_tokens": 64},
}
_LLM_QUICK: dict[str, dict[str, Any]] = {
    "dsi": {"max_epochs": 1, "dev_max_queries": 10, **_BEAMS, "max_output_tokens": 32},
    "stair": {"adapt_toc": False, "max_epochs": 1, "dev_max_queries": 10, **_BEAMS},
    "zeroshot-llm": {"max_new_tokens": 48},
}

PROFILES = {
    "full": Profile(
        name="full",
        books=None,
        questions_per_unit=3,
        max_tokens=64,
        baselines={"bm25": {}, "dpr": {}, "navtree": {}, "toc-navtree": {}, **_LLM_FULL},
    ),
    "quick": Profile(
        name="quick",
        books=("nursing-primer",),
        questions_per_unit=1,
        max_tokens=48,
        baselines={"bm25": {}, "dpr": {}, "navtree": {}, "toc-navtree": {}, **_LLM_QUICK},
    ),
}


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _up_to_date(submission: Path, config: Mapping[str, Any], dataset_revision: str) -> bool:
    """True when ``submission`` was produced from this dataset revision, config and version."""
    from searchtome.submissions.meta import read_run_meta
    from searchtome.version import __version__

    meta_path = submission / "meta.json"
    if not meta_path.is_file():
        return False
    meta = read_run_meta(meta_path)
    return (
        meta.dataset_revision == dataset_revision
        and (meta.versions or {}).get("searchtome") == __version__
        and (meta.info.overrides or {}) == dict(config)
    )


def run_demo(out: Path, *, quick: bool = False, profile: Profile | None = None) -> Path:
    """Run the demo into ``out``; returns the path of ``index.html``."""
    from searchtome.baselines.runner import (
        OutputOptions,
        RunOptions,
        dataset_facts,
        portable_path,
        run_baseline,
    )
    from searchtome.config import make_config
    from searchtome.dataset.loader import load
    from searchtome.generate.options import BuildOptions
    from searchtome.generate.pipeline import build
    from searchtome.sample.books import render_sample, sample_dir

    profile = profile or PROFILES["quick" if quick else "full"]
    out = Path(out)
    start = time.monotonic()
    times: dict[str, float] = {}

    _say(f"[1/4] rendering the sample books → {out / 'pdfs'}")
    t = time.monotonic()
    pdfs = render_sample(out / "pdfs")  # all of them: the catalog file names every book
    times["render"] = time.monotonic() - t

    _say(
        "[2/4] building the dataset with the local SmolLM2-135M endpoint (weak questions, real pipeline)"
    )
    t = time.monotonic()
    # The profile's settings are the explicit layer over the build defaults.
    options = {
        "out": out / "data",
        "pdf_dir": next(iter(pdfs.values())).parent,
        "catalog": sample_dir() / "catalog.toml",
        "books": profile.books,
        "endpoint": "local",
        "questions_per_unit": profile.questions_per_unit,
        "max_tokens": profile.max_tokens,
        "name": f"searchtome-sample-{profile.name}",
    }
    summary = build(make_config(BuildOptions, None, options, typed=True))
    _say(summary.render())
    times["build"] = time.monotonic() - t
    dataset = load(out / "data")

    revision = dataset_facts(dataset)["revision"]
    shown_out = portable_path(out, "<OUT>")
    _say(f"[3/4] running {len(profile.baselines)} baselines → {out / 'submissions'}")
    for i, (name, overrides) in enumerate(profile.baselines.items(), 1):
        target = out / "submissions" / name
        t = time.monotonic()
        if _up_to_date(target, overrides, revision):
            _say(f"  ({i}/{len(profile.baselines)}) {name}: up to date, reused")
            continue
        _say(f"  ({i}/{len(profile.baselines)}) {name} ...")
        command = f"searchtome demo{' --quick' if quick else ''} --out {shown_out}"
        run_baseline(
            name,
            dataset,
            RunOptions("test", overrides=dict(overrides)),
            # The demo's own folder: a stale run in it is the demo's to replace.
            OutputOptions(out=target, command=command, force=True),
        )
        times[name] = time.monotonic() - t
        _say(f"  ({i}/{len(profile.baselines)}) {name}: {times[name]:.0f} s")

    _say(f"[4/4] scoring and rendering the leaderboard → {out / 'leaderboard'}")
    from searchtome.leaderboard import build_leaderboard, print_main_table

    t = time.monotonic()
    result = build_leaderboard(dataset, out / "submissions", out / "leaderboard")
    times["leaderboard"] = time.monotonic() - t
    print()
    print_main_table(result)
    from searchtome.leaderboard.costs import cost_text

    print("\nCost per baseline (training and prediction apart; peaks are each run's own):")
    print(cost_text([(e.system, e.meta) for e in result.entries]), end="")
    index = out / "leaderboard" / "index.html"
    total = time.monotonic() - start
    print(f"\nleaderboard: {index.resolve()}")
    print(
        f"demo finished in {total:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in times.items())})"
    )
    return index


def _command(args: argparse.Namespace) -> int:
    run_demo(args.out, quick=args.quick)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the whole pipeline offline on the sample books and show a leaderboard",
        description=(
            "Render the project's sample books, build a dataset with the local SmolLM2 model, run "
            "every baseline with CPU-sized settings and render the leaderboard. Offline; the "
            "second run reuses every cache."
        ),
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("searchtome-demo"),
        help="output folder (default: %(default)s)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="one book, fewer questions, smaller models (CI's integration test)",
    )
    p.set_defaults(func=_command)
