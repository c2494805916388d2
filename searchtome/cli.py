"""The ``searchtome`` console script: one argparse parser, one subcommand per capability.

Each command in :data:`COMMANDS` is added by its module's ``register(subparsers)`` function,
which adds the parser and sets ``func`` (``args -> int``). A command line imports its own
command's module only, and ``searchtome --help`` none: it lists the commands from their
declarations. Those modules import only light things at module level; torch, transformers and
PyMuPDF are imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.registry import Registry
from searchtome.settings import set_progress, setup_logging
from searchtome.threads import quiet_waiting
from searchtome.version import __version__

# Every subcommand, the function that adds its parser and its one line in `searchtome --help`,
# in that listing's order. A command line imports only its own command's module, so one
# command's imports never slow another's start-up; the listing imports none of them (each
# module's parser repeats its line as ``help=``; tests/commands/test_cli.py keeps the two equal).
COMMANDS: Registry[Callable[[Any], None]] = Registry(
    "command",
    {
        "fetch": (
            "searchtome.commands.fetch:register",
            "download and verify the catalog's PDFs into the cache",
        ),
        "toc": ("searchtome.commands.toc:register", "print a PDF's table of contents as a tree"),
        "extract": (
            "searchtome.commands.extract:register",
            "extract the text of every ToC leaf and its paragraphs",
        ),
        "build": (
            "searchtome.commands.build:register",
            "build a SearchTome dataset: fetch, extract, generate questions, split, write",
        ),
        "cache": (
            "searchtome.commands.cache:register",
            "export, import, inspect, check or mend the LLM reply cache",
        ),
        "export": (
            "searchtome.commands.export:register",
            "write a dataset in another format (BEIR, TREC)",
        ),
        "import": (
            "searchtome.commands.import_repro:register",
            "convert an existing release into a SearchTome dataset",
        ),
        "publish": (
            "searchtome.commands.publish:register",
            "upload a dataset folder to the Hugging Face Hub (one commit, then a tag)",
        ),
        "validate": (
            "searchtome.commands.validate:register",
            "check a submission folder or run file against a dataset split",
        ),
        "score": ("searchtome.commands.score:register", "score submissions or TREC runs"),
        "compare": (
            "searchtome.commands.compare:register",
            "paired randomization tests between submissions",
        ),
        "leaderboard": (
            "searchtome.commands.leaderboard:register",
            "validate, score and render every submission",
        ),
        "run": ("searchtome.commands.run:register", "run a baseline and write its submission"),
        "tune": (
            "searchtome.commands.tune:register",
            "grid-search a baseline's config on the dev split",
        ),
        "ls": (
            "searchtome.commands.ls:register",
            "list registered baselines, the LLM trainings in the cache, or a config's settings",
        ),
        "demo": (
            "searchtome.commands.demo:register",
            "run the whole pipeline offline on the sample books and show a leaderboard",
        ),
        "server": (
            "searchtome.commands.server:register",
            "a scoring service for a blind release (organiser side)",
        ),
        "submit": (
            "searchtome.commands.submit:register",
            "upload a submission to a scoring service",
        ),
        "submissions": (
            "searchtome.commands.submissions:register",
            "list your team's runs on a scoring service; hide or show one",
        ),
    },
)


def command_word(argv: Sequence[str]) -> str | None:
    """The subcommand on a command line: its first word that is not an option (the global
    options take no value), or None."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The console script's parser: every command, or only ``command``'s when it is one.

    Only one command's module is imported for ``searchtome score ...`` (about 0.3 s of CPU
    less: the others import the fetch and build machinery); any other word gets all.
    """
    parser, sub = _top_parser()
    for name in [command] if command in COMMANDS else COMMANDS.names():
        COMMANDS.get(name)(sub)
    _accept_global_flags_anywhere(sub)
    return parser


def outline_parser() -> argparse.ArgumentParser:
    """The parser for a command line without a known command (``searchtome --help``,
    ``--version``, a mistyped word): every command listed from its declaration, none imported.

    Its help and its errors read as :func:`build_parser`'s. No command can be chosen through
    it: :func:`main` uses it only when the first word that is not an option is no command (the
    global options take no value), and argparse refuses that word.
    """
    parser, sub = _top_parser()
    for name in COMMANDS.names():
        sub.add_parser(name, help=COMMANDS.summary(name))
    return parser


def _top_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The global options and an empty COMMAND group."""
    parser = argparse.ArgumentParser(
        prog="searchtome",
        description="SearchTome: retrieval over the leaf entries of a book's table of contents.",
    )
    parser.add_argument("--version", action="version", version=f"searchtome {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)"
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="turn progress bars off (also SEARCHTOME_NO_PROGRESS=1)",
    )
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def _accept_global_flags_anywhere(sub: argparse._SubParsersAction) -> None:
    """Let ``--no-progress`` and ``-v`` also follow the subcommand (``searchtome run ... -v``).

    The copies default to SUPPRESS so they only set the value when given, never reset it.
    """
    for parser in set(sub.choices.values()):
        for flags, kwargs in (
            (("--no-progress",), {"action": "store_true", "help": argparse.SUPPRESS}),
            (("-v", "--verbose"), {"action": "count", "help": argparse.SUPPRESS}),
        ):
            # A subcommand that uses the flag itself keeps its own meaning.
            with contextlib.suppress(argparse.ArgumentError):
                parser.add_argument(*flags, default=argparse.SUPPRESS, **kwargs)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_global_flags_anywhere(action)


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM (kill, timeout, CI cancel) unwinds like Ctrl-C, so context managers stop child
    # servers and remove temporary files instead of leaving them behind.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    # Before anything can import torch: its OpenMP runtime reads the waiting policy once.
    quiet_waiting()
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    words = sys.argv[1:] if argv is None else list(argv)
    word = command_word(words)
    parser = build_parser(word) if word in COMMANDS else outline_parser()
    args = parser.parse_args(words)
    setup_logging(args.verbose)
    if args.no_progress:
        set_progress(False)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SearchTomeError as exc:
        print(f"searchtome: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("searchtome: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A full disk, quota or read-only folder hit outside searchtome.io's writers: still one line.
        from searchtome.io import write_failure

        failure = write_failure(exc.filename or "a file", exc)
        if failure is None:
            raise
        print(f"searchtome: error: {failure}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
