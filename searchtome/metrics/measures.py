"""The measure registry: every measure searchtome computes, looked up by its ir_measures name.

Measures are named the way ir_measures names them — ``R@1``, ``Success@1``, ``nDCG@3``,
``RR@10``, ``P@5`` — and their values equal trec_eval's (``recall_k``, ``success_k``,
``ndcg_cut_k``, ``recip_rank`` on the run cut at k, ``P_k``) for the same ranked lists. A
relevant id is one judged with relevance > 0. A query with no relevant id scores 0 on every
measure. ``NonLeaf@k`` and ``Invalid@k`` are structural flags (:mod:`searchtome.metrics.structure`).

``R@k`` and ``Success@k`` are equal when each query has one relevant id (a SearchTome split)
and differ otherwise: two relevant ids, one of them in the top k, give ``R@k = 0.5`` and
``Success@k = 1``. ``success``, ``hit_rate`` and ``hitrate`` name ``Success``. ``hits`` and
``accuracy`` are refused with a note rather than guessed: ranx's ``hits`` counts the relevant
ids in the top k, and ir_measures' ``Accuracy`` is a pairwise ordering measure — neither is
Success@k or R@k, and silently picking one would report a different number than the user meant.

Any other name ir_measures can parse (``AP``, ``Judged@10``...) is computed by ir_measures when
the ``ir`` extra is installed (:mod:`searchtome.metrics.external`); a clear error names the
extra otherwise.

To add a measure: write a :class:`~searchtome.metrics.family.Family` subclass below (name,
aliases, description, formula in the docstring, ``values``) decorated with :func:`measure`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.limits import MAX_IDS
from searchtome.metrics import external
from searchtome.metrics.budget import BudgetFamily, Reading
from searchtome.metrics.defaults import DEFAULT_MEASURES
from searchtome.metrics.external import External
from searchtome.metrics.family import CutoffUnit, Family, Ranked
from searchtome.metrics.structure import STRUCTURE_FAMILIES
from searchtome.registry import Registry

# Every built-in measure family by its canonical name (one instance each).
REGISTRY: Registry[Family] = Registry("measure")
F = TypeVar("F", bound=type[Family])


def measure(cls: F) -> F:
    """Class decorator: register one instance of a :class:`Family` subclass under its name."""
    REGISTRY.add(cls.name, cls())
    return cls


@measure
class Recall(Family):
    """R@k = |relevant ids in the top k| / |relevant ids|   (trec_eval ``recall_k``)."""

    name = "R"
    aliases = ("r", "recall")
    description = "recall at {k}: share of the relevant ids found in the top {k}"

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        found = ranked.hits[:, : cutoff or ranked.depth].sum(axis=1)
        return np.divide(
            found, ranked.n_rel, out=np.zeros(ranked.n_queries), where=ranked.n_rel > 0
        )


@measure
class Success(Family):
    """Success@k = 1 if any relevant id is in the top k, else 0   (trec_eval ``success_k``)."""

    name = "Success"
    aliases = ("success", "hit_rate", "hitrate")
    description = "success at {k}: 1 if a relevant id is in the top {k}"

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        return ranked.hits[:, : cutoff or ranked.depth].any(axis=1).astype(np.float64)


@measure
class Precision(Family):
    """P@k = |relevant ids in the top k| / k   (trec_eval ``P_k``; short lists still divide by k)."""

    name = "P"
    aliases = ("p", "precision")
    description = "precision at {k}: share of the top {k} that is relevant"

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        k = cutoff or ranked.depth
        return ranked.hits[:, :k].sum(axis=1) / float(k)


@measure
class NDCG(Family):
    """nDCG@k = DCG@k / IDCG@k, DCG@k = sum over ranks i <= k of rel_i / log2(i + 1).

    Linear gain (the relevance grade), IDCG from the ideal ordering of the judged ids; without
    a cutoff every relevant id counts (trec_eval ``ndcg``; with a cutoff ``ndcg_cut_k``).
    """

    name = "nDCG"
    aliases = ("ndcg", "ndcg_cut")
    needs_cutoff = False
    uncut_ideal = True
    order_sensitive = True
    description = "nDCG at {k}: linear gain, log2 discount, normalised by the ideal ranking"

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        k = cutoff or ranked.depth
        seen = min(k, ranked.depth)  # ranks past the arrays' depth hold no ranked id
        dcg = ranked.gains[:, :seen] @ ranked.discount[:seen]
        ideal_k = ranked.width if cutoff is None else cutoff
        idcg = ranked.ideal[:, :ideal_k] @ ranked.discount[:ideal_k]
        return np.divide(dcg, idcg, out=np.zeros(ranked.n_queries), where=idcg > 0)


@measure
class ReciprocalRank(Family):
    """RR@k = 1 / (rank of the first relevant id) if it is within the top k, else 0.

    trec_eval ``recip_rank`` on the run cut at k; its mean over queries is MRR@k.
    """

    name = "RR"
    aliases = ("rr", "mrr", "recip_rank")
    needs_cutoff = False
    order_sensitive = True
    description = "reciprocal rank of the first relevant id within the top {k}"

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        hits = ranked.hits[:, : cutoff or ranked.depth]
        first = np.argmax(hits, axis=1)
        return np.where(hits.any(axis=1), 1.0 / (first + 1.0), 0.0)


@measure
class InBudget(BudgetFamily):
    """InBudget@B = 1 if the gold section ends within the first B tokens read, else 0.

    The reader reads the ranked sections in the submitted order (tied scores never re-sort them).
    T = the tokens of every ranked id down to and including the gold leaf, where a leaf costs
    its section text, a ToC node with children its whole subtree (own introduction and every
    node below it) and an id that is no node of the query's book 0. InBudget@B = 1 if the gold
    is ranked and T <= B. A gold section longer than B scores 0 even at rank 1; a miss, an empty
    ranking and a missing query score 0; a non-leaf that contains the gold is paid for but does
    not find it (only the gold leaf's id counts, as for R@k). Tokens: ``searchtome-words-1``
    (:data:`searchtome.metrics.budget.TOKENIZER`). B is a number of tokens, not a rank.
    """

    name = "InBudget"
    aliases = ("inbudget", "in_budget")
    cutoff_unit = CutoffUnit.TOKENS
    description = "in budget at {k}: the gold section ends within the first {k} tokens read"

    def budget_values(self, read: Reading, cutoff: int | None) -> np.ndarray:
        if cutoff is None:
            raise SearchTomeError("InBudget needs a budget in tokens, e.g. InBudget@512")
        return (read.found(None) & (read.tokens <= cutoff)).astype(np.float64)


@measure
class TokensToGold(BudgetFamily):
    """TokensToGold@k = T, the tokens read down to the end of the gold section (as for InBudget),
    if the gold is among the top k ranked ids; else the tokens of the query's whole book.

    A miss (the gold not in the top k, an empty ranking, a missing query) costs the whole book:
    every leaf's section and every ToC node's own introduction, the most a reader can pay to find
    the gold without the ranking. T is capped at the book too (a ranking of overlapping sections
    can list more than the book), so a hit never costs more than a miss. Without ``@k`` the whole
    ranking is read. Its mean over queries is a number of tokens (lower is better), not a share.
    """

    name = "TokensToGold"
    aliases = ("tokenstogold", "tokens_to_gold")
    needs_cutoff = False
    percent = False
    description = (
        "tokens read until the gold section ends; ranks read: {k} (a miss: the whole book)"
    )

    def budget_values(self, read: Reading, cutoff: int | None) -> np.ndarray:
        return np.where(read.found(cutoff), np.minimum(read.tokens, read.book), read.book)


for _flag in STRUCTURE_FAMILIES:
    REGISTRY.add(_flag.name, _flag)
FAMILIES: tuple[Family, ...] = tuple(REGISTRY.values())
_ALIASES = {alias: f.name for f in FAMILIES for alias in (f.name.lower(), *f.aliases)}
# Names other tools use for something else: refused with the reason (see the module docstring).
_REFUSED = {
    "hits": "'hits' is ambiguous (ranx counts the relevant ids in the top k); "
    "name Success@k (a relevant id in the top k) or R@k (share of the relevant ids found)",
    "accuracy": "ir_measures' Accuracy (relevant ranked before non-relevant ids) is not "
    "computed here; for top-k accuracy name Success@k",
}
_MEASURE_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:[@_]\s*(\d+))?\s*$")
# The deepest cut-off scored: trec_eval's deepest default (a submission ranks at most MAX_IDS ids,
# a TREC run conventionally 1000). Deeper ones only cost memory (an array as wide as k per query).
MAX_CUTOFF = 1000
# The largest token budget (InBudget@B): far beyond any book in the catalog.
MAX_BUDGET = 10_000_000


@dataclass(frozen=True, order=True)
class Measure:
    """A parsed measure: family (``R``, ``Success``, ``P``, ``nDCG``, ``RR``...) and cutoff."""

    family: str
    cutoff: int | None = None

    def __str__(self) -> str:
        return self.family if self.cutoff is None else f"{self.family}@{self.cutoff}"

    @property
    def name(self) -> str:
        return str(self)

    @property
    def rank_cutoff(self) -> int | None:
        """The cut-off as a number of ranks; None without one or when it counts tokens."""
        if self.cutoff is None or self.definition.cutoff_unit != CutoffUnit.RANK:
            return None
        return self.cutoff

    @property
    def definition(self) -> Family:
        if self.family in REGISTRY:
            return REGISTRY.get(self.family)
        return _external_family(self.family)

    @property
    def is_count(self) -> bool:
        """A count summed over queries (``NumQ``, ``NumRet``...), not a rate averaged."""
        return self.definition.aggregate == "sum"

    @property
    def external(self) -> bool:
        """Computed by ir_measures rather than by the registry's fast path."""
        return self.family not in REGISTRY


@functools.lru_cache(maxsize=256)
def _external_family(name: str) -> External:
    return External(name)


def parse_measure(text: str | Measure) -> Measure:
    """``"R@1"``, ``"ndcg@3"``, ``"MRR@10"``, ``"P_5"``, ``"map"`` → :class:`Measure` (canonical names)."""
    if isinstance(text, Measure):
        return text
    return _parse_text(str(text), external.available())


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str, with_ir_measures: bool) -> Measure:
    # Cached (keyed on whether the extra is importable): an ir_measures name is tried once on a
    # toy query when first parsed (check_computable), not at every aggregate.
    match = _MEASURE_RE.match(str(text))
    key = match.group(1).lower() if match else ""
    if key in _REFUSED:
        raise SearchTomeError(f"measure {text!r}: {_REFUSED[key]}")
    if match is None or key not in _ALIASES:
        return _parse_external(str(text))
    found = REGISTRY[_ALIASES[key]]
    limit = MAX_BUDGET if found.cutoff_unit == CutoffUnit.TOKENS else MAX_CUTOFF
    cutoff = check_cutoff(text, match.group(2), limit) if match.group(2) else None
    if cutoff is None and found.needs_cutoff:
        example = 512 if found.cutoff_unit == CutoffUnit.TOKENS else 1
        raise SearchTomeError(f"measure {text!r} needs a cutoff, e.g. {found.name}@{example}")
    return Measure(found.name, cutoff)


