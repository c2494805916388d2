"""Generation units: merging short paragraphs, never across leaves."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchtome.errors import SearchTomeError
from searchtome.generate.units import UnitConfig, make_units
from searchtome.records import Leaf, Paragraph


def _leaf(leaf_id: str) -> Leaf:
    return Leaf(leaf_id, leaf_id.split("/")[0], ("T",), "T", "", 1, 1)


def _paras(leaf_id: str, sizes: list[int]) -> list[Paragraph]:
    return [
        Paragraph(f"{leaf_id}#p{i}", leaf_id, ("w" * (n - 1) + "."), 1)
        for i, n in enumerate(sizes, 1)
    ]


def test_short_paragraphs_merge_forward_and_tails_backward():
    cfg = UnitConfig(min_chars=100, drop_below=10)
    paras = _paras("b/1", [30, 150, 120, 20])
    units, dropped = make_units([_leaf("b/1")], paras, cfg)
    assert [u.paragraph_ids for u in units] == [
        ("b/1#p1", "b/1#p2"),  # a 30-char lead-in joins what follows
        ("b/1#p3", "b/1#p4"),  # a 20-char tail joins the unit before it
    ]
    assert [u.unit_id for u in units] == ["b/1#u1", "b/1#u2"]
    assert units[0].text == paras[0].text + "\n" + paras[1].text
    assert units[0].leaf_id == "b/1" and units[0].book_id == "b" and not dropped


def test_units_never_cross_leaves():
    cfg = UnitConfig(min_chars=100, drop_below=10)
    leaves = [_leaf("b/1"), _leaf("b/2")]
    paras = _paras("b/1", [150, 20]) + _paras("b/2", [20, 30])
    units, _ = make_units(leaves, paras, cfg)
    assert [u.paragraph_ids for u in units] == [
        ("b/1#p1", "b/1#p2"),
        ("b/2#p1", "b/2#p2"),  # short on its own, but the leaf has nothing else
    ]


def test_too_short_units_are_dropped_and_reported():
    units, dropped = make_units(
        [_leaf("b/1"), _leaf("b/2")], _paras("b/1", [12]) + _paras("b/2", [300]), UnitConfig()
    )
    assert [u.unit_id for u in dropped] == ["b/1#u1"]
    assert [u.unit_id for u in units] == ["b/2#u1"]


def test_long_paragraphs_are_never_split_or_glued_together():
    cfg = UnitConfig(min_chars=100, drop_below=10)
    units, _ = make_units([_leaf("b/1")], _paras("b/1", [60, 2480, 3000]), cfg)
    assert [u.paragraph_ids for u in units] == [("b/1#p1", "b/1#p2"), ("b/1#p3",)]


def test_bad_settings_and_orphans():
    with pytest.raises(SearchTomeError, match="drop_below"):
        make_units([], [], UnitConfig(min_chars=10, drop_below=50))
    with pytest.raises(SearchTomeError, match="do not exist"):
        make_units([_leaf("b/1")], _paras("b/9", [100]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=1, max_value=700), min_size=0, max_size=12),
        min_size=1,
        max_size=5,
    )
)
def test_every_paragraph_lands_in_exactly_one_unit_of_its_leaf(sizes_per_leaf):
    cfg = UnitConfig(min_chars=200, drop_below=40)
    leaves = [_leaf(f"b/{i}") for i in range(1, len(sizes_per_leaf) + 1)]
    paras = [
        p
        for leaf, sizes in zip(leaves, sizes_per_leaf, strict=True)
        for p in _paras(leaf.leaf_id, sizes)
    ]
    units, dropped = make_units(leaves, paras, cfg)
    seen = [pid for u in units + dropped for pid in u.paragraph_ids]
    assert sorted(seen) == sorted(p.paragraph_id for p in paras)
    order = {p.paragraph_id: i for i, p in enumerate(paras)}
    for unit in units + dropped:
        assert all(pid.startswith(unit.leaf_id + "#") for pid in unit.paragraph_ids)
        idx = [order[pid] for pid in unit.paragraph_ids]
        assert idx == list(range(idx[0], idx[0] + len(idx)))  # consecutive
    by_leaf: dict[str, list] = {}
    for unit in units + dropped:
        by_leaf.setdefault(unit.leaf_id, []).append(unit)
    for group in by_leaf.values():
        if len(group) > 1:  # only a leaf's sole unit may stay under min_chars
            assert all(len(u.text) >= cfg.min_chars for u in group)
    assert all(len(u.text) >= cfg.drop_below for u in units)
