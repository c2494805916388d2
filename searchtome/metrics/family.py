"""What a measure is: the base class of every registered measure and the arrays they read.

A measure family (``R``, ``nDCG``, ``NonLeaf``...) is one small class: its canonical name, the
names users may type for it, whether it takes a cutoff, a one-line description, its formula in
the docstring, and how it turns the shared arrays of :class:`Ranked` into per-query values. The
registry that looks families up by name is :mod:`searchtome.metrics.measures`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class Ranked:
    """What every retrieval measure reads, computed once per run: one row per query.

    Building these arrays is the costly part of scoring; each measure is then a few vector
    operations on slices of them, which is why the scorer stays fast however many measures.
    """

    gains: np.ndarray  # relevance of the id at each rank (0 = not relevant), queries × depth
    hits: np.ndarray  # gains > 0
    n_rel: np.ndarray  # relevant ids per query
    ideal: np.ndarray  # the ideal ranking's gains, queries × width
    discount: np.ndarray  # 1 / log2(rank + 1) for ranks 1..width
    depth: int  # ranks scored: the largest cutoff asked for, or the longest ranking
    width: int  # ranks of the ideal ranking kept (>= depth)

    @property
    def n_queries(self) -> int:
        return self.gains.shape[0]


class CutoffUnit(StrEnum):
    """What the number after ``@`` counts."""

    RANK = "rank"  # the top k ranked ids (R@3, nDCG@10)
    TOKENS = "tokens"  # a reading budget in tokens (InBudget@512; see metrics.budget)


class Family:
    """One measure family; subclasses set the class attributes and implement :meth:`values`."""

    name: ClassVar[str]  # canonical, as ir_measures spells it
    aliases: ClassVar[tuple[str, ...]] = ()  # lower-case names users may type for it
    needs_cutoff: ClassVar[bool] = True
    description: ClassVar[str]  # one line; ``{k}`` is replaced by the cutoff
    # Structural flags read the book's table of contents, not relevance judgements: they are
    # computed only when a dataset is at hand (see searchtome.metrics.structure).
    needs_dataset: ClassVar[bool] = False
    # Without a cutoff, normalise by the ideal ranking of *every* relevant id (uncut nDCG).
    uncut_ideal: ClassVar[bool] = False
    # Whether the order inside the top k matters (nDCG, RR), not only which ids are in it
    # (R, P, Success): decides which tied scores can change the value (see metrics.ties).
    order_sensitive: ClassVar[bool] = False
    # How per-query values add up: "mean" (a rate, shown in %) or "sum" (a count, shown as one).
    aggregate: ClassVar[str] = "mean"
    cutoff_unit: ClassVar[CutoffUnit] = CutoffUnit.RANK
    # A mean shown in % (a share of queries); False: a mean of amounts shown as a number (tokens).
    percent: ClassVar[bool] = True

    def values(self, ranked: Ranked, cutoff: int | None) -> np.ndarray:
        """Per-query values, aligned with the rows of ``ranked``."""
        raise NotImplementedError(f"{self.name} is not computed from relevance judgements")

    def formula(self) -> str:
        """The definition, taken from the class docstring."""
        return inspect.cleandoc(type(self).__doc__ or "")

    def describe(self, cutoff: int | None) -> str:
        return self.description.format(k=cutoff if cutoff else "all")
