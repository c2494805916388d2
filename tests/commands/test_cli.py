"""The console script: global flags anywhere, one-line errors, every command module loads."""

from __future__ import annotations

import subprocess
import sys

import pytest

from searchtome.cli import COMMANDS, build_parser, main, outline_parser


def test_every_command_module_registers() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == COMMANDS.names()
    for command in (
        "fetch",
        "toc",
        "extract",
        "build",
        "cache",
        "export",
        "import",
        "publish",
        "validate",
        "score",
        "compare",
        "leaderboard",
        "run",
        "ls",
        "demo",
    ):
        assert command in sub.choices, command


def test_global_flags_before_or_after_the_subcommand(monkeypatch) -> None:
    parser = build_parser()
    before = parser.parse_args(["--no-progress", "-v", "ls", "baselines"])
    after = parser.parse_args(["ls", "baselines", "--no-progress", "-vv"])
    neither = parser.parse_args(["ls", "baselines"])
    assert before.no_progress and before.verbose == 1
    assert after.no_progress and after.verbose == 2
    assert not neither.no_progress and neither.verbose == 0


def test_errors_are_one_line_without_traceback(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "searchtome", "toc", str(tmp_path / "missing.pdf")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("searchtome: error: ")
    assert "missing.pdf" in lines[0] and "Traceback" not in proc.stderr


def test_no_command_prints_help(capsys) -> None:
    assert main([]) == 2
    assert "usage: searchtome" in capsys.readouterr().out


def _options_without_help(parser, path=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options_without_help(sub, (*path, name))
        elif action.help is None and not isinstance(action, argparse._HelpAction):
            yield " ".join(path), action.option_strings or action.dest


def test_every_option_of_every_command_says_what_it_does() -> None:
    assert list(_options_without_help(build_parser())) == []


def test_help_defaults_are_the_ones_the_code_uses() -> None:
    from searchtome.commands.compare import COMPARE_MEASURES
    from searchtome.generate.options import LOCAL_DEFAULTS

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    compare_help = " ".join(sub["compare"].format_help().split())
    assert f"(default: {' '.join(COMPARE_MEASURES)})" in compare_help
    build_help = " ".join(sub["build"].format_help().split())
    assert f"{LOCAL_DEFAULTS['max_tokens']} with --endpoint local" in build_help


def test_a_command_imports_only_its_own_module() -> None:
    """`searchtome score ...` builds score's parser alone (the others import fetch and build
    machinery, ~0.3 s of start-up); help and an unknown word still see every command."""
    import subprocess
    import sys

    from searchtome.cli import command_word

    assert command_word(["-v", "--no-progress", "score", "run.trec"]) == "score"
    assert command_word(["--version"]) is None and command_word(["--", "score"]) is None
    assert set(build_parser("score")._subparsers._group_actions[0].choices) == {"score"}
    assert len(build_parser("nope")._subparsers._group_actions[0].choices) == len(COMMANDS)
    code = (
        "import sys\nfrom searchtome.cli import build_parser\n"
        "build_parser('score').parse_args(['score', 'x', '--qrels', 'q'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('searchtome.commands.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['searchtome.commands.score']"


def test_top_level_help_imports_no_command_module_and_lists_every_command() -> None:
    """`searchtome --help` lists the commands from their declarations and imports no
    `searchtome.commands` module (read from sys.modules: `-X importtime` does not see
    importlib.import_module, which the registry uses)."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules "
        "if m.startswith('searchtome.commands')), file=sys.stderr))\n"
        "sys.argv = ['searchtome', '--help']\n"
        "import runpy\n"
        "runpy.run_module('searchtome', run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "[]"
    listed = " ".join(proc.stdout.split())
    assert listed.startswith("usage: searchtome")
    for name in COMMANDS.names():
        assert f" {name} {COMMANDS.summary(name)}" in listed, name


def test_the_outline_reads_as_the_parser_of_every_command(capsys) -> None:
    """Each declared summary is the line its module's parser gives (`help=`), so the help and
    the errors of a line without a command are what the full parser would print."""
    full, outline = build_parser(), outline_parser()
    sub = next(a for a in full._actions if a.dest == "command")
    assert {a.dest: a.help for a in sub._choices_actions} == {
        name: COMMANDS.summary(name) for name in COMMANDS.names()
    }
    assert outline.format_help() == full.format_help()
    assert outline.format_usage() == full.format_usage()
    for words in (["nope"], ["--no-progress", "sore", "x"]):
        errors = []
        for parser in (full, outline):
            with pytest.raises(SystemExit):
                parser.parse_args(words)
            errors.append(capsys.readouterr().err)
        assert errors[0] == errors[1] and "invalid choice" in errors[0]


def test_a_line_without_a_command_keeps_its_behaviour(capsys) -> None:
    assert main(["--no-progress"]) == 2
    assert "usage: searchtome" in capsys.readouterr().out
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and capsys.readouterr().out.startswith("searchtome ")
    with pytest.raises(SystemExit) as wrong:
        main(["scroe", "run.trec"])
    assert wrong.value.code == 2 and "invalid choice: 'scroe'" in capsys.readouterr().err
