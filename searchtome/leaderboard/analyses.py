"""Leaderboard analyses: per-query rates broken down by a property of the gold leaf.

* R@1 by the number of training questions whose gold is the query's gold leaf (paper Fig. 4:
  STAIR's advantage is largest on rarely seen leaves);
* invalid output rate — rank-1 output that is not a leaf of the book (non-leaf or invalid) — by
  the same buckets (paper Fig. 3);
* R@1 by ToC depth of the gold leaf;
* system A − system B (default ``stair`` − ``dsi``) per training-question bucket, with a paired
  randomization p-value each, and the pre-declared rare-leaf test: gold leaves with at most
  :data:`RARE_MAX` training questions, two-sided (docs/leaderboard.md says why).

Intervals and p-values come from :class:`~searchtome.leaderboard.significance.Engine`, the
machinery of the leaderboard's own tests, with the build's seed: a bucket is a query group, so
the bootstrap resamples within each bucket. A system's interval is that of its difference from an
all-zero column, i.e. of its own mean.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from searchtome.leaderboard.results import Breakdown, PairedAnalysis, PairedTest
from searchtome.leaderboard.scoring import Scoreboard
from searchtome.leaderboard.significance import Engine, at_floor, mcnemar
from searchtome.leaderboard.text import floor_text

RARE_MAX = 5  # the rare-leaf test: gold leaves with at most this many training questions
DEFAULT_PAIR = ("stair", "dsi")

# Upper bounds of the training-question buckets (inclusive); the last bucket is open.
TRAIN_BUCKETS: tuple[tuple[int, int | None], ...] = (
    (0, 0),
    (1, 2),
    (3, 5),
    (6, 10),
    (11, 20),
    (21, 50),
    (51, 100),
    (101, None),
)


def bucket_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo}+"
    return str(lo) if lo == hi else f"{lo}–{hi}"


@dataclass(frozen=True)
class Resampling:
    """How intervals and p-values are computed: the leaderboard's own settings."""

    bootstrap: int = 2_000
    permutations: int = 10_000
    seed: int = 0


def _quantity(board: Scoreboard, system: str, quantity: str) -> np.ndarray:
    per_query = board.get(system).per_query
    if quantity == "invalid_output":
        return per_query["NonLeaf@1"] + per_query["Invalid@1"]
    return per_query[quantity]


def _breakdown(
    board: Scoreboard,
    masks: list[tuple[str, np.ndarray]],
    quantity: str,
    labels: tuple[str, str, str],
    systems: list[str] | None = None,
    resampling: Resampling | None = None,
) -> Breakdown:
    """Mean of ``quantity`` per mask and system; with ``resampling``, bootstrap intervals too."""
    masks = [(label, m) for label, m in masks if m.any()]
    names = [s.system for s in board.systems] if systems is None else systems
    values = {s: [float(_quantity(board, s, quantity)[m].mean()) for _, m in masks] for s in names}
    out = Breakdown(*labels, [lb for lb, _ in masks], [int(m.sum()) for _, m in masks], values)
    if resampling is not None and names and masks:
        low, high = _intervals(board, masks, quantity, names, resampling)
        out = replace(out, ci_low=low, ci_high=high)
    return out


