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


def _seed_paragraph() -> str:
    start = README.index("**Inside the seed noise?**")
    end = README.index("\n\n", start)
    return " ".join(README[start:end].split())


def _signed(x: float) -> str:
    """A difference as the README writes it: one decimal, its sign, a typographic minus."""
    return f"{100 * x:+.1f}".replace("-", "\u2212")


def test_the_seed_paragraph_prints_the_committed_seed_spread() -> None:
    """Every seed figure in the README's *Inside the seed noise?* paragraph is the one the
    committed leaderboard.json holds: adding a seed run without rewriting the paragraph fails."""
    import json

    board = json.loads((ROOT / "leaderboard/whole-child/leaderboard.json").read_text("utf-8"))
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
    missing = [w for w in wanted if w not in text]
    assert not missing, f"README seed paragraph lacks {missing}"
