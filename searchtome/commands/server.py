"""``searchtome server``: run a scoring service for a blind release (see docs/server.md)."""

from __future__ import annotations

import argparse

from searchtome.errors import SearchTomeError
from searchtome.service.home import ServerSettings

D = ServerSettings()  # help texts read the defaults from the settings' fields


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``searchtome server init|add-team|revoke|list|run|worker|migrate|reveal``."""
    p = subparsers.add_parser(
        "server",
        help="a scoring service for a blind release (organiser side)",
        description=(
            "Score uploaded runs against the private half of a blind release and rank them on "
            "a web leaderboard. Admin actions are these commands, run on the server host."
        ),
    )
    sub = p.add_subparsers(dest="server_command", metavar="ACTION", required=True)
    home = argparse.ArgumentParser(add_help=False)
    home.add_argument("--home", required=True, metavar="SRV", help="the server's folder")

    init = sub.add_parser("init", parents=[home], help="create SRV from a blind release's halves")
    init.add_argument("--public", required=True, help="public half (publish/build/import --blind)")
    init.add_argument("--private", required=True, help="private half (copied into SRV)")
    init.add_argument(
        "--db",
        help="database URL (default: sqlite:///SRV/server.db); e.g. "
        "postgresql+psycopg://USER:PASSWORD@HOST/NAME",
    )
    init.add_argument(
        "--daily-limit", type=int, help=f"accepted uploads per team and UTC day ({D.daily_limit})"
    )
    init.add_argument(
        "--private-fraction",
        type=float,
        help=f"share of test queries scored in secret until `server reveal` ({D.private_fraction})",
    )
    init.add_argument("--max-final", type=int, help=f"final runs a team may mark ({D.max_final})")
    init.add_argument(
        "--upload-max-mb", type=float, help=f"largest upload in MiB ({D.upload_max_bytes >> 20})"
    )
    init.add_argument(
        "--lease-seconds",
        type=float,
        help=f"seconds before a silent worker's job is retried ({D.lease_seconds:g})",
    )
    init.add_argument(
        "--permutations", type=int, help=f"randomization-test permutations ({D.permutations})"
    )
    init.set_defaults(func=_init)

    add = sub.add_parser("add-team", parents=[home], help="create teams; prints each token once")
    add.add_argument("names", nargs="*", metavar="NAME", help="team names: letters, digits, . _ -")
    add.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="also the names in FILE, one a line (blank lines and # comments skipped)",
    )
    add.set_defaults(func=_add_team)
    revoke = sub.add_parser(
        "revoke", parents=[home], help="revoke a team's token and hide its runs"
    )
    revoke.add_argument("name", help="the team to revoke")
    revoke.set_defaults(func=_revoke)
    sub.add_parser("list", parents=[home], help="teams and their submissions").set_defaults(
        func=_list
    )

    run = sub.add_parser("run", parents=[home], help="serve the leaderboard and score uploads")
    run.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    run.add_argument("--port", type=int, default=8000, help="port (8000)")
    run.add_argument("--workers", type=int, default=1, help="scoring worker processes (1)")
    run.add_argument("--web", type=int, default=1, help="web processes (1)")
    run.set_defaults(func=_run)
    worker = sub.add_parser("worker", parents=[home], help="one scoring worker alone")
    worker.add_argument("--once", action="store_true", help="stop when the queue is empty")
    worker.set_defaults(func=_worker)
    migrate = sub.add_parser(
        "migrate", parents=[home], help="upgrade SRV's database to this version's schema"
    )
    migrate.set_defaults(func=_migrate)
    reveal = sub.add_parser("reveal", parents=[home], help="show the private part's scores")
    reveal.add_argument("--undo", action="store_true", help="hide them again")
    reveal.set_defaults(func=_reveal)


def _engine(args: argparse.Namespace):
    from searchtome.service.db import check_version, make_engine
    from searchtome.service.home import open_home

    home = open_home(args.home)
    engine = make_engine(home.settings.db, home.settings.busy_timeout_ms)
    check_version(engine, args.home)
    return engine


def _init(args: argparse.Namespace) -> int:
    from searchtome.service.home import init_home

    mb = args.upload_max_mb
    home = init_home(
        args.home,
        args.public,
        args.private,
        db=args.db,
        daily_limit=args.daily_limit,
        private_fraction=args.private_fraction,
        max_final=args.max_final,
        upload_max_bytes=None if mb is None else int(mb * (1 << 20)),
        lease_seconds=args.lease_seconds,
        permutations=args.permutations,
    )
    s = home.settings
    print(
        f"{home.root}: server home ready ({s.split} split, {s.daily_limit} uploads/team/day, "
        f"private fraction {s.private_fraction}); next: searchtome server add-team --home "
        f"{home.root} NAME"
    )
    return 0


def _team_names(args: argparse.Namespace) -> list[str]:
    from pathlib import Path

    names = list(args.names)
    if args.from_file:
        path = Path(args.from_file)
        if not path.is_file():
            raise SearchTomeError(f"{path}: no such file; give one team name a line")
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                names.append(line.strip())
    if not names:
        raise SearchTomeError("add-team: give one or more NAMEs or --from FILE")
    return names


def _add_team(args: argparse.Namespace) -> int:
    import sys

    from searchtome.service.store import add_teams

    names = _team_names(args)
    added = add_teams(_engine(args), names)
    if len(added) == 1 and not args.from_file:  # one name: the token alone, as scripts read it
        print(added[0][1])
    else:
        for name, token in added:
            print(f"{name}\t{token}")
    print(
        f"{len(added)} team{'s' if len(added) > 1 else ''} added; each token is shown once: "
        "hand it to its team",
        file=sys.stderr,
    )
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from searchtome.service.cache import refresh_home
    from searchtome.service.store import revoke_team

    revoke_team(_engine(args), args.name)
    refresh_home(args.home)
    print(f"team {args.name!r} revoked: its token no longer works and its runs are hidden")
    return 0


def _list(args: argparse.Namespace) -> int:
    import time

    from searchtome.service.store import list_teams

    rows = list_teams(_engine(args))
    print(f"{'team':<24} {'created (UTC)':<17} {'status':<8} submissions")
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["created_at"]))
        status = "revoked" if r["revoked_at"] else "active"
        print(f"{r['name']:<24} {created:<17} {status:<8} {r['submissions']}")
    return 0


def _reveal(args: argparse.Namespace) -> int:
    from searchtome.service.cache import refresh_home
    from searchtome.service.store import REVEALED, set_flag

    set_flag(_engine(args), REVEALED, "no" if args.undo else "yes")
    refresh_home(args.home)
    print("private scores hidden" if args.undo else "private scores revealed on the leaderboard")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from searchtome.service.db import current_version, make_engine, migrate
    from searchtome.service.home import open_home

    settings = open_home(args.home).settings
    engine = make_engine(settings.db, settings.busy_timeout_ms)
    with engine.connect() as conn:
        before = current_version(conn)
    after = migrate(engine)
    engine.dispose()
    if before == after:
        print(f"{args.home}: database schema already at version {after}")
    else:
        print(f"{args.home}: database schema upgraded from version {before} to {after}")
    return 0


def _log_jobs() -> None:
    """The service's INFO lines (each job's claim and finish, board refreshes) by default."""
    import logging

    service = logging.getLogger("searchtome.service")
    if service.getEffectiveLevel() > logging.INFO:
        service.setLevel(logging.INFO)


def _worker(args: argparse.Namespace) -> int:
    from searchtome.service.home import open_home
    from searchtome.service.worker import Worker

    _log_jobs()
    Worker(open_home(args.home)).serve(once=args.once)
    return 0


def _run(args: argparse.Namespace) -> int:
    import multiprocessing
    import os
    import sys

    import uvicorn

    from searchtome.service.app import create_app
    from searchtome.service.home import HOME_ENV, open_home
    from searchtome.service.worker import run_forked

    if args.workers < 0 or args.web < 1:
        raise SearchTomeError("--workers must be 0 or more and --web 1 or more")
    home = open_home(args.home)
    _engine(args).dispose()  # checks the schema; no connection crosses the fork below
    _log_jobs()
    # Workers are forked from this process: they start with its imports already done.
    fork = multiprocessing.get_context("fork")
    workers = [
        fork.Process(target=run_forked, args=(str(home.root), os.getpid()), name=f"worker-{i}")
        for i in range(args.workers)
    ]
    for w in workers:
        w.start()
    print(
        f"searchtome server: http://{args.host}:{args.port} ({args.web} web, "
        f"{args.workers} scoring workers)",
        file=sys.stderr,
        flush=True,
    )
    try:
        if args.web == 1:
            uvicorn.run(create_app(home), host=args.host, port=args.port, log_level="warning")
        else:
            os.environ[HOME_ENV] = str(home.root.resolve())
            uvicorn.run(
                "searchtome.service.app:create_app",
                factory=True,
                host=args.host,
                port=args.port,
                workers=args.web,
                log_level="warning",
            )
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.join(timeout=30)
    return 0
