"""The project's runs in ``submissions/`` validate and reproduce the committed leaderboard.

The committed board ranks the runs ``leaderboard/whole-child/runs.txt`` lists; a researcher's
folder added beside them by pull request is not on it, so nothing here changes when one is
merged (tests/service/test_pr_flow.py walks that road).
The Whole Child data are not in the repository (CC BY-NC-SA); the test imports them from the
reproduction's release in ``../shared/`` exactly as the README says, then regenerates the
leaderboard and checks it against ``leaderboard/whole-child/expected.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.leaderboard.runlist import read_run_list
from searchtome.leaderboard.seeds import config_differences, seed_name

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT.parent / "shared" / "peer" / "whole-child"
BOARD = ROOT / "leaderboard" / "whole-child"
RUNS = BOARD / "runs.txt"
BASELINES = {
    "bm25",
    "bm25-plain",
    "bm25-paper",
    "dpr",
    "dpr-paper",
    "hybrid",
    "navtree",
    "toc-navtree",
    "stair",
    "dsi",
    "dsi-constrained",
    "zeroshot-llm",
    "finetune",
    "finetune-hybrid",
}
# named variants of a baseline, committed beside it (same adapter, another decoder)
VARIANTS = {"stair-free": "stair"}


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _committed(seed_runs: bool = False) -> set[str]:
    """The committed board's runs: the systems, or (``seed_runs``) their other seeds
    (docs/seeds.md). Other folders in ``submissions/`` are researchers' runs."""
    names = set(read_run_list(RUNS))
    return {n for n in names if (seed_name(n) is not None) == seed_runs}


def test_every_baseline_has_a_committed_run() -> None:
    assert _committed() == BASELINES | set(VARIANTS)
    for name in _committed() | _committed(seed_runs=True):
        assert (ROOT / "submissions" / name / "meta.json").is_file(), name
        meta = json.loads((ROOT / "submissions" / name / "meta.json").read_text())
        assert meta["system"] == name and meta["split"] == "test"
        assert "whole-child" in meta["dataset_revision"]
        # no absolute path of the machine that ran it: relative paths and <DATA> only
        assert " --data <DATA> " in meta["command"] and " /" not in meta["command"], name
        absolute = [s for s in _strings(meta) if s.startswith("/") or "/root/" in s]
        assert not absolute, (name, absolute)
        info = meta["run_info"]  # what a result depends on besides the config and the seed
        assert info["machine"]["cpu"] and "avx512_bf16" in info["machine"]["isa"], name
        assert "dtype" in info and info["threads"]["counts"] is not None, name
        # `--depth 10` cut the rankings: a config that has a depth says the same
        assert meta["config"].get("depth", info["depth"]) == info["depth"], name


def test_every_seed_run_repeats_a_committed_run() -> None:
    """``stair-seed1`` is ``stair`` trained with seed 1: same baseline and config, another seed."""
    for name in _committed(seed_runs=True):
        base, seed = seed_name(name)  # type: ignore[misc]
        metas = [
            json.loads((ROOT / "submissions" / n / "meta.json").read_text()) for n in (name, base)
        ]
        assert base in _committed() and metas[0]["seed"] == seed != metas[1]["seed"], name
        assert metas[0]["run_info"]["baseline"] == metas[1]["run_info"]["baseline"], name
        assert not config_differences(metas[1]["config"], metas[0]["config"]), name


def test_a_variant_reuses_its_baselines_adapter() -> None:
    """``stair-free`` is the committed ``stair`` adapter decoding freely, nothing retrained."""
    for variant, base in VARIANTS.items():
        metas = [
            json.loads((ROOT / "submissions" / n / "meta.json").read_text())["run_info"]
            for n in (variant, base)
        ]
        assert metas[0]["baseline"] == metas[1]["baseline"] == base
        assert metas[0]["notes"]["adapter"] == metas[1]["notes"]["adapter"]
        assert metas[0]["notes"]["decode"] != metas[1]["notes"]["decode"]


@pytest.mark.skipif(not PEER.is_dir(), reason="needs ../shared/peer/whole-child")
def test_committed_runs_reproduce_the_committed_leaderboard(tmp_path, capsys) -> None:
    data = tmp_path / "whole-child"
    assert main(["--no-progress", "import", "repro", str(PEER), "--out", str(data)]) == 0
    out = tmp_path / "board"
    args = ["--no-progress", "leaderboard", "--data", str(data)]
    args += ["--submissions", str(ROOT / "submissions"), "--runs", str(RUNS), "--out", str(out)]
    assert main([*args, "--check", str(BOARD / "expected.json")]) == 0
    logged = capsys.readouterr().err
    board = json.loads((out / "leaderboard.json").read_text())
    assert not board["rejected"]
    assert {s["system"] for s in board["systems"]} == _committed()
    assert (out / "leaderboard.md").read_text() == (BOARD / "leaderboard.md").read_text()
    # bm25's two tied rankings cannot change a reported measure: nothing to warn about
    assert "tied scores" not in logged
