"""The runner and its commands: registry look-up, the submission it writes, tune, ls, the CLI.

Config layering itself is tested in tests/test_config.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field

import pytest
from searchtome.baselines import registry
from searchtome.baselines.bm25 import BM25Config
from searchtome.baselines.runner import (
    OutputOptions,
    RunOptions,
    check_run,
    execute,
    run_baseline,
)

from searchtome.cli import main
from searchtome.commands.tune import Ranking, tune
from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from searchtome.records import Run


def test_ls_lists_every_baseline_on_one_line(capsys):
    assert main(["ls", "baselines"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    names = [line.split()[0] for line in lines]
    assert {
        "bm25",
        "bm25-plain",
        "dpr",
        "dsi",
        "dsi-constrained",
        "hybrid",
        "navtree",
        "toc-navtree",
    } <= set(names)
    assert names == sorted(names)
    nav = next(line for line in lines if line.startswith("navtree "))
    assert "reconstruction" in nav and "[needs: ml]" in nav


def test_every_baseline_links_to_a_heading_or_anchor_of_its_own_doc_page():
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    for spec in registry.all_baselines():
        name = spec.name
        text = (docs / spec.doc).read_text(encoding="utf-8")
        # GitHub makes "### `bm25`" the anchor #bm25; a heading with more words needs <a id>.
        heading = re.search(rf"^#+ `{re.escape(name)}`$", text, re.M)
        assert heading or f'<a id="{name}"></a>' in text, f"{spec.doc} has no #{name}"


def test_unknown_baseline_suggests_the_close_name(tiny_dataset, capsys):
    assert main(["run", "bm52", "--data", str(tiny_dataset)]) == 1
    err = capsys.readouterr().err
    assert "unknown baseline 'bm52'" in err and "did you mean 'bm25'" in err
    assert "Traceback" not in err


def test_cli_run_writes_a_valid_submission(tiny_dataset, tmp_path, capsys):
    out = tmp_path / "sub"
    argv = ["run", "bm25", "--data", str(tiny_dataset), "--out", str(out), "--set", "k1=0.9"]
    assert main([*argv, "--seed", "7"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}/"
    meta = json.loads((out / "meta.json").read_text())
    from searchtome.submissions import META_REQUIRED, read_submission

    assert set(META_REQUIRED) <= set(meta)
    assert meta["system"] == "sub" and meta["split"] == "test" and meta["seed"] == 7
    assert meta["config"]["k1"] == 0.9 and meta["config"] == {**meta["config"], "b": BM25Config().b}
    assert meta["command"].startswith("searchtome run bm25") and "k1=0.9" in meta["command"]
    assert meta["trained_on"] == [] and meta["models"] == []
    assert "rank-bm25" in meta["versions"] and "searchtome" in meta["versions"]
    assert "(data sha256:" in meta["dataset_revision"] and meta["date"][:2] == "20"
    info = meta["run_info"]  # wall time and memory live in meta.json, next to the config
    assert info["wall_time_s"] >= 0 and info["peak_rss_mib"] > 10
    assert info["overrides"] == {"k1": "0.9"}
    from searchtome.io import sha256_file

    assert info["dataset"]["manifest_sha256"] == sha256_file(tiny_dataset / "manifest.json")
    # The CPU and its ISA flags, read from /proc/cpuinfo here, not invented.
    from searchtome.hardware import ISA_FLAGS, cpu_flags

    machine = info["machine"]
    assert set(machine["isa"]) == set(ISA_FLAGS) and machine["cores"] >= 1
    assert machine["isa_known"] == bool(cpu_flags())
    assert all(present == (flag in cpu_flags()) for flag, present in machine["isa"].items())
    assert machine["cpu"] in meta["hardware"]
    assert info["dtype"] is None  # BM25 runs no model
    sub = read_submission(out)
    assert len(sub.run) == len(load(tiny_dataset).queries("test"))
    # A variant in another folder is its own system; the config from meta.json repeats the run.
    again = run_baseline(
        "bm25",
        tiny_dataset,
        RunOptions(config=out / "meta.json", seed=7),
        OutputOptions(out=tmp_path / "again"),
    )
    assert (again / "predictions.jsonl").read_bytes() == (out / "predictions.jsonl").read_bytes()
    again_meta = json.loads((again / "meta.json").read_text())
    assert (
        again_meta["system"] == "again"
        and "variant of baseline 'bm25'" in again_meta["description"]
    )
    assert again_meta["config"] == meta["config"]


def test_cli_bad_split_and_override(tiny_dataset, capsys):
    assert main(["run", "bm25", "--data", str(tiny_dataset), "--split", "tset"]) == 1
    assert "did you mean 'test'" in capsys.readouterr().err
    assert main(["run", "bm25", "--data", str(tiny_dataset), "--set", "k=1"]) == 1
    assert "unknown config key 'k'" in capsys.readouterr().err


@dataclass(frozen=True)
class _Cfg:
    leak: bool = False
    extra: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class _FreeCfg(_Cfg):
    @property
    def free_form(self) -> bool:
        return True


def test_the_runner_rejects_a_run_that_breaks_the_contract(tiny_dataset, monkeypatch):
    ds = load(tiny_dataset)

    def fake(dataset, split, config, ctx):
        rankings = {}
        for q in dataset.queries(split):
            other = next(b for b in dataset.book_ids() if b != q.book_id)
            book = other if config.leak else q.book_id
            rankings[q.query_id] = tuple(x.leaf_id for x in dataset.leaves(book))
        return Run("fake", rankings)

    monkeypatch.setitem(
        registry.BASELINES._entries, "fake", registry.BaselineSpec("fake", "test", _Cfg, fake)
    )
    run, meta, _ = execute("fake", ds, "dev")
    assert meta.split == "dev" and len(run) == len(ds.queries("dev"))
    with pytest.raises(SearchTomeError, match="is not a leaf of"):
        execute("fake", ds, "dev", overrides=["leak=true"])
    with pytest.raises(SearchTomeError, match="missing"):
        check_run(Run("x", {}), ds, "dev")
    # A free-form baseline (zero-shot replies) keeps ids that name no leaf, for the scorer.
    monkeypatch.setitem(
        registry.BASELINES._entries, "fake", registry.BaselineSpec("fake", "test", _FreeCfg, fake)
    )
    run, _, _ = execute("fake", ds, "dev", overrides=["leak=true"])
    book_of = {q.query_id: q.book_id for q in ds.queries("dev")}
    own = {b: {x.leaf_id for x in ds.leaves(b)} for b in ds.book_ids()}
    assert all(not set(ids) & own[book_of[q]] for q, ids in run.rankings.items())


def test_tune_scores_every_grid_point_on_dev(tiny_dataset, capsys):
    rows = tune("bm25", tiny_dataset, {"k1": ["0.5", "1.5"], "title": ["none", "path"]})
    assert len(rows) == 4
    assert [r["R@1"] for r in rows] == sorted((r["R@1"] for r in rows), reverse=True)
    assert {tuple(sorted(r["setting"].items())) for r in rows} == {
        (("k1", k), ("title", t)) for k in ("0.5", "1.5") for t in ("none", "path")
    }
    assert main(["tune", "bm25", "--data", str(tiny_dataset), "--grid", "b=0.3,0.9"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| b | R@1 | R@3 | nDCG@3 | s |") and table.count("\n") == 4


@dataclass(frozen=True)
class _PickCfg:
    pick: str = "a"


def test_tune_ranks_by_the_macro_mean_over_domains_unless_told(tiny_dataset, monkeypatch, tmp_path):
    ds = load(tiny_dataset)
    alpha = [q for q in ds.queries("dev") if q.book_id == "alpha-bio"]  # Natural Sciences
    beta = [q for q in ds.queries("dev") if q.book_id == "beta-law"]  # Law
    assert len(alpha) > len(beta) + 1  # the premise: one domain has more queries

    def fake(dataset, split, config, ctx):
        # "a": every alpha query right, no beta one; "b": every beta query and one alpha one.
        right = {q.query_id for q in alpha}
        if config.pick == "b":
            right = {q.query_id for q in beta} | {alpha[0].query_id}
        rankings = {}
        for q in dataset.queries(split):
            wrong = next(x.leaf_id for x in dataset.leaves(q.book_id) if x.leaf_id != q.leaf_id)
            rankings[q.query_id] = (q.leaf_id if q.query_id in right else wrong,)
        return Run("fake", rankings)

    monkeypatch.setitem(
        registry.BASELINES._entries, "fake", registry.BaselineSpec("fake", "test", _PickCfg, fake)
    )
    grid = {"pick": ["a", "b"]}
    micro = tune("fake", ds, grid, ranking=Ranking(aggregate="micro"))
    macro = tune("fake", ds, grid)  # macro is the default, as the leaderboard ranks
    assert [r["setting"]["pick"] for r in micro] == ["a", "b"]
    assert [r["setting"]["pick"] for r in macro] == ["b", "a"]
    n = len(alpha) + len(beta)
    assert micro[0]["R@1"] == pytest.approx(len(alpha) / n)
    assert macro[0]["R@1"] == pytest.approx((1 / len(alpha) + 1) / 2)
    out = tmp_path / "tune.json"
    argv = ["tune", "fake", "--data", str(tiny_dataset), "--grid", "pick=a,b", "--out", str(out)]
    assert main(argv) == 0
    table = json.loads(out.read_text())
    assert table["aggregate"] == "macro" and table["rows"][0]["setting"] == {"pick": "b"}
    assert main([*argv, "--aggregate", "micro"]) == 0
    table = json.loads(out.read_text())
    assert table["aggregate"] == "micro" and table["rows"][0]["setting"] == {"pick": "a"}
    with pytest.raises(SearchTomeError, match="unknown aggregate 'macor'"):
        tune("fake", ds, grid, ranking=Ranking(aggregate="macor"))


def test_depth_and_gzip(tiny_dataset, tmp_path):
    from searchtome.submissions import read_submission

    out = tmp_path / "shallow"
    # Without stopwords every leaf shares "and" with every query, so full rankings are long.
    argv = ["run", "bm25", "--data", str(tiny_dataset), "--set", "stopwords=none"]
    assert main([*argv, "--out", str(out), "--depth", "3", "--gzip"]) == 0
    assert (out / "predictions.jsonl.gz").is_file() and not (out / "predictions.jsonl").exists()
    sub = read_submission(out)
    assert {len(ids) for ids in sub.run.rankings.values()} == {3}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["command"].endswith("--depth 3 --gzip") and meta["run_info"]["depth"] == 3
    # the config records the depth the run holds, not the baseline's default of 100
    assert meta["config"]["depth"] == 3
    assert main([*argv, "--out", str(tmp_path / "deep")]) == 0
    assert max(len(ids) for ids in read_submission(tmp_path / "deep").run.rankings.values()) > 3
    assert main([*argv, "--out", str(out), "--depth", "0"]) == 1


def test_run_never_overwrites_another_run_by_default(tiny_dataset, tmp_path, monkeypatch, capsys):
    from searchtome.baselines.runner import RUNS_DIR

    from searchtome.commands import run as run_command

    assert run_command.RUNS_DIR == RUNS_DIR  # the help text names the runner's folder
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "submissions" / "bm25"
    committed.mkdir(parents=True)
    (committed / "meta.json").write_text(json.dumps({"command": "searchtome run bm25 --data X"}))
    (committed / "predictions.jsonl").write_text("committed\n")
    argv = ["run", "bm25", "--data", str(tiny_dataset)]
    assert main(argv) == 0  # the default folder is runs/bm25, not submissions/bm25
    assert capsys.readouterr().out.strip() == "wrote runs/bm25/"
    meta = json.loads((tmp_path / "runs" / "bm25" / "meta.json").read_text())
    # the dataset lies outside the current folder: a placeholder, not this machine's path
    assert meta["command"] == "searchtome run bm25 --data <DATA> --split test --seed 42"
    assert meta["run_info"]["dataset"]["path"] == "<DATA>"
    assert main(argv) == 0  # the same run again may replace itself
    capsys.readouterr()
    assert main([*argv, "--out", "submissions/bm25"]) == 1
    err = capsys.readouterr().err
    assert "submissions/bm25: was written by: searchtome run bm25 --data X;" in err
    assert "--force" in err and (committed / "predictions.jsonl").read_text() == "committed\n"
    assert main([*argv, "--seed", "3"]) == 1  # another run into runs/bm25
    assert main([*argv, "--out", "submissions/bm25", "--force"]) == 0
    assert not (committed / "predictions.jsonl").read_text().startswith("committed")
    inside = tmp_path / "data"
    shutil.copytree(tiny_dataset, inside)
    assert main(["run", "bm25", "--data", str(inside), "--out", str(tmp_path / "x")]) == 0
    meta = json.loads((tmp_path / "x" / "meta.json").read_text())
    assert meta["command"].startswith("searchtome run bm25 --data data --split test --out x ")
