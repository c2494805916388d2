"""Whether a blind release's held-back questions are public already: verbatim question matches.

A private half is blind only if its questions cannot be looked up. A release cut from a public
one (``import repro --blind``) keeps the source's question text, and the source publishes their
gold, so matching text recovers every answer. :func:`public_overlap` counts the private questions
whose text (whitespace collapsed, case folded) appears in a given public release with its gold:
a SearchTome dataset folder (every split but a blind one's) or a reproduction's release
(``data/splits/BOOK/*.jsonl``, field ``query``).
"""

from __future__ import annotations

from pathlib import Path

from searchtome.dataset.blind import load_private_queries, read_private
from searchtome.dataset.layout import MANIFEST_FILE
from searchtome.dataset.loader import load
from searchtome.dataset.repro_release import data_root
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, read_jsonl
from searchtome.records import SPLITS


def normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def public_texts(source: PathLike) -> set[str]:
    """The texts of the questions whose gold ``source`` publishes."""
    src = Path(source)
    if (src / MANIFEST_FILE).is_file():
        ds = load(src)
        hidden = ds.manifest.blind_split
        return {normal(q.text) for s in SPLITS if s != hidden for q in ds.queries(s)}
    try:
        data = data_root(src)
    except SearchTomeError:
        raise SearchTomeError(
            f"{src}: neither a dataset folder (manifest.json) nor a reproduction's release "
            "(data/splits/); give the public release to compare with"
        ) from None
    texts = set()
    for path in sorted((data / "splits").glob("*/*.jsonl")):
        for row in read_jsonl(path):
            text = row.get("query") if isinstance(row, dict) else None
            if isinstance(text, str):
                texts.add(normal(text))
    return texts


def public_overlap(private: PathLike, source: PathLike) -> str | None:
    """``None``, or one phrase saying how many private questions ``source`` publishes."""
    held = load_private_queries(private)
    known = public_texts(source)
    found = sum(normal(q.text) in known for q in held)
    if not found:
        return None
    split = read_private(private).split
    return (
        f"{found:,} of {len(held):,} private {split} questions appear verbatim in {source}, "
        "which publishes their gold"
    )
