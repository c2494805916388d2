"""Measures beyond the registry, computed by ir_measures; and which tied scores are reported."""

from __future__ import annotations

import logging
import math
import random
import sys

import ir_measures
import pytest

from searchtome.errors import SearchTomeError
from searchtome.metrics import Qrels, evaluate, parse_measure
from searchtome.metrics.scorer import consequential_ties, evaluate_arrays
from searchtome.metrics.ties import tie_groups, ties_that_matter
from searchtome.records import Run


def _case(seed: int) -> tuple[dict[str, dict[str, int]], Run]:
    """Graded qrels with judged non-relevant ids, and a run with strictly decreasing scores."""
    rng = random.Random(seed)
    docs = [f"b/{i}" for i in range(30)]
    qrels, rankings, scores = {}, {}, {}
    for q in range(60):
        judged = rng.sample(docs, rng.randint(1, 6))
        qrels[f"q{q:02d}"] = {d: rng.randint(0, 2) for d in judged}
        if q % 7 == 3:
            continue  # unanswered: a miss for both tools
        ranked = rng.sample(docs, rng.randint(1, 15))
        rankings[f"q{q:02d}"] = tuple(ranked)
        scores[f"q{q:02d}"] = tuple(float(len(ranked) - i) for i in range(len(ranked)))
    return qrels, Run("r", rankings, scores)


@pytest.mark.parametrize("seed", range(3))
def test_ir_measures_names_equal_ir_measures_itself(seed: int) -> None:
    qrels, run = _case(seed)
    names = ["AP", "Judged@10", "P@5", "Rprec", "Bpref"]
    ours = evaluate_arrays(run, Qrels(qrels), names)
    direct = {q: dict(zip(run.rankings[q], run.scores[q], strict=True)) for q in run.rankings}
    expected: dict[str, dict[str, float]] = {n: {} for n in names}
    for m in ir_measures.iter_calc(list(map(ir_measures.parse_measure, names)), qrels, direct):
        expected[str(m.measure)][m.query_id] = m.value
    qids = Qrels(qrels).query_ids()
    for name in names:
        want = [expected[name].get(q, 0.0) for q in qids]  # unanswered query = 0
        assert ours[name] == pytest.approx(want), name
    assert parse_measure("P@5").external is False  # built-in fast path, same value
    assert parse_measure("AP").external and str(parse_measure("AP")) == "AP"


def test_unknown_names_and_the_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SearchTomeError, match=r"unknown measure 'nope@1'.*ir_measures can parse"):
        parse_measure("nope@1")
    monkeypatch.setitem(sys.modules, "ir_measures", None)  # as if the extra were not installed
    with pytest.raises(SearchTomeError, match=r"'ir' extra: pip install 'searchtome\[ir\]'"):
        parse_measure("AP")
    assert str(parse_measure("R@1")) == "R@1"  # built-ins need nothing


def test_tie_groups() -> None:
    assert tie_groups([3.0, 2.0, 2.0, 1.0, 1.0, 1.0, 0.5]) == [(1, 3), (3, 6)]
    assert tie_groups([1.0]) == [] and tie_groups([]) == []


def test_only_ties_that_can_change_a_measure_count() -> None:
    qrels = {"a": {"x/1": 1}, "b": {"x/4": 1}, "c": {"x/1": 1}, "d": {"x/1": 1, "x/2": 1}}
    run = Run(
        "r",
        {q: ("x/1", "x/2", "x/3", "x/4", "x/5") for q in qrels},
        {
            "a": (5.0, 5.0, 3.0, 2.0, 1.0),  # gold tied across rank 1: R@1 depends on the order
            "b": (5.0, 4.0, 3.0, 2.0, 2.0),  # gold tied at ranks 4-5: below R@1/R@3
            "c": (5.0, 4.0, 3.0, 3.0, 1.0),  # tie of two unjudged ids: changes nothing
            "d": (5.0, 5.0, 3.0, 2.0, 1.0),  # both tied ids relevant: changes nothing
        },
    )
    assert ties_that_matter(run, qrels, [1, 3], 0) == ["a"]
    assert ties_that_matter(run, qrels, [3], 0) == []  # the tie sits inside the top 3
    assert ties_that_matter(run, qrels, [3], 3) == ["a"]  # ...where nDCG@3 weighs the order
    assert ties_that_matter(run, qrels, [4], 0) == ["b"]  # straddles rank 4
    assert ties_that_matter(run, qrels, [], math.inf) == ["a", "b"]
    assert consequential_ties(run, Qrels(qrels), ["R@3", "RR@10"]) == ["a", "b"]
    assert consequential_ties(run, Qrels(qrels), ["R@1", "R@3"]) == ["a"]


def test_one_warning_with_the_count_and_no_line(caplog: pytest.LogCaptureFixture) -> None:
    qrels = Qrels({"a": {"x/2": 1}, "b": {"x/9": 1}})
    run = Run("r", {"a": ("x/1", "x/2"), "b": ("x/1", "x/2")}, {"a": (1.0, 1.0), "b": (1.0, 1.0)})
    with caplog.at_level(logging.WARNING):
        evaluate(run, qrels, ["R@1"])
    assert len(caplog.records) == 1
    assert "1 rankings have tied scores that can change a reported measure" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        evaluate(run, qrels, ["R@5"])  # both ids inside the cut: nothing reported
    assert caplog.text == ""
