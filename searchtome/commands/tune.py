"""``searchtome tune``: grid-search a baseline's config, scored as the leaderboard scores.

Every grid point is run with :func:`searchtome.baselines.runner.grid_search` and scored with the
leaderboard's own scorer (:func:`searchtome.leaderboard.score_runs`). Points are ranked by the
first measure's **macro** mean over domains, the number the leaderboard publishes and ranks by,
unless ``--aggregate micro`` asks for the mean over all queries.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchtome.commands.run import add_common_options, config_source
from searchtome.limits import DEFAULT_SEED

AGGREGATES = ("macro", "micro")
DEFAULT_MEASURES = ("R@1", "R@3", "nDCG@3")
# Loggers that warn about tied scores once per scored run: noise when scoring a whole grid.
_QUIET = ("searchtome.metrics", "searchtome.leaderboard")


@dataclass(frozen=True)
class Ranking:
    """How grid points are compared: the measures reported (the first one sorts) and how each is
    averaged over queries: ``"macro"`` (the mean over domains of each domain's mean, as the
    leaderboard ranks) or ``"micro"`` (the mean over all queries)."""

    measures: tuple[str, ...] = DEFAULT_MEASURES
    aggregate: str = "macro"

    def __post_init__(self) -> None:
        from searchtome.errors import SearchTomeError, unknown_name

        if self.aggregate not in AGGREGATES:
            raise unknown_name("aggregate", self.aggregate, AGGREGATES)
        if not self.measures:
            raise SearchTomeError("tune needs at least one measure (the first one sorts)")


DEFAULT_RANKING = Ranking()


def tune(
    name: str,
    data: Any,
    grid: Mapping[str, Sequence[Any]],
    split: str = "dev",
    config: Mapping[str, Any] | str | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    ranking: Ranking = DEFAULT_RANKING,
    seed: int = DEFAULT_SEED,
) -> list[dict[str, Any]]:
    """Score every grid point on ``split`` (dev by default); rows sorted best first by
    ``ranking`` (default: R@1, R@3, nDCG@3, macro means, as the leaderboard ranks)."""
    from searchtome.baselines.runner import grid_search
    from searchtome.dataset import Dataset, load
    from searchtome.leaderboard import score_runs

    measures, aggregate = ranking.measures, ranking.aggregate
    dataset = data if isinstance(data, Dataset) else load(data)

    def score(run: Any) -> dict[str, float]:
        loggers = [logging.getLogger(n) for n in _QUIET]
        levels = [log.level for log in loggers]
        for log in loggers:
            log.setLevel(logging.ERROR)
        try:
            board = score_runs([run], data=dataset, split=split, measures=measures)
        finally:
            for log, level in zip(loggers, levels, strict=True):
                log.setLevel(level)
        values = board.aggregate(run.name) if aggregate == "macro" else board.micro(run.name)
        return {m: values[m] for m in measures}

    rows = grid_search(name, dataset, grid, score, split, config, overrides, seed)
    first = measures[0]
    rows.sort(key=lambda r: (-r[first], json.dumps(r["setting"], sort_keys=True)))
    return rows


def _command(args: argparse.Namespace) -> int:
    from searchtome.baselines.runner import parse_grid
    from searchtome.io import write_json

    grid = parse_grid(args.grid)
    measures = tuple(args.measure) if args.measure else DEFAULT_MEASURES
    rows = tune(
        args.name,
        args.data,
        grid,
        split=args.split,
        config=config_source(args.config),
        overrides=args.set,
        ranking=Ranking(measures, args.aggregate),
        seed=args.seed,
    )
    keys = list(grid)
    print("| " + " | ".join(keys + list(measures)) + " | s |")
    print("|" + "---|" * (len(keys) + len(measures) + 1))
    for row in rows:
        cells = [str(row["setting"][k]) for k in keys]
        cells += [f"{row[m]:.4f}" for m in measures] + [f"{row['seconds']:.1f}"]
        print("| " + " | ".join(cells) + " |")
    if args.out:
        write_json(
            args.out,
            {
                "baseline": args.name,
                "split": args.split,
                "aggregate": args.aggregate,
                "grid": grid,
                "rows": rows,
            },
        )
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tune",
        help="grid-search a baseline's config on the dev split",
        description="Score every combination of --grid values (dev split by default), best first.",
    )
    add_common_options(p, "dev")
    p.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2",
        help="values to try for one config key; repeatable (the grid is their product)",
    )
    p.add_argument("--measure", action="append", help="measures to report; the first one sorts")
    p.add_argument(
        "--aggregate",
        choices=AGGREGATES,
        default="macro",
        help="how queries are averaged: macro = mean over domains, as the leaderboard ranks; "
        "micro = mean over all queries (default: %(default)s)",
    )
    p.add_argument("--out", help="also write the table as JSON")
    p.set_defaults(func=_command)
