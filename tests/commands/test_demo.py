"""``searchtome demo --quick`` end to end (CI's integration test), then the cached rerun."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from searchtome.cli import main
from searchtome.commands import demo
from searchtome.commands.demo import PROFILES

# What two LLM baselines write is cut shorter than --quick's: DSI's free-running beams and the
# zero-shot answers (up to 32 and 48 tokens, 30 questions) took about half of the test's time
# (500 of 1,101 s on a loaded 2-core machine). Books, prompts, training, beams, every stage
# and every check are --quick's own.
_SHORTER = {"dsi": {"max_output_tokens": 12}, "zeroshot-llm": {"max_new_tokens": 16}}
# The question replies too: SmolLM2 repeats its question until the budget runs out, and on the
# quick book every reply's first question ends within 35 tokens (48 is --quick's budget).
_QUESTION_TOKENS = 36


def _shorter_quick() -> demo.Profile:
    quick = PROFILES["quick"]
    baselines = {k: {**v, **_SHORTER.get(k, {})} for k, v in quick.baselines.items()}
    return dataclasses.replace(quick, baselines=baselines, max_tokens=_QUESTION_TOKENS)


@pytest.mark.slow(seconds=100)  # idle 2-core AMD EPYC
def test_demo_quick_builds_runs_every_baseline_and_reruns_from_caches(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setitem(PROFILES, "quick", _shorter_quick())
    out = tmp_path / "demo"
    assert main(["--no-progress", "demo", "--quick", "--out", str(out)]) == 0
    first = capsys.readouterr()
    board = json.loads((out / "leaderboard" / "leaderboard.json").read_text())
    systems = {s["system"] for s in board["systems"]}
    assert systems == set(PROFILES["quick"].baselines) and len(systems) == 7
    assert not board["rejected"]
    for s in board["systems"]:
        assert 0.0 <= s["aggregate"]["R@1"] <= 1.0
    # The lexical baseline must find real questions' sections far above chance (~1/20).
    bm25 = next(s for s in board["systems"] if s["system"] == "bm25")
    assert bm25["aggregate"]["R@1"] > 0.3
    assert (out / "leaderboard" / "index.html").is_file()
    assert "leaderboard:" in first.out
    costs = first.out.split("Cost per baseline")[1].splitlines()
    assert costs[1].split()[:3] == ["System", "Training", "Prediction"]
    assert any(line.split()[:1] == ["bm25"] for line in costs)
    assert any(line.split()[1:2] == ["bm25"] for line in first.out.splitlines() if line.strip())

    assert main(["--no-progress", "demo", "--quick", "--out", str(out)]) == 0
    rerun = capsys.readouterr()
    assert rerun.err.count("up to date, reused") == 7, rerun.err
    # Same data, same submissions: the rerun's leaderboard has the same figures.
    again = json.loads((out / "leaderboard" / "leaderboard.json").read_text())
    assert [s["aggregate"] for s in again["systems"]] == [s["aggregate"] for s in board["systems"]]