def check_cutoff(text: str | Measure, cutoff: str | float, limit: int = MAX_CUTOFF) -> int:
    """A measure's cut-off as an int from 1 to ``limit`` (:data:`MAX_CUTOFF` ranks, or
    :data:`MAX_BUDGET` tokens); one clear error otherwise."""
    digits = str(cutoff)
    if len(digits) > 12 or float(cutoff) > limit:
        shown = digits if len(digits) <= 12 else f"of {len(digits):,} digits"
        why = (
            f"the deepest scored (submissions rank at most {MAX_IDS} ids)"
            if limit == MAX_CUTOFF
            else "the largest token budget"
        )
        raise SearchTomeError(
            f"measure {str(text)[:60]!r}: cut-off {shown} is above {limit:,}, {why}; "
            f"use a cut-off up to {limit:,}"
        )
    if float(cutoff) < 1 or float(cutoff) != int(float(cutoff)):
        raise SearchTomeError(
            f"measure {str(text)[:60]!r}: the cutoff must be an integer of at least 1"
        )
    return int(float(cutoff))


def _parse_external(text: str) -> Measure:
    """A measure only ir_measures knows; a typo of a built-in still gets a did-you-mean."""
    known = [f"{f.name}@k" for f in FAMILIES]
    if not external.available():
        close = unknown_name("measure", text, known)
        raise SearchTomeError(
            f"{close}; other ir_measures measures need the {external.EXTRA!r} extra: "
            f"{external.INSTALL_HINT}"
        )
    name = external.canonical_name(text)
    if name is None:
        # A trec_eval name (map, num_q, ndcg_cut.10): the same measure under ir_measures' name,
        # so built-ins still take it (P.5 is P@5) and each measure has one spelling in reports.
        translated = external.trec_eval_name(text)
        if translated is not None:
            return parse_measure(translated)
        error = _unknown(text, known)
        raise SearchTomeError(
            f"{error}, or any measure ir_measures can parse (e.g. AP, Judged@10) or a trec_eval "
            "name (map, ndcg_cut.10)"
        )
    cutoff = external.cutoff_of(name)
    if cutoff is not None:
        check_cutoff(text, cutoff)
    external.check_computable(text, name)
    return Measure(name)


def _unknown(text: str, known: list[str]) -> SearchTomeError:
    """``unknown measure 'ndcgg@3' (did you mean 'nDCG@3'?); known: ...``, case aside."""
    head, sep, tail = str(text).partition("@")
    import difflib  # only for a mistyped name

    close = difflib.get_close_matches(head.lower(), list(_ALIASES), n=1, cutoff=0.6)
    if not close:
        return unknown_name("measure", text, known)
    guess = REGISTRY[_ALIASES[close[0]]].name + (f"@{tail}" if sep and tail.isdigit() else "")
    return SearchTomeError(
        f"unknown measure {text!r} (did you mean {guess!r}?); known: {', '.join(sorted(known))}"
    )


def measure_names(measures: Iterable[str | Measure]) -> list[str]:
    """Canonical names, in the order given, without duplicates."""
    out: list[str] = []
    for m in measures:
        name = str(parse_measure(m))
        if name not in out:
            out.append(name)
    return out


def describe(measures: Iterable[str | Measure] = DEFAULT_MEASURES) -> dict[str, Any]:
    """One line per measure saying what it computes (used in reports and docs)."""
    out = {}
    for m in measures:
        p = parse_measure(m)
        out[str(p)] = p.definition.describe(p.cutoff)
    return out
