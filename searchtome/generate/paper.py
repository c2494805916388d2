"""Each book's counts against the paper's Table 1: pages, leaves and questions per split.

Only books whose catalog entry carries the paper's figures are compared; a ``--pdf-dir`` build,
or a catalog without figures (the sample books), gets no comparison at all. The comparison goes
into ``build-report.json`` (``paper_comparison``) and into the summary ``searchtome build``
prints (:class:`searchtome.generate.summary.BuildSummary`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from searchtome.generate.sources import BookSource
from searchtome.ingest.catalog import book_facts
from searchtome.ingest.figures import leaf_count_problem
from searchtome.records import Query

log = logging.getLogger(__name__)

# What is compared, in the order of the paper's Table 1 (its splits: test, train, dev).
COMPARED = ("pages", "leaves", "questions", "test", "train", "dev")


def _count(found: int, paper: int) -> dict[str, Any]:
    return {"found": found, "paper": paper, "ratio": round(found / paper, 3)}


def check_leaves(sources: Sequence[BookSource], extractions: Mapping[str, Any]) -> list[str]:
    """After extraction: one line (also logged) per book whose leaf count is not the paper's."""
    problems = []
    for src in sources:
        problem = leaf_count_problem(src.book, len(extractions[src.book.book_id].leaves))
        if problem is not None:
            log.warning("%s", problem)
            problems.append(problem)
    return problems


def paper_comparison(
    sources: Sequence[BookSource], extractions: Mapping[str, Any], queries: Iterable[Query]
) -> dict[str, dict[str, Any]]:
    """Per book with paper figures: found, paper and found/paper for each of :data:`COMPARED`,
    the outline depth the book was cut at, and the leaf problem if there is one."""
    per_split = Counter((q.book_id, q.split) for q in queries)
    out: dict[str, dict[str, Any]] = {}
    for src in sources:
        paper = book_facts(src.book).paper
        if paper is None:
            continue
        book_id = src.book.book_id
        extraction = extractions[book_id]
        splits = {s: per_split[(book_id, s)] for s in ("test", "train", "dev")}
        found = {
            "pages": extraction.toc.n_pages,
            "leaves": len(extraction.leaves),
            "questions": sum(splits.values()),
            **splits,
        }
        expected = {
            "pages": paper.pages,
            "leaves": paper.leaves,
            "questions": paper.questions,
            "test": paper.test,
            "train": paper.train,
            "dev": paper.dev,
        }
        entry: dict[str, Any] = {"leaf_depth": src.leaf_depth}
        entry.update({k: _count(found[k], expected[k]) for k in COMPARED})
        problem = leaf_count_problem(src.book, found["leaves"])
        if problem is not None:
            entry["leaf_problem"] = problem
        out[book_id] = entry
    return out
