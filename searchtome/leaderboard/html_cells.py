"""The page's table model: columns, cells, links and tables as plain values for the template.

``templates/page.html.j2`` renders them (autoescaped); :func:`th_attrs` and :func:`td_attrs`
give each header and cell its attributes (sort order, numeric sort key, classes, hover text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Column:
    label: str
    first: Literal["asc", "desc", ""] = "desc"  # first click's order; "" = not sortable
    kind: Literal["num", "name", "text"] = "num"
    title: str = ""


@dataclass(frozen=True)
class Link:
    href: str
    text: str
    external: bool = False  # rel="nofollow noopener": it leaves the page's own files


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | None = None  # the numeric sort key (data-v); None = sort by text
    title: str = ""
    css: str = ""
    links: tuple[Link, ...] = ()  # shown instead of the text: links, " · " between them
    colour: str = ""  # a swatch before the text: the system's colour on every figure


@dataclass(frozen=True)
class Table:
    id: str
    columns: list[Column]
    rows: list[list[Cell]]
    sortable: bool = True  # the page's script turns sortable headers into buttons


def th_attrs(col: Column) -> list[tuple[str, str]]:
    attrs = [("class", "name")] if col.kind != "num" else []
    attrs += [("data-first", col.first)] if col.first else []
    return attrs + ([("title", col.title)] if col.title else [])


def td_attrs(table: Table, col: Column, cell: Cell) -> list[tuple[str, str]]:
    classes = [cell.css] if cell.css else []
    classes += {"name": ["name", "sys"], "text": ["text"], "num": []}[col.kind]
    attrs = [("class", " ".join(classes))] if classes else []
    if col.kind == "num" and col.first:
        attrs.append(("data-v", "" if cell.sort is None else repr(cell.sort)))
    return attrs + ([("title", cell.title)] if cell.title else [])


def bold_best(rows: list[list[Cell]], columns: list[int]) -> list[list[Cell]]:
    """Mark each column's highest value ``best`` (every tied one), unless all values are equal."""
    for j in columns:
        values = [r[j].sort for r in rows if r[j].sort is not None]
        if not values or max(values) == min(values):
            continue
        top = max(values)
        for r in rows:
            if r[j].sort is not None and r[j].sort >= top - 1e-12:
                r[j] = Cell(r[j].text, r[j].sort, r[j].title, f"{r[j].css} best".strip())
    return rows
