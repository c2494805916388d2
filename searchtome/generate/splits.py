"""Train/dev/test splits, seeded and leakage-safe.

Default rule ``by-unit`` (algorithm ``grouped-leaf-aware-v1``), applied to each book on its own:

1. Questions are grouped by generation unit: a unit's questions are near-paraphrases of each
   other, so they all go to one split.
2. Every leaf that has questions gets one of its units (chosen at random) in train, so a model
   trained on train has seen every answer it may be asked for — "where possible": a leaf with a
   single unit then has no dev/test questions, and when these forced units exceed the train
   target, train is larger than its ratio.
3. The remaining units, shuffled, go one by one to the split furthest below its target
   (targets = ratio × the book's questions).

``by-question`` ignores units (each question on its own, still one per leaf first in train): it
exists to measure how much unit leakage inflates scores.

The default ratios are the paper's shares over its 18 books (Table 1 totals): 62,458 train /
24,502 dev / 103,249 test of 190,209 questions (32.8 / 12.9 / 54.3 %). ``--endpoint local`` uses
the paper's figures for *The Whole Child* alone, 1,056 / 388 / 1,746 of 3,190 (33.1 / 12.2 /
54.7 %): the demo's dataset is built with them, and rebuilds byte-identical (see
:mod:`searchtome.generate.options`).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import PathLike, sha256_file
from searchtome.limits import DEFAULT_SEED
from searchtome.records import SPLITS

# Questions per split in the paper's Table 1: over all 18 books, and for The Whole Child.
PAPER_COUNTS = {"train": 62458, "dev": 24502, "test": 103249}
WHOLE_CHILD_COUNTS = {"train": 1056, "dev": 388, "test": 1746}
DEFAULT_RATIOS: dict[str, float] = {s: PAPER_COUNTS[s] / sum(PAPER_COUNTS.values()) for s in SPLITS}
WHOLE_CHILD_RATIOS: dict[str, float] = {
    s: WHOLE_CHILD_COUNTS[s] / sum(WHOLE_CHILD_COUNTS.values()) for s in SPLITS
}
RULES = ("by-unit", "by-question")
ALGORITHM = "grouped-leaf-aware-v1"


@dataclass(frozen=True)
class SplitItem:
    """What the splitter needs to know about a question."""

    query_id: str
    book_id: str
    leaf_id: str
    unit_id: str


@dataclass(frozen=True)
class SplitConfig:
    seed: int = DEFAULT_SEED
    rule: str = "by-unit"
    ratios: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_RATIOS))
    leaves_in_train: bool = True

    def validate(self) -> None:
        if self.rule not in RULES:
            raise unknown_name("split rule", self.rule, RULES)
        if set(self.ratios) != set(SPLITS):
            raise SearchTomeError(
                f"split ratios need exactly {', '.join(SPLITS)}; got {sorted(self.ratios)}"
            )
        if any(r < 0 for r in self.ratios.values()) or sum(self.ratios.values()) <= 0:
            raise SearchTomeError(
                f"split ratios must be non-negative and not all 0: {dict(self.ratios)}"
            )

    def normalised_ratios(self) -> dict[str, float]:
        total = sum(self.ratios.values())
        return {s: self.ratios[s] / total for s in SPLITS}


def parse_ratios(text: str) -> dict[str, float]:
    """``"33,12,55"`` or ``"train=0.33,dev=0.12,test=0.55"`` → ratios by split."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        if all("=" in p for p in parts):
            ratios = {k.strip(): float(v) for k, v in (p.split("=", 1) for p in parts)}
        elif len(parts) == len(SPLITS):
            ratios = dict(zip(SPLITS, (float(p) for p in parts), strict=True))
        else:
            raise ValueError
    except ValueError:
        raise SearchTomeError(
            f"cannot read split ratios {text!r}; write e.g. 33,12,55 or train=0.33,dev=0.12,test=0.55"
        ) from None
    SplitConfig(ratios=ratios).validate()
    return ratios


def _targets(total: int, ratios: Mapping[str, float]) -> dict[str, int]:
    """Largest-remainder rounding, so the targets add up to ``total`` exactly."""
    raw = {s: total * ratios[s] for s in SPLITS}
    out = {s: int(raw[s]) for s in SPLITS}
    rest = total - sum(out.values())
    for s in sorted(SPLITS, key=lambda s: (-(raw[s] - out[s]), SPLITS.index(s)))[:rest]:
        out[s] += 1
    return out


