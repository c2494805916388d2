"""What each ``--public-scores`` mode leaks: the differencing and boosting attacks, per 100 uploads.

    python benchmarks/leak.py [--queries 1758] [--private-fraction 0.5] [--trials 20]

A simulated competition with the shape of the Whole Child blind test (1,758 queries, half of
them private, one domain), scored by the service's own code: each upload's public aggregate is
:func:`searchtome.service.board.run_scores` (the macro mean the board shows), passed through
:func:`searchtome.service.public.public_view`, and in ladder mode through
:func:`searchtome.service.public.ladder_improves` against the team's best shown run. The
attacker sees only what the API returns.

Gold, per query: the attacker's run answers ``base``; it also has an ``alt`` answer. 77 % of
base answers are right; the attacker has 20 % "unsure" queries where base and alt are each
right 45 % of the time.

- **Differencing** (two runs that differ on one query): upload the base, then base with one
  query switched to alt, for 99 queries picked at random (the attacker does not know which are
  public). A higher shown score says alt is the gold, a lower one says base is: a gold label.
  Printed: correct labels per 100 uploads.
- **Boosting** (Blum and Hardt's attack, on the unsure queries): 98 probes each switch every
  unsure query to alt with probability 1/2; the probes whose shown score beats the base's are
  kept; the 100th upload switches the unsure queries the kept probes switched more often than
  not. Printed: the public points its shown score gained over the base's, and the change of its
  true private score (noise fitted to the public part does not carry over).
- **Honest cost** (ladder only): the smallest genuine gain the Ladder shows, for a model change
  that moves a given share of the public answers (its fixes plus its breaks).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchtome.service.board import Run, Scopes, run_scores  # noqa: E402
from searchtome.service.checks import STORED_MEASURES  # noqa: E402
from searchtome.service.public import (  # noqa: E402
    ScoreMode,
    ladder_improves,
    macro_weights,
    public_view,
)

MARGIN = 2.0  # the service's default --ladder-margin
UPLOADS = 100


class Board:
    """One team's view of the service: upload per-query R@1, read back the shown public R@1."""

    def __init__(self, mode: ScoreMode, scopes: Scopes, margin: float = MARGIN) -> None:
        self.mode, self.scopes, self.margin = mode, scopes, margin
        self.mask = ~scopes.private
        self.weights = macro_weights(scopes.domains[self.mask])
        self.best: np.ndarray | None = None  # ladder: the team's best shown run
        self.n = 0

    def _shown(self, correct: np.ndarray) -> float:
        values = {m: np.zeros(len(correct)) for m in STORED_MEASURES}
        for m in ("R@1", "R@3", "nDCG@3"):
            values[m] = correct.astype(np.float64)
        values["answered"] = np.ones(len(correct), dtype=bool)
        values["query_ids"] = np.asarray(self.scopes.query_ids)
        run = Run(f"r{self.n}", "team", "s", 0.0, False, values, {})
        return float(
            public_view(run_scores(run, self.scopes, False), self.mode)["public"]["aggregate"][
                "R@1"
            ]
        )

    def upload(self, correct: np.ndarray) -> float:
        self.n += 1
        if self.mode is ScoreMode.LADDER:
            new = correct[self.mask].astype(np.float64)
            old = None if self.best is None else self.best[self.mask].astype(np.float64)
            if ladder_improves(old, new, self.weights, self.margin):
                self.best = correct
            assert self.best is not None
            return self._shown(self.best)
        return self._shown(correct)


