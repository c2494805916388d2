"""InBudget@B and TokensToGold: hand-computed readings, edge cases, the tokenizer, the scorer and
the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from searchtome.cli import main
from searchtome.dataset.loader import Dataset, load
from searchtome.errors import SearchTomeError
from searchtome.leaderboard.scoring import score_runs
from searchtome.metrics import Qrels, evaluate, parse_measure
from searchtome.metrics.budget import TOKENIZER, section_tokens
from searchtome.metrics.scorer import budget_values, consequential_ties
from searchtome.records import Leaf, Query, Run, TocNode

MEASURES = [
    "InBudget@4",
    "InBudget@5",
    "InBudget@9",
    "InBudget@8",
    "TokensToGold",
    "TokensToGold@1",
]


def _node(nid: str, parent: str | None, leaf: bool, text: str = "") -> TocNode:
    level = nid.split("/")[1].count(".") + 1
    return TocNode(nid, nid.split("/")[0], nid, level, None, parent, leaf, (nid,), None, text)


def _leaf(nid: str, text: str) -> Leaf:
    return Leaf(nid, nid.split("/")[0], (nid,), nid, text, None, None)


@pytest.fixture()
def book() -> Dataset:
    """Book b: chapter b/1 (its own introduction, 3 tokens) holding b/1.1 (5) and b/1.2 (4), then
    b/2 (5): 17 tokens in all. Book c: one leaf c/1 (2 tokens)."""
    toc = [
        _node("b/1", None, False, "Intro text."),  # Intro | text | .
        _node("b/1.1", "b/1", True),
        _node("b/1.2", "b/1", True),
        _node("b/2", None, True),
        _node("c/1", None, True),
    ]
    leaves = [
        _leaf("b/1.1", "one two three four five"),
        _leaf("b/1.2", "Hello, world!"),  # Hello | , | world | !
        _leaf("b/2", "café—x 12ab"),  # caf | é | — | x | 12ab
        _leaf("c/1", "other book"),
    ]
    gold = {"q1": "b/1.2", "q2": "b/2", "q3": "b/1.1", "q4": "b/1.1", "q5": "b/2", "q6": "b/2"}
    queries = [Query(q, "b", "?", leaf, "test", f"{leaf}#u1") for q, leaf in gold.items()]
    return Dataset(Path("."), {}, toc, leaves, queries)


RANKINGS = {
    "q1": ("b/1.1", "b/1.2"),  # 5 + 4 = 9 tokens, gold at rank 2
    "q2": ("b/1", "nope", "c/1", "b/2"),  # chapter 12, invalid 0, other book's leaf 0, gold 5
    "q3": ("b/1.1",),  # gold first, 5 tokens: longer than a budget of 4
    # q4: no ranking at all
    "q5": (),  # an empty ranking
    "q6": ("b/1", "b/1", "b/2"),  # 12 + 12 + 5 = 29 read, more than the book's 17
}


def test_the_tokenizer_counts_code_points_by_its_declared_rule() -> None:
    assert TOKENIZER.count("one two three four five") == 5
    assert TOKENIZER.count("Hello, world!") == 4
    assert TOKENIZER.count("café—x 12ab") == 5  # é and — are one token each
    assert TOKENIZER.count("don’t  \t\n") == 3
    assert TOKENIZER.count("") == 0
    assert TOKENIZER.count("\u00a0") == 1  # only ASCII whitespace separates
    assert TOKENIZER.to_dict()["name"] == "searchtome-words-1"


def test_sections_cost_their_text_and_a_chapter_its_whole_subtree(book: Dataset) -> None:
    tokens = section_tokens(book)
    assert tokens.node == {"b/1": 12, "b/1.1": 5, "b/1.2": 4, "b/2": 5, "c/1": 2}
    assert tokens.book == {"b": 17, "c": 2}
    assert tokens.cost("c/1", "b") == 0 and tokens.cost("nope", "b") == 0
    assert section_tokens(book) is tokens  # counted once per dataset


def test_hand_computed_values(book: Dataset) -> None:
    qids = ["q1", "q2", "q3", "q4", "q5", "q6"]
    v = budget_values(RANKINGS, book, qids, MEASURES)
    # q1 reads 9, q2 17, q3 5, q6 29 (capped at the book's 17 by TokensToGold); q4, q5 miss.
    assert v["InBudget@4"].tolist() == [0, 0, 0, 0, 0, 0]
    assert v["InBudget@5"].tolist() == [0, 0, 1, 0, 0, 0]
    assert v["InBudget@8"].tolist() == [0, 0, 1, 0, 0, 0]
    assert v["InBudget@9"].tolist() == [1, 0, 1, 0, 0, 0]
    assert v["TokensToGold"].tolist() == [9, 17, 5, 17, 17, 17]
    # Reading rank 1 only: q3 finds its gold there, every other query misses (the book, 17).
    assert v["TokensToGold@1"].tolist() == [17, 17, 5, 17, 17, 17]


def test_a_chapter_holding_the_gold_is_paid_for_but_does_not_find_it(book: Dataset) -> None:
    v = budget_values({"q3": ("b/1",)}, book, ["q3"], ["InBudget@100", "TokensToGold"])
    assert v["InBudget@100"].tolist() == [0.0] and v["TokensToGold"].tolist() == [17.0]


def test_the_order_given_decides_not_the_ids(book: Dataset) -> None:
    before = budget_values({"q1": ("b/1.1", "b/1.2")}, book, ["q1"], ["TokensToGold"])
    after = budget_values({"q1": ("b/1.2", "b/1.1")}, book, ["q1"], ["TokensToGold"])
    assert before["TokensToGold"].tolist() == [9.0] and after["TokensToGold"].tolist() == [4.0]


def test_names_cutoffs_and_descriptions() -> None:
    m = parse_measure("inbudget@2048")
    assert str(m) == "InBudget@2048" and m.rank_cutoff is None  # a budget, not a rank
    assert parse_measure("TokensToGold@10").rank_cutoff == 10
    assert str(parse_measure("tokens_to_gold")) == "TokensToGold"
    assert str(parse_measure("InBudget@100000")) == "InBudget@100000"  # past MAX_CUTOFF ranks
    with pytest.raises(SearchTomeError, match=r"needs a cutoff, e.g. InBudget@512"):
        parse_measure("InBudget")
    with pytest.raises(SearchTomeError, match=r"above 10,000,000, the largest token budget"):
        parse_measure("InBudget@20000000")
    formula = parse_measure("InBudget@1").definition.formula()
    assert "subtree" in formula and "no node of the query's book 0" in formula
    assert "whole book" in parse_measure("TokensToGold").definition.formula()


def test_qrels_alone_cannot_price_a_reading(tiny_dataset: Path) -> None:
    run = Run("r", {"q": ("a",)})
    with pytest.raises(SearchTomeError, match=r"InBudget@512: token-budget measures read"):
        evaluate(run, Qrels({"q": {"a": 1}}), ["R@1", "InBudget@512"])
    with pytest.raises(SearchTomeError, match=r"score against a dataset \(--data\) instead"):
        score_runs([run], qrels=Qrels({"q": {"a": 1}}), measures=["TokensToGold"])


def _plain_reading(ds: Dataset, ranking: tuple[str, ...], gold: str, book: str) -> float:
    """TokensToGold by the definition, one id at a time, from the texts (a second route)."""
    text = {x.leaf_id: x.text for x in ds.leaves()}
    nodes = ds.nodes

    def cost(doc: str) -> int:
        node = nodes.get(doc)
        if node is None or node.book_id != book:
            return 0
        below = [n for n in nodes.values() if n.node_id == doc or doc in _ancestors(nodes, n)]
        return sum(TOKENIZER.count(text.get(n.node_id, n.text)) for n in below)

    whole = sum(TOKENIZER.count(text.get(n.node_id, n.text)) for n in ds.toc(book))
    read = 0
    for doc in ranking:
        read += cost(doc)
        if doc == gold:
            return float(min(read, whole))
    return float(whole)


def _ancestors(nodes: dict[str, TocNode], node: TocNode) -> list[str]:
    out = []
    while node.parent_id is not None:
        out.append(node.parent_id)
        node = nodes[node.parent_id]
    return out


def test_scorer_agrees_with_the_definition_and_its_mean(tiny_dataset: Path) -> None:
    ds = load(tiny_dataset)
    rng = random.Random(3)
    ids = [*ds.nodes, "nowhere/1"]
    queries = ds.queries("test")
    rankings = {q.query_id: tuple(rng.sample(ids, rng.randint(0, 8))) for q in queries[1:]}
    for q in queries[1::3]:  # some golds ranked, at any depth
        r = [x for x in rankings[q.query_id] if x != q.leaf_id]
        r.insert(rng.randint(0, len(r)), q.leaf_id)
        rankings[q.query_id] = tuple(r)
    names = ["InBudget@60", "InBudget@512", "TokensToGold", "TokensToGold@3"]
    board = score_runs([Run("r", rankings)], data=ds, measures=["R@1", *names])
    s = board.systems[0]
    expected = [
        _plain_reading(ds, rankings.get(q.query_id, ()), q.leaf_id, q.book_id) for q in queries
    ]
    assert s.per_query["TokensToGold"].tolist() == expected
    assert any(x > 0 for x in s.per_query["InBudget@512"])  # the case is not all misses
    for budget in (60, 512):
        fits = [
            float(q.leaf_id in rankings.get(q.query_id, ()) and e <= budget)
            for q, e in zip(queries, expected, strict=True)
        ]
        assert s.per_query[f"InBudget@{budget}"].tolist() == fits
    micro = board.micro("r")
    for m in names:
        assert micro[m] == pytest.approx(float(np.mean(s.per_query[m])), abs=1e-12)
    assert board.system_json("r")["tokenizer"]["name"] == "searchtome-words-1"


def test_ties_with_the_gold_are_reported_for_budget_measures() -> None:
    # "g" tied with "x": breaking the tie the other way changes the tokens read before g ends.
    run = Run("r", {"q": ("x", "g")}, scores={"q": (1.0, 1.0)})
    qrels = Qrels({"q": {"g": 1}})
    assert consequential_ties(run, qrels, ["InBudget@512"]) == ["q"]
    assert consequential_ties(run, qrels, ["R@5"]) == []


def test_the_command_line_scores_and_records_the_tokenizer(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = load(tiny_dataset)
    run = tmp_path / "predictions.jsonl"
    lines = [{"query_id": q.query_id, "leaf_ids": [q.leaf_id]} for q in ds.queries("test")]
    run.write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = ["score", str(run), "--data", str(tiny_dataset), "--format", "json", "--measures"]
    assert main([*args, "InBudget@512", "TokensToGold"]) == 0
    [out] = json.loads(capsys.readouterr().out)
    assert out["tokenizer"]["pattern"] == TOKENIZER.pattern
    # Every tiny leaf is short: the gold read first always fits, and costs its own tokens only.
    assert out["micro"]["InBudget@512"] == 1.0
    sizes = [section_tokens(ds).node[q.leaf_id] for q in ds.queries("test")]
    assert out["micro"]["TokensToGold"] == pytest.approx(float(np.mean(sizes)))
    assert main(["score", str(run), "--data", str(tiny_dataset), "--measures", "TokensToGold"]) == 0
    table = capsys.readouterr().out
    assert "TokensToGold: mean tokens; tokens counted by searchtome-words-1" in table


def test_compare_tests_a_budget_measure(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = load(tiny_dataset)
    tokens = section_tokens(ds)
    files = []
    for name, first in (("gold", True), ("chapter", False)):
        lines = []
        for q in ds.queries("test"):
            chapter = f"{q.book_id}/1"
            ranking = [q.leaf_id] if first else [chapter, q.leaf_id]
            lines.append({"query_id": q.query_id, "leaf_ids": ranking})
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        files.append(str(path))
    args = ["compare", *files, "--data", str(tiny_dataset), "--permutations", "99"]
    assert main([*args, "--bootstrap", "0", "--format", "json", "--measures", "TokensToGold"]) == 0
    report = json.loads(capsys.readouterr().out)
    [test] = [t for t in report["tests"] if t["scope"] == "overall"]
    # The chapter first costs its subtree before the gold (capped at the book); the statistic
    # is the macro mean over domains of gold-first minus chapter-first.
    extra: dict[str, list[int]] = {}
    for q in ds.queries("test"):
        chapter_first = tokens.node[f"{q.book_id}/1"] + tokens.node[q.leaf_id]
        cost = min(chapter_first, tokens.book[q.book_id]) - tokens.node[q.leaf_id]
        extra.setdefault(ds.domain(q.book_id), []).append(cost)
    expected = -float(np.mean([np.mean(v) for v in extra.values()]))
    assert test["measure"] == "TokensToGold" and expected < 0
    assert test["diff"] == pytest.approx(expected)
