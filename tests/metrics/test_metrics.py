"""searchtome.metrics: measure names, values equal to trec_eval's, the tie rule, missing queries."""

from __future__ import annotations

import logging
import math
import random

import pytest
import pytrec_eval

from searchtome.errors import SearchTomeError
from searchtome.metrics import (
    DEFAULT_MEASURES,
    FAMILIES,
    REGISTRY,
    Qrels,
    describe,
    evaluate,
    mean_scores,
    order_by_score,
    parse_measure,
    run_from_scores,
)
from searchtome.records import Run

# ir_measures name → pytrec_eval measure
TREC_NAMES = {
    "R@1": "recall_1",
    "R@3": "recall_3",
    "R@5": "recall_5",
    "nDCG@3": "ndcg_cut_3",
    "nDCG@10": "ndcg_cut_10",
    "P@5": "P_5",
    "nDCG": "ndcg",
    "Success@1": "success_1",
    "Success@5": "success_5",
    "Success@10": "success_10",
}


def _random_case(seed: int, *, ties: bool, graded: bool):
    rng = random.Random(seed)
    docs = [f"book/{i}.{j}" for i in range(1, 8) for j in range(1, 6)]
    qrels = {}
    for q in range(120):
        n_rel = rng.randint(1, 4) if graded else 1
        qrels[f"q{q:03d}"] = {
            d: (rng.randint(1, 3) if graded else 1) for d in rng.sample(docs, n_rel)
        }
    scores = {}
    for qid in qrels:
        depth = rng.randint(0, 20)
        if ties:
            scores[qid] = {d: float(rng.randint(0, 4)) for d in rng.sample(docs, depth)}
        else:
            # strictly decreasing scores: trec_eval's re-sorting cannot change the order
            values = sorted(rng.sample(range(10_000), depth), reverse=True)
            scores[qid] = {d: v / 100 for d, v in zip(rng.sample(docs, depth), values, strict=True)}
    return qrels, scores


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("graded", [False, True])
def test_per_query_values_equal_pytrec_eval(seed: int, graded: bool) -> None:
    qrels, scores = _random_case(seed, ties=False, graded=graded)
    run = run_from_scores(scores, name="r")
    ours = evaluate(run, Qrels(qrels), list(TREC_NAMES))
    ref = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_NAMES.values())).evaluate(scores)
    # RR@10 is trec_eval's recip_rank on the run cut at 10
    cut = {q: dict(list(zip(run.rankings[q], run.scores[q], strict=True))[:10]) for q in scores}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    rr_ours = evaluate(run, Qrels(qrels), ["RR@10"])
    compared = 0
    for qid in qrels:
        if qid not in ref:  # pytrec_eval drops queries with an empty ranking
            assert all(v == 0.0 for v in ours[qid].values())
            continue
        for name, trec in TREC_NAMES.items():
            assert ours[qid][name] == pytest.approx(ref[qid][trec], abs=1e-12), (qid, name)
            compared += 1
        assert rr_ours[qid]["RR@10"] == pytest.approx(rr[qid]["recip_rank"], abs=1e-12)
    assert compared > 500


@pytest.mark.parametrize("seed", range(4))
def test_tie_rule_matches_trec_eval_for_runs_built_from_scores(seed: int) -> None:
    qrels, scores = _random_case(seed, ties=True, graded=True)
    run = run_from_scores(scores)
    assert any(len(set(s)) < len(s) for s in run.scores.values()), "the case must contain ties"
    ours = evaluate(run, Qrels(qrels), ["R@1", "R@3", "nDCG@3", "P@5"])
    ref = pytrec_eval.RelevanceEvaluator(
        qrels, {"recall_1", "recall_3", "ndcg_cut_3", "P_5"}
    ).evaluate(scores)
    for qid in ref:
        assert ours[qid]["R@1"] == pytest.approx(ref[qid]["recall_1"], abs=1e-12)
        assert ours[qid]["R@3"] == pytest.approx(ref[qid]["recall_3"], abs=1e-12)
        assert ours[qid]["nDCG@3"] == pytest.approx(ref[qid]["ndcg_cut_3"], abs=1e-12)
        assert ours[qid]["P@5"] == pytest.approx(ref[qid]["P_5"], abs=1e-12)


def test_order_by_score_breaks_ties_by_id_descending() -> None:
    ordered = order_by_score([("b/1", 1.0), ("b/3", 2.0), ("b/2", 1.0), ("b/10", 1.0)])
    assert [d for d, _ in ordered] == ["b/3", "b/2", "b/10", "b/1"]


def test_submitted_order_is_authoritative_even_with_tied_scores(
    caplog: pytest.LogCaptureFixture,
) -> None:
    qrels = Qrels({"q": {"x/1": 1}})
    # Tied scores: trec_eval would put x/2 first (id descending); the given order puts x/1 first.
    run = Run("r", {"q": ("x/1", "x/2")}, {"q": (1.0, 1.0)})
    with caplog.at_level(logging.WARNING, logger="searchtome.metrics.scorer"):
        result = evaluate(run, qrels, ["R@1"])
    assert result["q"]["R@1"] == 1.0
    assert "tied scores" in caplog.text and "tie rule" in caplog.text
    ref = pytrec_eval.RelevanceEvaluator({"q": {"x/1": 1}}, {"recall_1"}).evaluate(
        {"q": {"x/1": 1.0, "x/2": 1.0}}
    )
    assert ref["q"]["recall_1"] == 0.0  # the reason the rule exists


