"""Scoring aggregates, the score/compare/leaderboard commands, and check mode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from searchtome.cli import main
from searchtome.dataset.loader import Dataset, load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard, score_runs
from searchtome.metrics import Qrels
from searchtome.records import Run
from searchtome.submissions import make_meta, write_submission, write_trec

MEASURES = ["R@1", "R@3", "R@5", "nDCG@3", "RR@10"]
STRUCTURE = ["NonLeaf@1", "NonLeaf@3", "Invalid@1", "Invalid@3"]


@pytest.fixture(scope="module")
def ds(tiny_dataset: Path) -> Dataset:
    return load(tiny_dataset)


def system_runs(ds: Dataset) -> dict[str, Run]:
    """Three systems with hand-checkable scores on the tiny dataset's test split.

    * ``oracle``: the gold leaf first, always;
    * ``law-only``: gold first on Law queries; on Natural Sciences a non-leaf node first and the
      gold second;
    * ``guesser``: an id that exists nowhere first, then another book's leaf, then the gold.
    """
    runs: dict[str, dict[str, tuple[str, ...]]] = {"oracle": {}, "law-only": {}, "guesser": {}}
    other = {"alpha-bio": "beta-law/1.1.1", "beta-law": "alpha-bio/1.1.1"}
    for q in ds.queries("test"):
        runs["oracle"][q.query_id] = (q.leaf_id,)
        if ds.domain(q.book_id) == "Law":
            runs["law-only"][q.query_id] = (q.leaf_id,)
        else:
            runs["law-only"][q.query_id] = (f"{q.book_id}/1", q.leaf_id)
        runs["guesser"][q.query_id] = (f"{q.book_id}/99", other[q.book_id], q.leaf_id)
    return {name: Run(name, rankings) for name, rankings in runs.items()}


def write_systems(root: Path, ds: Dataset, names: list[str] | None = None) -> Path:
    runs = system_runs(ds)
    for name in names or list(runs):
        meta = make_meta(
            name,
            description=f"{name} test system",
            command=f"make {name}",
            dataset_revision="tiny",
            hardware="cpu",
            date_="2025-01-31",
        )
        write_submission(root / name, runs[name], meta)
    return root


def test_aggregates_macro_micro_domain_book(ds: Dataset) -> None:
    board = score_runs(list(system_runs(ds).values()), data=ds, split="test")
    n_law = sum(ds.domain(q.book_id) == "Law" for q in ds.queries("test"))
    n = len(ds.queries("test"))
    assert board.aggregate("oracle")["R@1"] == 1.0
    law_only = board.aggregate("law-only")
    assert law_only["R@1"] == pytest.approx(0.5)  # macro: Law 1.0, Natural Sciences 0.0
    assert board.micro("law-only")["R@1"] == pytest.approx(n_law / n)
    assert law_only["R@3"] == 1.0 and law_only["RR@10"] == pytest.approx(0.75)
    assert law_only["nDCG@3"] == pytest.approx((1 + 1 / np.log2(3)) / 2)
    assert law_only["NonLeaf@1"] == pytest.approx(0.5) and law_only["Invalid@1"] == 0.0
    # The structure counts may be named among the measures (they are always computed).
    named = score_runs([system_runs(ds)["law-only"]], data=ds, measures=("R@1", "NonLeaf@1"))
    assert named.aggregate("law-only")["NonLeaf@1"] == pytest.approx(0.5)
    assert board.per_domain("law-only") == {
        "Law": pytest.approx({**dict.fromkeys(MEASURES, 1.0), **dict.fromkeys(STRUCTURE, 0.0)}),
        "Natural Sciences": pytest.approx(
            {
                "R@1": 0.0,
                "R@3": 1.0,
                "R@5": 1.0,
                "nDCG@3": 1 / np.log2(3),
                "RR@10": 0.5,
                "NonLeaf@1": 1.0,
                "NonLeaf@3": 1.0,
                "Invalid@1": 0.0,
                "Invalid@3": 0.0,
            }
        ),
    }
    assert set(board.per_book("guesser")) == {"alpha-bio", "beta-law"}
    guesser = board.aggregate("guesser")
    assert guesser["Invalid@1"] == 1.0 and guesser["Invalid@3"] == 1.0 and guesser["R@3"] == 1.0
    assert guesser["nDCG@3"] == pytest.approx(0.5)


def test_score_json_shape(tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys) -> None:
    root = write_systems(tmp_path / "subs", ds)
    args = ["score", str(root / "oracle"), str(root / "law-only"), "--data", str(tiny_dataset)]
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["system"] for d in data] == ["oracle", "law-only"]
    for d in data:
        assert set(d) == {
            "system",
            "aggregate",
            "micro",
            "per_domain",
            "per_book",
            "n_queries",
            "answered",
            "empty",
        }
        assert set(d["aggregate"]) == {*MEASURES, *STRUCTURE}
        assert set(d["per_domain"]) == {"Law", "Natural Sciences"}
        assert set(d["per_book"]) == {"alpha-bio", "beta-law"}
    assert data[1]["aggregate"]["R@1"] == pytest.approx(0.5)
    assert main([*args, "--format", "json", "--by-query"]) == 0
    data = json.loads(capsys.readouterr().out)
    per_query = data[1]["per_query"]
    assert set(per_query) == {q.query_id for q in ds.queries("test")}
    q = next(q for q in ds.queries("test") if ds.domain(q.book_id) == "Natural Sciences")
    assert per_query[q.query_id]["R@1"] == 0.0 and per_query[q.query_id]["RR@10"] == 0.5


def test_score_table_and_csv(tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys) -> None:
    root = write_systems(tmp_path / "subs", ds, ["law-only"])
    assert main(["score", str(root / "law-only"), "--data", str(tiny_dataset)]) == 0
    out = capsys.readouterr().out
    assert "macro average over domains" in out
    row = next(line for line in out.splitlines() if line.startswith("law-only"))
    assert row.split()[:5] == ["law-only", "30/30", "0", "50.0", "100.0"]
    assert (
        main(
            [
                "score",
                str(root / "law-only"),
                "--data",
                str(tiny_dataset),
                "--format",
                "csv",
                "--by-query",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "system,level,key,n_queries," + ",".join(MEASURES + STRUCTURE)
    levels = [line.split(",")[1] for line in lines[1:]]
    assert (
        levels.count("aggregate") == 1 and levels.count("domain") == 2 and levels.count("book") == 2
    )
    assert levels.count("query") == 30
    assert lines[1].startswith("law-only,aggregate,,30,0.5,1.0,")


def test_score_trec_run_with_trec_qrels_like_trec_eval(tmp_path: Path, ds: Dataset, capsys) -> None:
    qrels = Qrels.from_dataset(ds, "test")
    qrels_path = qrels.to_trec(tmp_path / "qrels.txt")
    run = system_runs(ds)["law-only"]
    run_path = write_trec(tmp_path / "law.trec", run)
    assert main(["score", str(run_path), "--qrels", str(qrels_path), "--format", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["system"] == "law-only"
    assert result["per_domain"] == {} and result["per_book"] == {}
    assert set(result["aggregate"]) == set(MEASURES)  # no ToC-based counts without a dataset
    scores = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.rankings.items()}
    ref = pytrec_eval.RelevanceEvaluator(qrels.to_dict(), {"recall_1", "ndcg_cut_3"}).evaluate(
        scores
    )
    assert result["aggregate"]["R@1"] == pytest.approx(
        np.mean([v["recall_1"] for v in ref.values()])
    )
    assert result["aggregate"]["nDCG@3"] == pytest.approx(
        np.mean([v["ndcg_cut_3"] for v in ref.values()])
    )


def test_missing_queries_score_as_misses(
    tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys
) -> None:
    oracle = system_runs(ds)["oracle"]
    keep = dict(list(oracle.rankings.items())[:15])
    path = write_trec(tmp_path / "half.trec", Run("half", keep))
    assert main(["score", str(path), "--data", str(tiny_dataset), "--format", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["answered"] == 15 and result["micro"]["R@1"] == pytest.approx(0.5)


def test_compare_command(tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys) -> None:
    root = write_systems(tmp_path / "subs", ds)
    subs = [str(root / n) for n in ("oracle", "law-only", "guesser")]
    base = [
        "compare",
        *subs,
        "--data",
        str(tiny_dataset),
        "--permutations",
        "999",
        "--bootstrap",
        "200",
    ]
    assert main(base) == 0
    md = capsys.readouterr().out
    assert "## Significance: oracle, law-only, guesser" in md
    assert "### Law (14 queries)" in md and "### Natural Sciences (16 queries)" in md
    assert main([*base, "--format", "json", "--control", "oracle"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {(t["a"], t["b"]) for t in data["tests"]} == {
        ("oracle", "law-only"),
        ("oracle", "guesser"),
    }
    r1 = next(
        t
        for t in data["tests"]
        if t["b"] == "guesser" and t["measure"] == "R@1" and t["scope"] == "overall"
    )
    assert r1["diff"] == 1.0 and r1["p"] == pytest.approx(1 / 1000) and r1["significant"]
    assert main([*base, "--format", "latex"]) == 0
    assert r"\begin{tabular}" in capsys.readouterr().out
    assert main(["compare", subs[0], "--data", str(tiny_dataset)]) == 1
    assert "at least two submissions" in capsys.readouterr().err


def test_leaderboard_build_rejects_and_is_deterministic(tmp_path: Path, ds: Dataset) -> None:
    root = write_systems(tmp_path / "subs", ds)
    broken = root / "broken"
    broken.mkdir()
    (broken / "predictions.jsonl").write_text('{"query_id": "x"}\n')
    (broken / "meta.json").write_text("{}")
    (root / "_notes").mkdir()  # ignored: not a submission
    first = build_leaderboard(
        ds, root, tmp_path / "lb1", LeaderboardOptions(permutations=999, bootstrap=200)
    )
    assert [e.system for e in first.entries] == ["oracle", "law-only", "guesser"]
    assert [e.rank for e in first.entries] == [1, 2, 3]
    assert [Path(r.path).name for r in first.rejected] == ["broken"]
    # Every tiny section is short: law-only's chapter and guesser's ids priced 0 (not in the
    # book, another book's leaf) still leave the gold inside 512 tokens, so no budget differs.
    assert first.entries[1].marks == {
        "R@1": True,
        "R@3": False,
        "nDCG@3": True,
        "InBudget@512": False,
        "InBudget@2048": False,
    }
    assert {e.aggregate["InBudget@512"] for e in first.entries} == {1.0}
    assert first.entries[2].marks["R@1"] is True
    assert first.entries[1].domain_marks["Law"]["R@1"] is False
    assert first.entries[1].domain_marks["Natural Sciences"]["R@1"] is True
    out = tmp_path / "lb1"
    assert sorted(p.name for p in out.iterdir()) == [
        "figures",
        "index.html",
        "leaderboard.json",
        "leaderboard.md",
    ]
    data = json.loads((out / "leaderboard.json").read_text())
    assert data["format"] == "searchtome-leaderboard-v1"
    assert [s["system"] for s in data["systems"]] == ["oracle", "law-only", "guesser"]
    assert data["systems"][1]["aggregate"]["R@1"] == pytest.approx(0.5)
    assert data["rejected"][0]["path"] == "broken" and data["rejected"][0]["n_errors"] > 0
    assert data["comparison"]["settings"]["control"] == "oracle"
    r1_train = data["analyses"]["r1_by_training_questions"]
    assert sum(r1_train["n_queries"]) == 30 and r1_train["values"]["oracle"] == [1.0] * len(
        r1_train["buckets"]
    )
    depth = data["analyses"]["r1_by_depth"]
    assert depth["buckets"] == ["2", "3"] and sum(depth["n_queries"]) == 30
    md = (out / "leaderboard.md").read_text()
    # oracle answers 1 id per query and law-only 2: their R@3 and nDCG@3 read past their
    # rankings, so the pages show "—" and say why; guesser (3 deep) gets numbers.
    assert "| 2 | law-only | 50.0† | — | — |" in md
    # Per domain, side by side: Law, Natural Sciences, then the macro average.
    assert "| # | System | Law R@1 | Law R@3 | Law nDCG@3 | Natural Sciences R@1 |" in md
    assert "| 1 | oracle | 100.0 | — | — | 100.0 | — | — | 100.0 | — | — |" in md
    assert (
        "| 3 | guesser | 0.0† | 100.0 | 50.0† | 0.0† | 100.0 | 50.0† | 0.0† | 100.0 | 50.0† |" in md
    )
    assert "—: ranking shorter than k" in md and "oracle (1 deep: R@3, nDCG@3)" in md
    assert [s["depth"] for s in data["systems"]] == [1, 2, 3]
    assert data["systems"][1]["beyond_depth"] == ["R@3", "R@5", "nDCG@3", "RR@10"]
    assert data["systems"][2]["beyond_depth"] == ["R@5", "RR@10"]
    assert "figures/r1_by_training_questions.png" in md
    second = build_leaderboard(
        ds, root, tmp_path / "lb2", LeaderboardOptions(permutations=999, bootstrap=200)
    )
    assert second.entries[1].aggregate == first.entries[1].aggregate
    for name in ("leaderboard.json", "leaderboard.md", "index.html", "figures/r1_by_depth.png"):
        assert (out / name).read_bytes() == (tmp_path / "lb2" / name).read_bytes(), name


def test_leaderboard_cli_check_mode(
    tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys
) -> None:
    root = write_systems(tmp_path / "subs", ds)
    out = tmp_path / "lb"
    expected_path = tmp_path / "expected.json"
    base = [
        "leaderboard",
        "--data",
        str(tiny_dataset),
        "--submissions",
        str(root),
        "--out",
        str(out),
        "--permutations",
        "500",
        "--bootstrap",
        "0",
    ]
    assert main([*base, "--write-expected", str(expected_path)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[1].split()[:3] == ["#", "System", "R@1"]
    assert main([*base, "--check", str(expected_path)]) == 0
    assert "check: OK (0 of" in capsys.readouterr().out
    expected = json.loads(expected_path.read_text())
    expected["tolerance"] = 0.01
    expected["systems"]["law-only"]["R@1"] = 0.505  # within 0.01 of 0.5
    expected["systems"]["guesser"]["R@3"] = {"value": 0.9, "tolerance": 0.05}  # actual 1.0
    expected["systems"]["ghost"] = {"R@1": 0.3}
    expected_path.write_text(json.dumps(expected))
    assert main([*base, "--check", str(expected_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("law-only  R@1  0.5050  0.5000  -0.0050  0.01  within tolerance")
        for line in lines
    )
    assert any(
        line.startswith("guesser  R@3  0.9000  1.0000  +0.1000  0.05  FAIL") for line in lines
    )
    assert any(line.startswith("ghost  R@1  0.3000  –") and line.endswith("FAIL") for line in lines)
    assert any(
        line.startswith("oracle  R@1  1.0000  1.0000  +0.0000") and line.endswith("  OK")
        for line in lines
    )
    assert "check: FAIL (2 of" in "\n".join(lines)


def test_leaderboard_cli_exit_code_with_rejected_submission(
    tmp_path: Path, ds: Dataset, tiny_dataset: Path, capsys
) -> None:
    root = write_systems(tmp_path / "subs", ds, ["oracle", "guesser"])
    (root / "guesser" / "meta.json").unlink()
    rc = main(
        [
            "leaderboard",
            "--data",
            str(tiny_dataset),
            "--submissions",
            str(root),
            "--out",
            str(tmp_path / "lb"),
            "--permutations",
            "100",
        ]
    )
    assert rc == 1
    out = capsys.readouterr().out
    assert f"rejected: {root / 'guesser'}" in out
    assert f"{root / 'guesser' / 'meta.json'}: file: missing" in out
