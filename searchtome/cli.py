"""The ``searchtome`` console script: one argparse parser, one subcommand per capability.

Each command in :data:`COMMANDS` is added by its module's ``register(subparsers)`` function,
which adds the parser and sets ``func`` (``args -> int``). Those modules import only light
things at module level, so ``searchtome --help`` stays fast; torch, transformers and PyMuPDF
are imported inside the functions that need them.
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

# Every subcommand and the function that adds its parser, in `searchtome --help`'s order. A
# command line imports only its own command's module, so one command's imports never slow
# another's start-up; help and an unknown word import them all.
COMMANDS: Registry[Callable[[Any], None]] = Registry(
    "command",
    {
        "fetch": "searchtome.commands.fetch:register",
        "toc": "searchtome.commands.toc:register",
        "extract": "searchtome.commands.extract:register",
        "build": "searchtome.commands.build:register",
        "cache": "searchtome.commands.cache:register",
        "export": "searchtome.commands.export:register",
        "import": "searchtome.commands.import_repro:register",
        "publish": "searchtome.commands.publish:register",
        "validate": "searchtome.commands.validate:register",
        "score": "searchtome.commands.score:register",
        "compare": "searchtome.commands.compare:register",
        "leaderboard": "searchtome.commands.leaderboard:register",
        "run": "searchtome.commands.run:register",
        "tune": "searchtome.commands.tune:register",
        "ls": "searchtome.commands.ls:register",
        "demo": "searchtome.commands.demo:register",
        "server": "searchtome.commands.server:register",
        "submit": "searchtome.commands.submit:register",
        "submissions": "searchtome.commands.submissions:register",
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
    less: the others import the fetch and build machinery); help and an unknown word get all.
    """
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [command] if command in COMMANDS else COMMANDS.names():
        COMMANDS.get(name)(sub)
    _accept_global_flags_anywhere(sub)
    return parser


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
    parser = build_parser(command_word(words))
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
