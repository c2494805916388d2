"""What an upload may reveal about the hidden gold: the three ``--public-scores`` modes.

Pure functions, no database: the service and ``benchmarks/leak.py`` both call them.

- ``exact``: every score as a full float (the service before this mode existed).
- ``rounded``: every score rounded to what the page shows (a percentage with one decimal, so
  three decimals of a fraction; p-values to three decimals); the count measures (NonLeaf@k,
  Invalid@k) are left out of public replies, because a change of one answer's structure tells
  whether that query is in the public part (they need no gold: ``searchtome validate`` prints
  them locally).
- ``ladder``: rounded, and Blum and Hardt's Ladder on top: a team's new run shows its own scores
  only when it beats the team's best shown run by ``margin`` standard errors of the per-query
  R@1 differences (a one-sided paired test); otherwise it shows the best run's scores again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from searchtome.metrics.structure import STRUCTURE_MEASURES
from searchtome.service.kinds import ScoreMode

DIGITS = 3  # the page shows 12.3 (%): 0.123 as a fraction
LADDER_MEASURE = "R@1"
SCORE_KEYS = ("aggregate", "per_domain")


def rounded(obj: Any) -> Any:
    """Every float in a JSON-like object rounded to :data:`DIGITS` decimals."""
    if isinstance(obj, float):
        return round(obj, DIGITS) + 0.0  # + 0.0: no -0.0 on the page
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v) for v in obj]
    return obj


def _without_counts(obj: Any) -> Any:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in STRUCTURE_MEASURES:
                continue
            out[k] = _without_counts(v)
        return out
    if isinstance(obj, list):
        return [_without_counts(v) for v in obj]
    return obj


def public_view(obj: Any, mode: ScoreMode) -> Any:
    """A board or a run's scores as the API may return them under ``mode``."""
    if mode is ScoreMode.EXACT:
        return obj
    out = rounded(_without_counts(obj))
    if isinstance(out, dict) and "measures" in out:
        out["measures"] = [m for m in out["measures"] if m not in STRUCTURE_MEASURES]
    return out


def paired_t(best: np.ndarray, new: np.ndarray, weights: np.ndarray) -> float:
    """The paired statistic of ``new - best`` on the weighted (macro) mean; ``inf`` for a sure
    gain (every query moved the same way), ``-inf`` for no gain at all."""
    n = len(best)
    diff = n * weights * (np.asarray(new, dtype=np.float64) - np.asarray(best, dtype=np.float64))
    mean = float(diff.mean()) if n else 0.0
    if mean <= 0:
        return -math.inf
    if n < 2:
        return math.inf
    se = float(diff.std(ddof=1)) / math.sqrt(n)
    return math.inf if se == 0 else mean / se


def ladder_improves(
    best: np.ndarray | None, new: np.ndarray, weights: np.ndarray, margin: float
) -> bool:
    """The Ladder's test: is ``new`` better than the team's ``best`` by more than ``margin``
    standard errors? A team's first run is always shown.

    With k queries changed (each +1) among n, the statistic is sqrt(k (n-1) / (n-k)): one
    query gives exactly 1, so a margin above 1 hides every single-query difference; the
    default 2 hides up to three (see docs/server.md).
    """
    if best is None:
        return True
    return paired_t(best, new, weights) > margin


def macro_weights(domains: np.ndarray) -> np.ndarray:
    """Per-query weights of the macro mean over domains (each domain weighs the same)."""
    values, inverse, counts = np.unique(domains, return_inverse=True, return_counts=True)
    return 1.0 / (len(values) * counts[inverse])
