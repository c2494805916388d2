"""Page furniture on synthetic pages: what is dropped, and what stays body text."""

from __future__ import annotations

from searchtome.ingest.layout import Block, Page, mark_furniture

HEIGHT = 800.0


def _page(number: int, body: list[str], *, note: str | None = None) -> Page:
    page = Page(number, 600.0, HEIGHT)
    page.blocks.append(Block(50, 20, 550, 35, [f"Chapter {number} Running Head"]))
    for i, text in enumerate(body):
        y = 100.0 + 60 * i
        page.blocks.append(Block(50, y, 550, y + 40, [text, "and a second line of it"]))
    if note is not None:
        page.blocks.append(Block(560, 400, 590, 500, [note], text=note))
    page.blocks.append(Block(290, 770, 310, 785, [str(number)]))
    return page


def test_heads_page_numbers_and_side_notes_are_dropped_body_text_stays() -> None:
    note = "Available free of charge from the publisher"
    pages = [
        _page(n, [f"Body paragraph {n}.{k} is here" for k in range(3)], note=note)
        for n in (1, 2, 3, 4, 5)
    ]
    dropped = mark_furniture(pages)
    assert dropped == 5 * 3  # head, page number and side note on each page
    for page in pages:
        kept = [b.lines[0] for b in page.blocks if not b.dropped]
        assert kept == [f"Body paragraph {page.number}.{k} is here" for k in range(3)]


def test_text_on_too_few_pages_is_not_furniture() -> None:
    pages = [_page(n, ["Some body text"]) for n in (1, 2)]
    mark_furniture(pages)
    # Two pages are too few to call a repeated head furniture; a bare page number still is.
    assert [b.dropped for b in pages[0].blocks] == [False, False, True]


def test_line_y_spreads_lines_over_the_block() -> None:
    block = Block(0, 100, 10, 140, ["a", "b"])
    assert (block.line_y(0), block.line_y(1)) == (110.0, 130.0)
