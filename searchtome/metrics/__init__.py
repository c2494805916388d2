"""Measures and qrels: the measure registry, the fast scorer and structural flags.

>>> from searchtome.metrics import Qrels, evaluate

``measures`` is the registry (one small class per measure), ``scorer`` computes them,
``qrels`` reads relevance judgements, ``ties`` holds the tie rule, ``structure`` the
NonLeaf/Invalid flags. Names are resolved lazily, so importing the package costs nothing.
"""

from __future__ import annotations

from searchtome.lazy import lazy_exports

_MODULES = {
    "defaults": ("DEFAULT_MEASURES",),
    "family": ("Family", "Ranked"),
    "measures": (
        "FAMILIES",
        "REGISTRY",
        "Measure",
        "describe",
        "measure_names",
        "parse_measure",
    ),
    "qrels": ("Qrels",),
    "scorer": ("aggregate", "evaluate", "evaluate_arrays", "is_count", "mean_scores"),
    "structure": ("STRUCTURE_MEASURES", "NodeKind", "classify", "structure_flags"),
    "ties": (
        "TIE_RULE",
        "count_ties",
        "order_by_score",
        "run_from_scores",
        "to_ir_measures_dict",
    ),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