def _split_book(items: Sequence[SplitItem], cfg: SplitConfig, rng: random.Random) -> dict[str, str]:
    ratios = cfg.normalised_ratios()
    # Groups in a fixed order: sorted by id, so input order never matters.
    groups: dict[str, list[SplitItem]] = defaultdict(list)
    for item in sorted(items, key=lambda i: i.query_id):
        key = item.unit_id if cfg.rule == "by-unit" else item.query_id
        groups[key].append(item)
    group_ids = sorted(groups)
    leaf_of = {g: groups[g][0].leaf_id for g in group_ids}
    targets = _targets(len(items), ratios)
    counts = dict.fromkeys(SPLITS, 0)
    assigned: dict[str, str] = {}

    if cfg.leaves_in_train and ratios["train"] > 0:
        by_leaf: dict[str, list[str]] = defaultdict(list)
        for g in group_ids:
            by_leaf[leaf_of[g]].append(g)
        for leaf in sorted(by_leaf):
            chosen = rng.choice(by_leaf[leaf])
            assigned[chosen] = "train"
            counts["train"] += len(groups[chosen])

    rest = [g for g in group_ids if g not in assigned]
    rng.shuffle(rest)
    for g in rest:
        # Furthest below target (in questions) wins; ties go to the earlier split.
        split = max(SPLITS, key=lambda s: (targets[s] - counts[s], -SPLITS.index(s)))
        assigned[g] = split
        counts[split] += len(groups[g])
    return {item.query_id: assigned[g] for g in group_ids for item in groups[g]}


@dataclass(frozen=True)
class SplitResult:
    assignment: dict[str, str]  # query id → split
    manifest: dict[str, Any]


def assign_splits(items: Iterable[SplitItem], cfg: SplitConfig | None = None) -> SplitResult:
    """Split every book's questions; the result depends only on the items and ``cfg``."""
    cfg = cfg or SplitConfig()
    cfg.validate()
    items = list(items)
    ids = [i.query_id for i in items]
    if len(set(ids)) != len(ids):
        raise SearchTomeError("question ids must be unique to split them")
    by_book: dict[str, list[SplitItem]] = defaultdict(list)
    for item in items:
        by_book[item.book_id].append(item)
    assignment: dict[str, str] = {}
    for book_id in sorted(by_book):
        # One generator per book, seeded by seed and book: adding a book leaves the others alone.
        rng = random.Random(f"searchtome-split:{cfg.seed}:{book_id}")
        assignment.update(_split_book(by_book[book_id], cfg, rng))
    return SplitResult(assignment, split_manifest(items, assignment, cfg))


def split_manifest(
    items: Sequence[SplitItem], assignment: Mapping[str, str], cfg: SplitConfig
) -> dict[str, Any]:
    """Seed, rule, counts per split and per book, leaf coverage, unit leakage check."""
    ratios = cfg.normalised_ratios()  # for the targets

    def tally(subset: Sequence[SplitItem]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in SPLITS:
            mine = [i for i in subset if assignment[i.query_id] == s]
            out[s] = {
                "questions": len(mine),
                "units": len({i.unit_id for i in mine}),
                "leaves": len({i.leaf_id for i in mine}),
            }
        leaves = {i.leaf_id for i in subset}
        train_leaves = {i.leaf_id for i in subset if assignment[i.query_id] == "train"}
        out["leaves_with_questions"] = len(leaves)
        out["leaves_missing_from_train"] = len(leaves - train_leaves)
        return out

    by_book: dict[str, list[SplitItem]] = defaultdict(list)
    for item in items:
        by_book[item.book_id].append(item)
    units_split: dict[str, set[str]] = defaultdict(set)
    for item in items:
        units_split[item.unit_id].add(assignment[item.query_id])
    return {
        "algorithm": ALGORITHM,
        "rule": cfg.rule,
        "seed": cfg.seed,
        # As given (not rounded), so feeding them back reproduces the same targets exactly.
        "ratios": {s: cfg.ratios[s] for s in SPLITS},
        "leaves_in_train": cfg.leaves_in_train,
        "targets": _targets(len(items), ratios),
        "counts": tally(items),
        "books": {b: tally(by_book[b]) for b in sorted(by_book)},
        "units_in_several_splits": sum(1 for v in units_split.values() if len(v) > 1),
    }


def split_file_hashes(out_dir: PathLike, files: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """``{split: {relative file: sha256}}`` for the files that hold each split."""
    out = Path(out_dir)
    return {s: {f: sha256_file(out / f) for f in files[s]} for s in SPLITS if s in files}
