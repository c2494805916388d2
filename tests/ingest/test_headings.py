"""Where a ToC entry starts: headings matched by their text, on synthetic pages."""

from __future__ import annotations

import pytest

from searchtome.ingest.headings import Position, locate_starts, norm, strip_label
from searchtome.ingest.layout import Block, Page
from searchtome.ingest.outline import OutlineEntry
from searchtome.ingest.toc import build_tree


@pytest.mark.parametrize(
    ("title", "bare"),
    [
        ("4.2 Breakpoints", "Breakpoints"),
        ("Chapter 4", ""),
        ("B.3.1 Files", "Files"),
        ("Breakpoints", "Breakpoints"),
    ],
)
def test_strip_label(title: str, bare: str) -> None:
    assert strip_label(title) == bare


def test_norm_keeps_letters_and_digits_only() -> None:
    assert norm("4.2  Break-Points!") == "42breakpoints"
    assert norm("Ａｐｐｅｎｄｉｘ É") == "appendixé"  # NFKC, casefolded


def _starts(blocks: list[Block], entries: list[OutlineEntry]) -> list:
    page = Page(1, 600.0, 800.0, blocks)
    tree = build_tree(entries, book_id="b", n_pages=1, source="outline")
    return locate_starts([page], tree.nodes, entries)


def test_heading_after_a_label_and_wrapped_over_two_lines() -> None:
    blocks = [
        Block(50, 100, 550, 140, ["Text of the previous section."]),
        Block(50, 200, 550, 240, ["4.2 Setting Break-", "points"]),
        Block(50, 260, 550, 300, ["The section's own text."]),
    ]
    (start,) = _starts(blocks, [OutlineEntry(1, "Setting Breakpoints", 1, None, 190.0)])
    assert start.how == "heading"
    assert start.pos == Position(0, 1, 0)
    assert start.heading == ((0, 1, 0), (0, 1, 1))


def test_without_a_heading_the_destination_point_decides() -> None:
    blocks = [Block(50, 100, 550, 140, ["Unrelated words."]), Block(50, 300, 550, 340, ["More."])]
    (start,) = _starts(blocks, [OutlineEntry(1, "Missing Title", 1, None, 250.0)])
    assert (start.how, start.pos, start.heading) == ("destination", Position(0, 1, 0), ())
