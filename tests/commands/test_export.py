"""The `export` command as a user runs it (and that `import` and `publish` are registered)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import build_parser, main


def test_commands_are_registered() -> None:
    parser = build_parser()
    help_text = parser.format_help()
    for command in ("export", "import", "publish"):
        assert command in help_text
    args = parser.parse_args(["export", "beir", "DATA", "--out", "X", "--books", "a,b"])
    assert args.books == ["a", "b"] and args.format == "beir"


def test_export_beir_cli(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "beir"
    assert main(["export", "beir", str(tiny_dataset), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{out}/pooled: 15 leaves; queries train 30, dev 30, test 30" in printed
    assert (
        (out / "alpha-bio" / "qrels" / "dev.tsv")
        .read_text()
        .startswith("query-id\tcorpus-id\tscore\n")
    )
    assert main(["export", "beir", str(tiny_dataset), "--out", str(out), "--no-per-book"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["pooled", "searchtome-export.json"]


def test_export_trec_cli(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trec"
    assert main(["export", "trec", str(tiny_dataset), "--out", str(out), "--splits", "test"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "searchtome-export.json",
        "test.qrels",
        "test.queries.tsv",
    ]
    assert "test.qrels: 30 queries" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "beir", "{data}", "--out", "{out}", "--no-pooled", "--no-per-book"], "nothing"),
        (["export", "beir", "{tmp}/missing", "--out", "{out}"], "not a SearchTome dataset"),
        (["export", "trec", "{data}", "--out", "{out}", "--splits", "tset"], "did you mean 'test'"),
        (["export", "beir", "hf://nope", "--out", "{out}"], "hf://ORG/NAME"),
    ],
)
def test_errors_are_one_line(
    argv: list[str],
    message: str,
    tiny_dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [a.format(data=tiny_dataset, out=tmp_path / "out", tmp=tmp_path) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def _run_lines(data: Path) -> list[str]:
    """Predictions for every test query: own scores, plus ties in and out of trec_eval's order."""
    from searchtome.dataset import load

    ds = load(data)
    lines = []
    for i, q in enumerate(ds.queries("test")):
        leaves = [leaf.leaf_id for leaf in ds.leaves(q.book_id)]
        ranked = [leaves[(i + j) % len(leaves)] for j in range(len(leaves))]
        scores = [10.0 - j / 3 for j in range(len(ranked))]
        if i % 3 == 1:
            scores[0] = scores[1]  # tied across rank 1, in whatever order the ids fall
        row = {"query_id": q.query_id, "leaf_ids": ranked}
        if i % 5 != 4:  # some rankings carry no scores at all
            row["scores"] = scores
        lines.append(json.dumps(row))
    return lines


def test_export_run_round_trip_scores_identically(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "mine.jsonl"
    src.write_text("\n".join(_run_lines(tiny_dataset)) + "\n")
    trec, back = tmp_path / "mine.trec", tmp_path / "back.jsonl"
    assert main(["export", "run", str(src), "--format", "trec", "--out", str(trec)]) == 0
    assert "30 queries of mine as trec; rank-derived scores for" in capsys.readouterr().out
    assert main(["export", "run", str(trec), "--format", "jsonl", "--out", str(back)]) == 0
    capsys.readouterr()
    scored = []
    for path in (src, trec, back):
        argv = ["score", str(path), "--data", str(tiny_dataset), "--format", "json", "--by-query"]
        assert main([*argv, "--measures", "R@1", "R@3", "nDCG@3", "RR@10", "AP"]) == 0
        (system,) = json.loads(capsys.readouterr().out)
        scored.append({k: v for k, v in system.items() if k != "system"})
    assert scored[0] == scored[1] == scored[2]
    given = [json.loads(line) for line in src.read_text().splitlines()]
    returned = {row["query_id"]: row for row in map(json.loads, back.read_text().splitlines())}
    for row in given:
        assert returned[row["query_id"]]["leaf_ids"] == row["leaf_ids"]  # every order kept
    untied = [r for r in given if "scores" in r and r["scores"][0] != r["scores"][1]]
    assert untied and all(returned[r["query_id"]]["scores"] == r["scores"] for r in untied)
