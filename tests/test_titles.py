"""One-line titles and title paths, shared by ingest and the baselines."""

from __future__ import annotations

import pytest

from searchtome.titles import PATH_SEP, clean_title, title_path


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("  Cells  ", "Cells"),
        ("Cells\nand\tTissues", "Cells and Tissues"),
        ("Cells \r\n  and\u00a0 Tissues", "Cells and Tissues"),  # NBSP is whitespace too
        ("Line\u2028separated\u2029title", "Line separated title"),
        ("soft\u00adhyphen, zero\u200bwidth, \ufeffmark", "softhyphen, zerowidth, mark"),
        ("a\x00b\x07c", "a b c"),  # controls split words, as the PDF meant a gap there
        ("Cafe\u0301", "Café"),  # NFC: the combining accent joins its letter
        ("\u200b \u00ad\n", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_clean_title(raw: str | None, clean: str) -> None:
    assert clean_title(raw) == clean


def test_clean_title_is_idempotent() -> None:
    # Ingest cleans titles before they are stored; the baselines clean them again.
    for raw in ("  a\n\nb ", "x\u00ady\x00z", "Cafe\u0301 \u2028 au lait"):
        once = clean_title(raw)
        assert clean_title(once) == once


def test_title_path_cleans_every_title_and_skips_empty_ones() -> None:
    assert title_path(("Ch 1", " Cells ", "", "Lipids")) == "Ch 1 > Cells > Lipids"
    assert title_path(("Chapter\n1", "  Cells\tand  Tissues ", "\u200b", " ")) == (
        "Chapter 1 > Cells and Tissues"
    )
    assert title_path(()) == ""
    assert title_path(("\n",)) == ""
    assert PATH_SEP.join(("a", "b")) == title_path(["a", "b"])