def _bucket_labels(masks: list[tuple[str, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's bucket label and whether it lies in any bucket."""
    labels = np.full(n, "", dtype=object)
    for label, m in masks:
        labels[m] = label
    return labels, labels != ""


def _intervals(
    board: Scoreboard,
    masks: list[tuple[str, np.ndarray]],
    quantity: str,
    names: list[str],
    rs: Resampling,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    labels, inside = _bucket_labels(masks, len(board.query_ids))
    columns = [_quantity(board, s, quantity)[inside] for s in names]
    X = np.stack([*columns, np.zeros(int(inside.sum()))], axis=1)
    zero = len(names)
    engine = Engine(
        X, labels[inside].tolist(), [(i, zero) for i in range(len(names))], 1, rs.bootstrap, rs.seed
    )
    low, high = engine.intervals()
    scope = {name: i for i, name in enumerate(engine.scopes)}
    rows = [scope[label] for label, _ in masks]
    return (
        {s: [float(low[r, i]) for r in rows] for i, s in enumerate(names)},
        {s: [float(high[r, i]) for r in rows] for i, s in enumerate(names)},
    )


def train_masks(train_questions: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """One (label, mask) per bucket of :data:`TRAIN_BUCKETS`, empty buckets included."""
    top = np.iinfo(np.int64).max
    return [
        (
            bucket_label(lo, hi),
            (train_questions >= lo) & (train_questions <= (top if hi is None else hi)),
        )
        for lo, hi in TRAIN_BUCKETS
    ]


def free_decoders(board: Scoreboard) -> list[str]:
    """Systems that put a non-leaf or invalid id at rank 1 at least once (free decoding).

    A system that ranks leaves, or decodes under a leaf trie, cannot do so: its rate is zero by
    construction and the paper's Figure 3 leaves it out.
    """
    return [
        s.system
        for s in board.systems
        if (s.per_query["NonLeaf@1"].any() or s.per_query["Invalid@1"].any())
    ]


def analyses(
    board: Scoreboard,
    systems_order: list[str] | None = None,
    resampling: Resampling | None = None,
) -> dict[str, Breakdown]:
    """The three breakdowns; empty when the scoreboard has no dataset behind it."""
    if board.queries is None:
        return {}
    q = board.queries
    order = systems_order or [s.system for s in board.systems]
    masks = train_masks(q.train_questions)
    depth_masks = [(str(d), q.depth == d) for d in sorted(set(q.depth.tolist()))]
    free = set(free_decoders(board))
    train_x = "training questions for the gold leaf"
    invalid = _breakdown(
        board,
        masks,
        "invalid_output",
        (
            "Non-leaf or invalid output at rank 1 by training questions of the gold leaf",
            train_x,
            "non-leaf or invalid at rank 1 (%)",
        ),
        [s for s in order if s in free],
    )
    invalid = replace(
        invalid,
        note="free-decoding systems only (those with a non-leaf or invalid answer at rank 1)"
        if free
        else "no system wrote a non-leaf or invalid answer at rank 1",
    )
    return {
        "r1_by_training_questions": _breakdown(
            board,
            masks,
            "R@1",
            ("R@1 by training questions of the gold leaf", train_x, "R@1 (%)"),
            order,
            resampling or Resampling(),
        ),
        "invalid_by_training_questions": invalid,
        "r1_by_depth": _breakdown(
            board,
            depth_masks,
            "R@1",
            (
                "R@1 by ToC depth of the gold leaf",
                "ToC depth of the gold leaf (1 = top level)",
                "R@1 (%)",
            ),
            order,
            resampling or Resampling(),
        ),
    }


def _paired_test(label: str, a: np.ndarray, b: np.ndarray, rs: Resampling) -> PairedTest:
    engine = Engine(
        np.stack([a, b], axis=1), None, [(0, 1)], rs.permutations, rs.bootstrap, rs.seed
    )
    p, _ = engine.pvalues()
    low, high = engine.intervals()
    floor = at_floor(float(p[0, 0]), rs.permutations, engine.exact())
    return PairedTest(
        label,
        int(a.size),
        float(a.mean()),
        float(b.mean()),
        float(a.mean() - b.mean()),
        float(low[0, 0]),
        float(high[0, 0]),
        float(p[0, 0]),
        p_at_floor=floor,
        mcnemar_p=mcnemar(a, b) if floor else None,
        floor=floor_text(rs.permutations) if floor else "",
    )


def paired_analysis(
    board: Scoreboard,
    pair: tuple[str, str] = DEFAULT_PAIR,
    resampling: Resampling | None = None,
    measure: str = "R@1",
    rare_max: int = RARE_MAX,
) -> PairedAnalysis:
    """``a`` − ``b`` on ``measure`` per training-question bucket, and the rare-leaf test.

    Each bucket and the rare set is tested on its own (two-sided paired randomization test,
    plain mean over its queries); the bucket p-values are descriptive and not corrected, the
    rare-leaf test is the one pre-declared test.
    """
    rs = resampling or Resampling()
    a, b = pair
    out = PairedAnalysis(a, b, measure, "two-sided", rare_max, settings=dict(rs.__dict__))
    names = {s.system for s in board.systems}
    missing = [s for s in pair if s not in names]
    skipped = ""
    if board.queries is None:
        skipped = "the scores have no dataset behind them (no training questions)"
    elif missing:
        skipped = f"no submission named {' or '.join(repr(m) for m in missing)}"
    elif a == b:
        skipped = "the two systems are the same"
    if skipped:
        return replace(out, skipped=skipped)
    assert board.queries is not None
    va = board.get(a).per_query[measure]
    vb = board.get(b).per_query[measure]
    buckets = [
        _paired_test(label, va[m], vb[m], rs)
        for label, m in train_masks(board.queries.train_questions)
        if m.any()
    ]
    rare = board.queries.train_questions <= rare_max
    rare_test = _paired_test(f"≤ {rare_max}", va[rare], vb[rare], rs) if rare.any() else None
    return replace(out, buckets=buckets, rare=rare_test)
