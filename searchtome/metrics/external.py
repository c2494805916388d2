"""Measures the registry does not hold, computed by ir_measures (the optional ``ir`` extra).

The built-in families (:mod:`searchtome.metrics.measures`) are the fast path and always win; any
other name ir_measures can parse (``AP``, ``Judged@10``, ``P(rel=2)@5``, ``Bpref``...) is
computed by ir_measures over the same run and qrels. The run is handed over with synthetic,
strictly decreasing scores (:func:`~searchtome.metrics.ties.to_ir_measures_dict`), so
ir_measures scores exactly the order searchtome scores (the tie rule), and a query the run does
not answer is a miss (0), as for the built-ins.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from searchtome.errors import SearchTomeError
from searchtome.metrics.family import Family, Ranked
from searchtome.metrics.qrels import Qrels
from searchtome.metrics.ties import to_ir_measures_dict
from searchtome.runs import Run

EXTRA = "ir"
INSTALL_HINT = f"pip install 'searchtome[{EXTRA}]'"


class External(Family):
    """Whatever ir_measures computes under this name (see the ir_measures documentation)."""

    needs_cutoff = False
    # Unknown to us: assume any reordering of the ranking may change it (used by the tie check).
    order_sensitive = True
    description = "computed by ir_measures"

    def __init__(self, name: str) -> None:
        self.name = name  # type: ignore[misc]  # per instance: one family per ir_measures name
        # NumQ, NumRet, NumRel, NumRelRet are counts: ir_measures sums them over queries.
        self.aggregate = "sum" if is_sum(name) else "mean"  # type: ignore[misc]

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        raise SearchTomeError(f"{self.name} is computed by ir_measures, not from rank arrays")

    def describe(self, cutoff: int | None) -> str:
        return f"{self.name}, computed by ir_measures"


def _ir_measures() -> Any | None:
    try:
        import ir_measures
    except ImportError:
        return None
    return ir_measures


def available() -> bool:
    """Whether ir_measures is installed (the ``ir`` extra).

    Looked up, not imported: every measure name is parsed through here, and importing
    ir_measures (with pytrec_eval) would cost ``searchtome score`` about 40 ms of CPU at start-up
    when only built-in measures are asked for. An entry in ``sys.modules`` (``None`` blocks the
    import) wins over the cached look-up of the installed package.
    """
    if "ir_measures" in sys.modules:
        return sys.modules["ir_measures"] is not None
    return _installed()


@functools.cache
def _installed() -> bool:
    return importlib.util.find_spec("ir_measures") is not None


def canonical_name(text: str) -> str | None:
    """ir_measures' own spelling of ``text`` (``"P(rel=2) @5"`` → ``"P(rel=2)@5"``), else ``None``.

    Raises :class:`SearchTomeError` naming the extra when ir_measures is not installed.
    """
    module = _ir_measures()
    if module is None:
        raise SearchTomeError(
            f"measure {text!r} is not built in; other ir_measures measures need the "
            f"{EXTRA!r} extra: {INSTALL_HINT}"
        )
    try:
        return str(module.parse_measure(text))
    except Exception:  # ir_measures raises NameError, ValueError, SyntaxError... on bad names
        return None


def is_sum(name: str) -> bool:
    """Whether ir_measures aggregates ``name`` by summing over queries (the count measures)."""
    module = _ir_measures()
    if module is None:
        return False
    try:
        return type(module.parse_measure(name).aggregator()).__name__ == "SumAgg"
    except Exception:  # as in canonical_name
        return False


def trec_eval_name(text: str) -> str | None:
    """ir_measures' name for a trec_eval name (``map`` → ``AP``, ``ndcg_cut.10`` → ``nDCG@10``).

    ``None`` when ``text`` is no trec_eval name; :class:`SearchTomeError` for one that
    ir_measures knows but cannot compute (``gm_map``) or that stands for several measures.
    """
    module = _ir_measures()
    if module is None:
        return None
    try:
        found = module.parse_trec_measure(text)
    except ValueError as exc:
        if "not yet supported" in str(exc):
            raise SearchTomeError(
                f"measure {text!r}: a trec_eval measure that ir_measures does not compute"
            ) from None
        return None
    except Exception:  # as in canonical_name
        return None
    if len(found) != 1:
        names = ", ".join(str(m) for m in found)
        raise SearchTomeError(f"measure {text!r}: stands for several measures ({names}); name one")
    return str(found[0])


def check_computable(text: str, name: str) -> None:
    """Raise one clear line when ir_measures parses ``name`` but cannot compute it here.

    Some names parse yet fail on use: a provider that is not installed (``alpha_nDCG`` needs
    pyndeval), a parameter without default (``SDCG`` needs a cutoff). A one-query trial finds
    out before any scoring starts.
    """
    module = _ir_measures()
    if module is None:
        return
    try:
        list(module.iter_calc([module.parse_measure(name)], {"q": {"d": 1}}, {"q": {"d": 1.0}}))
    except Exception as exc:  # whatever ir_measures raises, the user gets one line
        raise SearchTomeError(f"measure {text!r}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, AssertionError) and "invalid param " in text:
        param = text.split("invalid param ", 1)[1].split("=", 1)[0]
        return f"ir_measures needs its {param!r} parameter given (e.g. @10 for a cutoff)"
    if text.startswith("Unsupported measures"):
        return f"ir_measures cannot compute it with the providers installed ({text})"
    return f"ir_measures cannot compute it ({type(exc).__name__}: {text[:200]})"


def cutoff_of(name: str) -> float | None:
    """The cut-off ir_measures parses from ``name`` (``AP@10`` → 10), ``None`` when it has none."""
    module = _ir_measures()
    if module is None:
        return None
    try:
        value = module.parse_measure(name).params.get("cutoff")
    except Exception:  # as in canonical_name: ir_measures raises many kinds on bad names
        return None
    return float(value) if isinstance(value, int | float) else None


def external_values(
    run: Run, qrels: Qrels, names: Sequence[str], query_ids: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per-query values of ir_measures measures, aligned with ``query_ids`` (missing = 0)."""
    if not names:
        return {}
    module = _ir_measures()
    if module is None:
        raise SearchTomeError(f"{', '.join(names)}: ir_measures is not installed; {INSTALL_HINT}")
    wanted = set(query_ids)
    index = {qid: i for i, qid in enumerate(query_ids)}
    judged = {q: dict(docs) for q, docs in qrels.items() if q in wanted}
    ranked = {q: docs for q, docs in to_ir_measures_dict(run).items() if q in wanted and docs}
    by_name = {str(module.parse_measure(n)): n for n in names}
    out = {n: np.zeros(len(query_ids), dtype=np.float64) for n in names}
    try:
        for value in module.iter_calc(list(map(module.parse_measure, names)), judged, ranked):
            row = index.get(value.query_id)
            if row is not None:
                out[by_name[str(value.measure)]][row] = float(value.value)
    except Exception as exc:  # checked at parse time; this is the last line of defence
        raise SearchTomeError(f"measures {', '.join(names)}: {_reason(exc)}") from None
    return out
