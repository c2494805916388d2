"""The `export` command as a user runs it (and that `import` and `publish` are registered)."""

from __future__ import annotations

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