def world(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query: is base right, is alt right, is the query one the attacker is unsure of."""
    unsure = rng.random(n) < 0.2
    draw = rng.random(n)
    base = np.where(unsure, draw < 0.45, draw < 0.85)
    alt = np.where(unsure, (draw >= 0.45) & (draw < 0.9), (draw >= 0.85) & (draw < 0.93))
    return base, alt, unsure


def differencing(board: Board, rng: np.random.Generator) -> int:
    base, alt, _ = world(rng, len(board.scopes.query_ids))
    shown_base = board.upload(base)
    labels = 0
    for q in rng.choice(len(base), UPLOADS - 1, replace=False):
        probe = base.copy()
        probe[q] = alt[q]
        shown = board.upload(probe)
        if (shown > shown_base and alt[q]) or (shown < shown_base and base[q]):
            labels += 1
    return labels


def boosting(board: Board, rng: np.random.Generator) -> tuple[float, float]:
    scopes = board.scopes
    base, alt, unsure = world(rng, len(scopes.query_ids))
    shown_base = board.upload(base)
    kept, flips = [], []
    for _ in range(UPLOADS - 2):
        flip = unsure & (rng.random(len(base)) < 0.5)
        flips.append(flip)
        if board.upload(np.where(flip, alt, base)) > shown_base:
            kept.append(flip)
    final_flip = (np.mean(kept, axis=0) > 0.5) if kept else np.zeros(len(base), dtype=bool)
    final = np.where(final_flip, alt, base)
    shown_final = board.upload(final)
    private = scopes.private
    private_change = float(final[private].mean() - base[private].mean())
    return 100 * (shown_final - shown_base), 100 * private_change


def smallest_shown_gain(scopes: Scopes, churn: float, margin: float) -> float:
    """The smallest genuine gain (points) the Ladder shows, for a model change that moves
    ``churn`` of the public answers (fixes + breaks) and fixes ``net`` more than it breaks."""
    mask = ~scopes.private
    n = int(mask.sum())
    weights = macro_weights(scopes.domains[mask])
    moved = round(churn * n)
    old = np.zeros(n)
    old[moved:] = 1.0  # the breaks come from right answers, the fixes from wrong ones
    for net in range(moved % 2, moved + 1, 2):
        fixes, breaks = (moved + net) // 2, (moved - net) // 2
        new = old.copy()
        new[:fixes] = 1.0
        new[moved : moved + breaks] = 0.0
        if ladder_improves(old, new, weights, margin):
            return 100 * net / n
    return float("nan")


def scopes_of(n: int, fraction: float, rng: np.random.Generator) -> Scopes:
    private = np.zeros(n, dtype=bool)
    private[rng.choice(n, round(fraction * n), replace=False)] = True
    return Scopes([f"q{i:05d}" for i in range(n)], np.asarray(["book"] * n), private)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1758)
    parser.add_argument("--private-fraction", type=float, default=0.5)
    parser.add_argument("--trials", type=int, default=20, help="attacks per mode, averaged")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    scopes = scopes_of(args.queries, args.private_fraction, rng)
    start = time.perf_counter()
    print(
        f"{args.queries} queries, {int((~scopes.private).sum())} public; {args.trials} attacks "
        f"of {UPLOADS} uploads per mode; ladder margins in standard errors of the paired "
        "R@1 difference"
    )
    print(
        "| mode | gold labels leaked / 100 uploads | boosting: shown public gain (points) "
        "| boosting: true private change (points) |"
    )
    print("|---|---|---|---|")
    modes = [(m, MARGIN) for m in ScoreMode] + [(ScoreMode.LADDER, 3.0)]
    for mode, margin in modes:
        labels = [differencing(Board(mode, scopes, margin), rng) for _ in range(args.trials)]
        boosts = [boosting(Board(mode, scopes, margin), rng) for _ in range(args.trials)]
        gain = statistics.mean(b[0] for b in boosts)
        private = statistics.mean(b[1] for b in boosts)
        name = f"ladder, margin {margin:g}" if mode is ScoreMode.LADDER else mode.value
        print(
            f"| {name} | {statistics.mean(labels):.1f} (min {min(labels)}, max "
            f"{max(labels)}) | {gain:+.2f} | {private:+.2f} |"
        )
    print("\nladder, honest team: the smallest genuine gain shown, by the share of answers moved")
    print("| answers moved | margin 2 (points) | margin 3 (points) |")
    print("|---|---|---|")
    for churn in (0.01, 0.02, 0.05, 0.10, 0.20):
        two, three = (smallest_shown_gain(scopes, churn, m) for m in (2.0, 3.0))
        print(f"| {100 * churn:g} % | {two:.2f} | {three:.2f} |")
    load = os.getloadavg()[0]
    print(f"\n{time.perf_counter() - start:.0f} s; load average {load:.2f}")


if __name__ == "__main__":
    main()
