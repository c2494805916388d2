"""Measures and qrels: the measure registry, the fast scorer and structural flags.

>>> from searchtome.metrics import Qrels, evaluate
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

_EXPORTS = {
    name: "measures"
    for name in (
        "DEFAULT_MEASURES",
        "Measure",
        "Qrels",
        "count_ties",
        "describe",
        "evaluate",
        "evaluate_arrays",
        "mean_scores",
        "measure_names",
        "order_by_score",
        "parse_measure",
        "run_from_scores",
        "tied_queries",
        "to_ir_measures_dict",
    )
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
