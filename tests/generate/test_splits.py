"""Seeded, unit-grouped, leaf-aware splits."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict

import pytest

from searchtome.errors import SearchTomeError
from searchtome.generate.splits import (
    DEFAULT_RATIOS,
    WHOLE_CHILD_COUNTS,
    WHOLE_CHILD_RATIOS,
    SplitConfig,
    SplitItem,
    assign_splits,
    parse_ratios,
)
from searchtome.records import SPLITS
from tests.conftest import PEER


def _items(book: str = "bk", leaves: int = 20, seed: int = 0) -> list[SplitItem]:
    """Leaves with 1-8 units of 2-10 questions each."""
    rng = random.Random(seed)
    items = []
    for leaf in range(1, leaves + 1):
        for unit in range(1, rng.randint(1, 8) + 1):
            for q in range(1, rng.choice([2, 4, 6, 8, 10]) + 1):
                items.append(
                    SplitItem(
                        f"{book}-{leaf}-u{unit}-q{q:02d}",
                        book,
                        f"{book}/{leaf}",
                        f"{book}/{leaf}#u{unit}",
                    )
                )
    return items


def test_default_ratios_are_the_papers():
    # The paper's Table 1 totals: 103,249 / 62,458 / 24,502 of 190,209 = 54.3 / 32.8 / 12.9 %.
    shares = {s: round(DEFAULT_RATIOS[s] * 100, 1) for s in SPLITS}
    assert shares == {"test": 54.3, "train": 32.8, "dev": 12.9}
    assert DEFAULT_RATIOS["train"] == pytest.approx(62458 / 190209)
    assert sum(DEFAULT_RATIOS.values()) == pytest.approx(1.0)
    # The Whole Child's own figures, kept for --endpoint local (the demo).
    assert WHOLE_CHILD_RATIOS["train"] == pytest.approx(1056 / 3190)
    assert WHOLE_CHILD_RATIOS["dev"] == pytest.approx(388 / 3190)
    assert SplitConfig().ratios == DEFAULT_RATIOS


def test_units_stay_whole_and_every_leaf_is_in_train():
    items = _items(leaves=40)
    result = assign_splits(items)
    by_unit = defaultdict(set)
    for item in items:
        by_unit[item.unit_id].add(result.assignment[item.query_id])
    assert all(len(s) == 1 for s in by_unit.values())
    train_leaves = {i.leaf_id for i in items if result.assignment[i.query_id] == "train"}
    assert train_leaves == {i.leaf_id for i in items}
    m = result.manifest
    assert m["units_in_several_splits"] == 0 and m["counts"]["leaves_missing_from_train"] == 0
    assert sum(m["counts"][s]["questions"] for s in SPLITS) == len(items)


def test_counts_follow_the_ratios():
    items = _items(leaves=150, seed=3)
    counts = Counter(assign_splits(items).assignment.values())
    for split in SPLITS:
        assert counts[split] / len(items) == pytest.approx(DEFAULT_RATIOS[split], abs=0.02)


def test_seeded_and_independent_of_input_order():
    items = _items()
    shuffled = items[:]
    random.Random(5).shuffle(shuffled)
    assert assign_splits(items).assignment == assign_splits(shuffled).assignment
    assert assign_splits(items).assignment != assign_splits(items, SplitConfig(seed=7)).assignment


def test_books_are_split_independently():
    alone = assign_splits(_items("aa")).assignment
    together = assign_splits(_items("aa") + _items("zz", seed=9)).assignment
    assert {k: v for k, v in together.items() if k.startswith("aa-")} == alone
    manifest = assign_splits(_items("aa") + _items("zz", seed=9)).manifest
    assert set(manifest["books"]) == {"aa", "zz"}


def test_by_question_mode_lets_units_straddle_splits():
    items = _items(leaves=30)
    m = assign_splits(items, SplitConfig(rule="by-question")).manifest
    assert m["rule"] == "by-question" and m["units_in_several_splits"] > 0
    assert m["counts"]["leaves_missing_from_train"] == 0


def test_when_leaves_outnumber_the_train_target_train_grows():
    # One unit per leaf: every unit must go to train.
    items = [SplitItem(f"b-{i}-q1", "b", f"b/{i}", f"b/{i}#u1") for i in range(10)]
    assert set(assign_splits(items).assignment.values()) == {"train"}
    free = assign_splits(items, SplitConfig(leaves_in_train=False)).assignment
    assert set(free.values()) == set(SPLITS)


def test_ratio_parsing_and_validation():
    assert parse_ratios("33,12,55") == {"train": 33.0, "dev": 12.0, "test": 55.0}
    assert parse_ratios("train=0.5,dev=0.25,test=0.25")["dev"] == 0.25
    with pytest.raises(SearchTomeError, match="cannot read split ratios"):
        parse_ratios("1,2")
    with pytest.raises(SearchTomeError, match="did you mean"):
        assign_splits(_items(), SplitConfig(rule="by-units"))
    with pytest.raises(SearchTomeError, match="unique"):
        assign_splits(_items() + _items()[:1])


@pytest.mark.skipif(not PEER.exists(), reason="needs ../shared/peer")
def test_on_the_real_whole_child_questions():
    """The 3,214 questions of the independent release, re-split by our rule."""
    items = []
    for split in SPLITS:
        path = PEER / "data" / "splits" / "whole-child" / f"{split}.jsonl"
        for line in path.read_text().splitlines():
            row = json.loads(line)
            items.append(
                SplitItem(row["id"], "whole-child", row["gold_leaf_id"], row["source_unit_id"])
            )
    m = assign_splits(items, SplitConfig(ratios=WHOLE_CHILD_RATIOS)).manifest
    counts = {s: m["counts"][s]["questions"] for s in SPLITS}
    total = sum(counts.values())
    assert total == 3214
    assert counts == {"train": 1062, "dev": 392, "test": 1760}  # as docs/build.md says
    for split in SPLITS:
        # Within 1.5 points of the paper's shares for this book.
        assert counts[split] / total == pytest.approx(WHOLE_CHILD_COUNTS[split] / 3190, abs=0.015)
    assert m["counts"]["train"]["leaves"] == 129 and m["counts"]["leaves_missing_from_train"] == 0
    assert m["units_in_several_splits"] == 0
    # With the default ratios (the paper's shares over its 18 books), as docs/build.md says.
    m = assign_splits(items).manifest
    assert {s: m["counts"][s]["questions"] for s in SPLITS} == {
        "train": 1056,
        "dev": 412,
        "test": 1746,
    }
    assert m["counts"]["leaves_missing_from_train"] == 0
