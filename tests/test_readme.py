"""The README tells the truth: its commands exist with the flags it shows, and CI runs its test command."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from searchtome.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

_FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)
_INLINE = re.compile(r"`([^`\n]*\bsearchtome [^`\n]*)`")


def _code_blocks() -> list[str]:
    return _FENCE.findall(README)


def _commands() -> list[str]:
    """Every ``searchtome ...`` invocation shown in the README (blocks and inline code)."""
    texts = [block.replace("\\\n", " ") for block in _code_blocks()]
    texts += _INLINE.findall(_FENCE.sub("", README))
    found = []
    for text in texts:
        for line in text.splitlines():
            line = line.split(" #", 1)[0]
            for part in re.split(r"&&|\|\||;|\|", line):
                match = re.search(r"(?:^|\s)(?:-m\s+)?searchtome(\s.*)?$", part.strip())
                if (
                    match
                    and "import searchtome" not in part
                    and "searchtome." not in part.split()[0]
                ):
                    found.append("searchtome" + (match.group(1) or ""))
    return found


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


def _has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}


COMMANDS = _commands()


def test_readme_shows_commands() -> None:
    assert len(COMMANDS) >= 20
    shown = {shlex.split(c)[1] for c in COMMANDS if len(shlex.split(c)) > 1}
    for name in (
        "demo",
        "fetch",
        "toc",
        "extract",
        "build",
        "run",
        "validate",
        "score",
        "compare",
        "leaderboard",
        "publish",
    ):
        assert name in shown, name


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_exists_with_its_flags(command: str) -> None:
    tokens = shlex.split(command)[1:]
    parser = build_parser()
    top = _options(parser)
    while tokens and tokens[0] in top:
        tokens.pop(0)
    if not tokens:
        return
    current = parser
    path = []
    while tokens and _has_subcommands(current) and not tokens[0].startswith("-"):
        name = tokens.pop(0)
        nxt = _subparser(current, name)
        assert nxt is not None, f"{command!r}: no subcommand {' '.join([*path, name])!r}"
        current, path = nxt, [*path, name]
    assert path, f"{command!r}: names no subcommand"
    known = _options(current)
    for token in tokens:
        if token.startswith("-") and token not in ("-", "--"):
            flag = token.split("=", 1)[0]
            if re.fullmatch(r"-\d.*", flag):
                continue  # a negative number
            assert flag in known, f"{command!r}: `searchtome {' '.join(path)}` has no option {flag}"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    blocks = [b.strip() for b in _code_blocks()]
    demo, tests = blocks[0], blocks[1]
    assert demo.endswith("searchtome demo") and "pip install" in demo
    assert tests.endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_lines = [
        ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.strip().startswith("#")
    ]
    assert tests in ci_lines, "the README's test command must appear verbatim in .ci/run"
    # The demo and test commands install the same way.
    assert demo.rsplit("&&", 1)[0].replace('".[ml]"', '".[ml,dev]"') == tests.rsplit("&&", 1)[0]


def _paragraph(opening: str) -> str:
    start = README.index(opening)
    end = README.index("\n\n", start)
    return " ".join(README[start:end].split())


def _seed_paragraph() -> str:
    return _paragraph("**Inside the seed noise?**")


def _board() -> dict:
    import json

    return json.loads((ROOT / "leaderboard/whole-child/leaderboard.json").read_text("utf-8"))


def _p(p: float) -> str:
    """A p as the README writes it: two significant digits, no trailing zero dropped."""
    return f"{p:.2g}" if p >= 0.01 else f"{p:.1g}"


def _comparison(board: dict, b: str) -> dict:
    return next(c for c in board["seeds"]["comparisons"] if c["a"] == "stair" and c["b"] == b)


def _run_pair(pairs: list[dict], seed: int) -> dict:
    return next(t for t in pairs if t["seed_a"] == seed and t["seed_b"] == seed)


def _signed(x: float) -> str:
    """A difference as the README writes it: one decimal, its sign, a typographic minus."""
    return f"{100 * x:+.1f}".replace("-", "\u2212")


def test_the_seed_paragraph_prints_the_committed_seed_spread() -> None:
    """Every seed figure in the README's *Inside the seed noise?* paragraph is the one the
    committed leaderboard.json holds: adding a seed run without rewriting the paragraph fails."""
    board = _board()
    text = _seed_paragraph()
    wanted = []
    for group in board["seeds"]["groups"]:
        runs = [f"{100 * run['aggregate']['R@1']:.1f}" for run in group["runs"]]
        wanted.append(f"{', '.join(runs[:-1])} and {runs[-1]}")
        wanted.append(f"({100 * group['mean']['R@1']:.1f} ± {100 * group['sd']['R@1']:.1f})")
    for comparison in board["seeds"]["comparisons"]:
        overall = next(o for o in comparison["overall"] if o["measure"] == "R@1")
        rare = comparison["rare_pooled"]
        for test in (overall, rare):
            wanted.append(f"{_signed(test['ci_low'])} to {_signed(test['ci_high'])}")
            if comparison["b"] != "stair-free" or test is overall:
                wanted.append(f"over the runs p = {test['p_runs']:.2f}")
        if comparison["b"] != "stair-free":
            leaves = comparison["rare_leaves"]
            wanted.append(
                f"gold leaves resampled {_signed(leaves['ci_low'])} to "
                f"{_signed(leaves['ci_high'])}, p = {_p(leaves['p_value'])}"
            )
            wanted.append(f"{_signed(overall['diff'])} R@1 ")
            wanted.append(f"p = {_p(overall['p_value'])}")
    missing = [w for w in wanted if w not in text]
    assert not missing, f"README seed paragraph lacks {missing}"


def _platforms(board: dict) -> dict[str, str]:
    """Each run's dtype and CPU as leaderboard.json records them, in the README's words."""
    out = {}
    for group in board["seeds"]["groups"]:
        for run in group["runs"]:
            dtype, cpu = run["platform"].split(", ", 1)
            cpu = cpu.replace("(R)", "").replace(" Processor", "")
            out[run["system"]] = f"{dtype} on an {cpu}"
    return out


def test_the_seed_paragraph_names_the_platforms_and_the_run_pairs_behind_the_verdict() -> None:
    """The platform confound stands next to the verdict with the committed figures: the one
    pair of runs on the same dtype and CPU, and the range of the mixed pairs."""
    board = _board()
    text = _seed_paragraph()
    platforms = _platforms(board)
    missing = [p for p in set(platforms.values()) if p not in text]
    assert not missing, f"README seed paragraph does not name {missing}"
    pairs = _comparison(board, "dsi-constrained")["overall_runs"]
    same = [t for t in pairs if platforms[t["a"]] == platforms[t["b"]]]
    mixed = sorted(t["diff"] for t in pairs if t not in same)
    assert len(same) == 1 and same[0]["seed_a"] == same[0]["seed_b"] == 42
    assert f"(seed 42) gives {_signed(same[0]['diff'])} (p = {_p(same[0]['p_value'])})" in text
    assert f"the {len(mixed)} mixed pairs" in text.replace("eight", "8")
    assert f"give {_signed(mixed[-1])} to {_signed(mixed[0])}" in text


def test_the_one_run_pair_paragraph_prints_the_committed_pair() -> None:
    """The single-seed statements say they are one run pair, and their numbers are the seed-42
    pair's on the committed board (overall, rare leaves by question and by leaf)."""
    board = _board()
    text = _paragraph("**One run pair (seed 42")
    c = _comparison(board, "dsi-constrained")
    overall, rare = _run_pair(c["overall_runs"], 42), _run_pair(c["rare_runs"], 42)
    leaves = rare["leaves"]
    runs = {r["system"]: r for g in board["seeds"]["groups"] for r in g["runs"]}
    wanted = [
        f"{100 * overall['mean_a']:.1f} vs {100 * overall['mean_b']:.1f} R@1",
        f"{_signed(overall['diff'])}, p = {_p(overall['p_value'])}",
        f"{100 * rare['mean_a']:.1f} vs {100 * rare['mean_b']:.1f}",
        f"{_signed(rare['diff'])}, p = {_p(rare['p_value'])} with the questions",
        f"the {leaves['n_leaves']} gold leaves",
        f"{_signed(leaves['ci_low'])} to {_signed(leaves['ci_high'])}, p = {_p(leaves['p_value'])}",
        f"{100 * runs['stair-free']['aggregate']['Invalid@1']:.1f} % vs "
        f"{100 * runs['dsi']['aggregate']['Invalid@1']:.1f} %",
    ]
    missing = [w for w in wanted if w not in text]
    assert not missing, f"README one-run-pair paragraph lacks {missing}"
    assert platforms_equal(runs["stair"], runs["dsi-constrained"])


def platforms_equal(a: dict, b: dict) -> bool:
    return bool(a["platform"]) and a["platform"] == b["platform"]


@pytest.mark.parametrize("page", ["docs/seeds.md", "docs/results.md"])
def test_the_docs_print_the_committed_platform_pairs_and_run_level_floor(page: str) -> None:
    """docs/seeds.md and docs/results.md state the platform confound with the figures the
    committed leaderboard.json holds, and the run-level p at its floor."""
    board = _board()
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    pairs = _comparison(board, "dsi-constrained")["overall_runs"]
    same = _run_pair(pairs, 42)
    mixed = sorted(t["diff"] for t in pairs if t is not same)
    assert f"gives {_signed(same['diff'])}" in text
    assert f"the eight mixed pairs {_signed(mixed[-1])} to {_signed(mixed[0])}" in text
    overall = next(
        o for o in _comparison(board, "dsi-constrained")["overall"] if o["measure"] == "R@1"
    )
    assert overall["p_runs"] == 0.1 and overall["relabellings"] == 20
    assert "0.10" in text