def test_known_values_for_one_gold() -> None:
    qrels = Qrels({"a": {"g": 1}, "b": {"g": 1}, "c": {"g": 1}, "d": {"g": 1}})
    run = Run(
        "r",
        {
            "a": ("g", "x", "y"),
            "b": ("x", "g", "y"),
            "c": ("x", "y", "g"),
            "d": ("x", "y", "z", "w", "g"),
        },
    )
    v = evaluate(run, qrels, DEFAULT_MEASURES)
    assert v["a"] == {"R@1": 1.0, "R@3": 1.0, "R@5": 1.0, "nDCG@3": 1.0, "RR@10": 1.0}
    assert v["b"]["R@1"] == 0.0 and v["b"]["R@3"] == 1.0
    assert v["b"]["nDCG@3"] == pytest.approx(1 / math.log2(3))
    assert v["b"]["RR@10"] == 0.5
    assert v["c"]["nDCG@3"] == pytest.approx(0.5)
    assert v["d"] == {"R@1": 0.0, "R@3": 0.0, "R@5": 1.0, "nDCG@3": 0.0, "RR@10": 0.2}


def test_missing_query_is_a_miss_and_counts_in_the_mean() -> None:
    qrels = Qrels({"a": {"g": 1}, "b": {"g": 1}, "c": {"h": 1}, "z": {"g": 0}})
    run = Run("r", {"a": ("g",), "c": ("h",), "extra": ("g",)})
    per_query = evaluate(run, qrels, ["R@1", "RR@10"])
    assert list(per_query) == ["a", "b", "c", "z"]  # every qrels query, in qrels order
    assert per_query["b"] == {"R@1": 0.0, "RR@10": 0.0}
    assert per_query["z"] == {"R@1": 0.0, "RR@10": 0.0}  # no relevant document: 0
    assert "extra" not in per_query
    assert mean_scores(per_query) == {"R@1": 0.5, "RR@10": 0.5}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("R@1", "R@1"),
        ("recall@3", "R@3"),
        ("Recall_5", "R@5"),
        ("ndcg@3", "nDCG@3"),
        ("NDCG_CUT_10", "nDCG@10"),
        ("MRR@10", "RR@10"),
        ("RR@10", "RR@10"),
        ("RR", "RR"),
        ("P@5", "P@5"),
        ("success@1", "Success@1"),
        ("hit_rate@10", "Success@10"),
        ("nonleaf@3", "NonLeaf@3"),
    ],
)
def test_measure_names_are_canonical(text: str, canonical: str) -> None:
    assert str(parse_measure(text)) == canonical


def test_bad_measure_names_say_what_to_do() -> None:
    with pytest.raises(SearchTomeError, match=r"unknown measure 'nDGC@3'.*did you mean"):
        parse_measure("nDGC@3")
    with pytest.raises(SearchTomeError, match=r"needs a cutoff, e.g. R@1"):
        parse_measure("R")
    with pytest.raises(SearchTomeError, match=r"at least 1"):
        parse_measure("R@0")
    # Names other tools use for other measures are refused, not guessed.
    with pytest.raises(SearchTomeError, match=r"'hits' is ambiguous.*Success@k"):
        parse_measure("hits@1")
    with pytest.raises(SearchTomeError, match=r"Accuracy.*Success@k"):
        parse_measure("accuracy@1")


def test_success_is_not_recall_with_several_relevant_ids() -> None:
    qrels = Qrels({"q": {"a": 1, "b": 2}, "one": {"g": 1}})
    run = Run("r", {"q": ("a", "x", "y"), "one": ("g",)})
    values = evaluate(run, qrels, ["R@1", "Success@1", "R@3", "Success@3"])
    assert values["q"] == {"R@1": 0.5, "Success@1": 1.0, "R@3": 0.5, "Success@3": 1.0}
    assert values["one"] == {"R@1": 1.0, "Success@1": 1.0, "R@3": 1.0, "Success@3": 1.0}


def test_every_registered_measure_is_described_with_a_formula() -> None:
    for family in FAMILIES:
        assert family.formula() and "{k}" in family.description, family.name
        assert REGISTRY[family.name] is family
    assert list(describe(["Success@5"])) == ["Success@5"]


def test_structural_flags_need_a_dataset() -> None:
    with pytest.raises(SearchTomeError, match=r"NonLeaf@1: structural flags"):
        evaluate(Run("r", {"q": ("a",)}), Qrels({"q": {"a": 1}}), ["NonLeaf@1"])


def test_qrels_readers(tmp_path, tiny_dataset) -> None:
    trec = tmp_path / "qrels.txt"
    trec.write_text("q1 0 b/1 1\nq1 0 b/2 0\nq2 0 b/3 2\n")
    q = Qrels.from_file(trec)
    assert q.to_dict() == {"q1": {"b/1": 1, "b/2": 0}, "q2": {"b/3": 2}}
    assert q.relevant("q1") == {"b/1"}
    beir = tmp_path / "test.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\tb/1\t1\n")
    assert Qrels.from_file(beir).to_dict() == {"q1": {"b/1": 1}}
    back = Qrels.from_trec(q.to_trec(tmp_path / "round.txt"))
    assert back.to_dict() == q.to_dict()
    bad = tmp_path / "bad.txt"
    bad.write_text("q1 0 b/1 1\nq1 0 b/2\n")
    with pytest.raises(SearchTomeError, match=r"bad\.txt:2: line: expected 4 fields"):
        Qrels.from_trec(bad)
    bad.write_text("q1 0 b/1 high\n")
    with pytest.raises(SearchTomeError, match=r"bad\.txt:1: rel: 'high' is not an integer"):
        Qrels.from_trec(bad)
    from searchtome.dataset.loader import load

    ds = load(tiny_dataset)
    gold = Qrels.from_dataset(ds, "test")
    assert len(gold) == len(ds.queries("test"))
    first = ds.queries("test")[0]
    assert gold[first.query_id] == {first.leaf_id: 1}
