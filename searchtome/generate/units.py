"""Generation units: the passages questions are written from.

A unit is one or more consecutive paragraphs of a single leaf. Paragraphs shorter than
``min_chars`` (a heading-like line, a bullet, a one-sentence lead-in) say too little to ask
about alone, so they are merged with what follows them until the unit is long enough; a short
tail at the end of a leaf joins the unit before it. Units never cross a leaf boundary, so every
question keeps exactly one gold leaf. Units still shorter than ``drop_below`` (a leaf whose whole
text is a caption, say) are left out and reported. Paragraphs are never split: a unit is at
most one long paragraph plus the short ones merged into it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from searchtome.errors import SearchTomeError
from searchtome.records import Leaf, Paragraph, Unit, book_of

DEFAULT_MIN_CHARS = 150
DEFAULT_DROP_BELOW = 40
JOINER = "\n"


@dataclass(frozen=True)
class UnitConfig:
    min_chars: int = DEFAULT_MIN_CHARS
    drop_below: int = DEFAULT_DROP_BELOW

    def validate(self) -> None:
        if not 0 <= self.drop_below <= self.min_chars:
            raise SearchTomeError(
                "unit sizes must satisfy 0 <= drop_below <= min_chars, got "
                f"drop_below={self.drop_below}, min_chars={self.min_chars}"
            )


def _size(parts: list[Paragraph]) -> int:
    return sum(len(p.text) for p in parts) + len(JOINER) * max(0, len(parts) - 1)


def leaf_units(
    leaf_id: str, paragraphs: list[Paragraph], cfg: UnitConfig
) -> tuple[list[Unit], list[Unit]]:
    """Units of one leaf, in order, and the ones dropped for being too short."""
    groups: list[list[Paragraph]] = []
    current: list[Paragraph] = []
    for para in paragraphs:
        if not para.text.strip():
            continue
        # A group closes once it is long enough; paragraphs are never split, so a long one
        # is a unit of its own and a short lead-in always joins the paragraph after it.
        if current and _size(current) >= cfg.min_chars:
            groups.append(current)
            current = []
        current.append(para)
    if current:
        if groups and _size(current) < cfg.min_chars:
            groups[-1].extend(current)  # a short tail joins the unit before it
        else:
            groups.append(current)
    book_id = book_of(leaf_id)
    units: list[Unit] = []
    dropped: list[Unit] = []
    for group in groups:
        text = JOINER.join(p.text.strip() for p in group)
        unit = Unit(
            unit_id=f"{leaf_id}#u{len(units) + len(dropped) + 1}",
            leaf_id=leaf_id,
            book_id=book_id,
            paragraph_ids=tuple(p.paragraph_id for p in group),
            text=text,
        )
        (dropped if len(text) < cfg.drop_below else units).append(unit)
    return units, dropped


def make_units(
    leaves: Iterable[Leaf], paragraphs: Iterable[Paragraph], cfg: UnitConfig | None = None
) -> tuple[list[Unit], list[Unit]]:
    """Units of every leaf in document order (the order ``leaves`` come in), plus dropped ones.

    Paragraphs are taken in the order given within each leaf; their ids must name their leaf.
    """
    cfg = cfg or UnitConfig()
    cfg.validate()
    by_leaf: dict[str, list[Paragraph]] = {}
    for para in paragraphs:
        by_leaf.setdefault(para.leaf_id, []).append(para)
    units: list[Unit] = []
    dropped: list[Unit] = []
    known = set()
    for leaf in leaves:
        known.add(leaf.leaf_id)
        got, lost = leaf_units(leaf.leaf_id, by_leaf.get(leaf.leaf_id, []), cfg)
        units.extend(got)
        dropped.extend(lost)
    orphans = sorted(set(by_leaf) - known)
    if orphans:
        raise SearchTomeError(
            f"{len(orphans)} paragraph groups name leaves that do not exist, e.g. {orphans[0]!r}"
        )
    return units, dropped
