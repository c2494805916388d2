"""``searchtome server``: run a scoring service for a blind release (see docs/server.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from searchtome.errors import SearchTomeError
from searchtome.service.home import ServerSettings
from searchtome.service.kinds import Event, ScoreMode, Visibility

if TYPE_CHECKING:  # the server extra (SQLAlchemy) is loaded only by the actions that need it
    from sqlalchemy.engine import Engine

    from searchtome.service.phases import Phase

D = ServerSettings()  # help texts read the defaults from the settings' fields


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``searchtome server init|add-team|revoke|add-member|revoke-member|list|run|worker|migrate|reveal|phase|log|
    requeue|rescore``."""
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
    init.add_argument("--title", help="the competition's name on its page (the dataset's)")
    init.add_argument("--description", help="what the competition is, shown under the title")
    init.add_argument(
        "--rules", metavar="FILE", help="a text file of rules shown on the page (paragraphs)"
    )
    init.add_argument(
        "--anonymous",
        action="store_true",
        default=None,
        help="the board shows teams as 'team N' until `server reveal` (each team sees its name)",
    )
    _availability_options(init)
    init.add_argument(
        "--public-scores",
        choices=[m.value for m in ScoreMode],
        help=f"what an upload's public score reveals ({D.public_scores}; docs/server.md)",
    )
    init.add_argument(
        "--ladder-margin",
        type=float,
        help=f"ladder: standard errors a run must beat its team's best by ({D.ladder_margin:g})",
    )
    init.add_argument(
        "--count-refused",
        action="store_true",
        default=None,
        help="uploads the validator refuses, and rejected or failed ones, use a quota slot",
    )
    init.add_argument(
        "--phase",
        nargs=3,
        action="append",
        metavar=("NAME", "START", "END"),
        help="a phase (UTC ISO 8601 times); repeat for more; `server phase` for the rest",
    )
    init.add_argument(
        "--final-phase",
        nargs=3,
        metavar=("NAME", "START", "END"),
        help="the final phase: its end is the deadline",
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
    add.add_argument(
        "--baseline",
        action="store_true",
        help="the organisers' baselines: shown on the board, marked, outside the ranks",
    )
    add.set_defaults(func=_add_team)
    revoke = sub.add_parser(
        "revoke", parents=[home], help="revoke a team's token and hide its runs"
    )
    revoke.add_argument("name", help="the team to revoke")
    revoke.set_defaults(func=_revoke)
    sub.add_parser(
        "list", parents=[home], help="teams, their members and submissions"
    ).set_defaults(func=_list)
    member = sub.add_parser(
        "add-member", parents=[home], help="give a team's member a token; prints it once"
    )
    member.add_argument("team", help="the team")
    member.add_argument("member", help="the member's name: letters, digits, . _ -")
    member.set_defaults(func=_add_member)
    unmember = sub.add_parser(
        "revoke-member", parents=[home], help="revoke one member's token (the team's stay)"
    )
    unmember.add_argument("team", help="the team")
    unmember.add_argument("member", help="the member to revoke")
    unmember.set_defaults(func=_revoke_member)

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
    _register_competition(sub, home)


def _register_competition(sub: argparse._SubParsersAction, home: argparse.ArgumentParser) -> None:
    phase = sub.add_parser(
        "phase", parents=[home], help="add or change a phase (no NAME: list the phases)"
    )
    phase.add_argument("name", nargs="?", metavar="NAME", help="the phase's name")
    phase.add_argument("--start", help="opening, ISO 8601 (UTC unless an offset is given)")
    phase.add_argument("--end", help="closing, ISO 8601; the final phase's end is the deadline")
    phase.add_argument(
        "--final", action=argparse.BooleanOptionalAction, help="the final phase (one at most)"
    )
    phase.add_argument(
        "--scores",
        choices=[v.value for v in Visibility],
        help="when uploads of this phase show their public scores (shown)",
    )
    phase.add_argument("--daily-limit", type=int, help="uploads per team and UTC day in it")
    phase.add_argument("--limit", type=int, help="uploads per team in the whole phase")
    phase.add_argument(
        "--allow-late",
        action=argparse.BooleanOptionalAction,
        help="final phase: score uploads after the deadline in a separate, marked table",
    )
    phase.set_defaults(func=_phase)
    log = sub.add_parser("log", parents=[home], help="the organiser's events")
    log.add_argument("--kind", choices=[e.value for e in Event], help="only this kind")
    log.add_argument("--tail", type=int, metavar="N", help="the last N events")
    log.set_defaults(func=_log)
    requeue = sub.add_parser("requeue", parents=[home], help="queue a failed upload again")
    requeue.add_argument("id", metavar="ID", help="the submission's id")
    requeue.set_defaults(func=_requeue)
    rescore = sub.add_parser(
        "rescore", parents=[home], help="score runs again after a gold or scorer fix"
    )
    which = rescore.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", metavar="ID", help="one submission")
    which.add_argument("--all", action="store_true", help="every scored or rejected run")
    rescore.add_argument("--reason", default="organiser's rescore", help="kept in the history")
    rescore.set_defaults(func=_rescore)


def _availability_options(init: argparse.ArgumentParser) -> None:
    init.add_argument(
        "--upload-timeout",
        type=float,
        metavar="S",
        help=f"seconds an upload's body may take in all ({D.upload_timeout:g})",
    )
    init.add_argument(
        "--upload-min-rate",
        type=float,
        metavar="KIB_S",
        help="KiB/s an upload's body must average after its first "
        f"{D.upload_grace:g} s ({D.upload_min_rate / 1024:g})",
    )
    init.add_argument(
        "--upload-slots",
        type=int,
        help=f"uploads read and checked at once per web process ({D.upload_slots})",
    )
    init.add_argument(
        "--team-uploads",
        type=int,
        help=f"uploads of one team in flight per web process, below --upload-slots "
        f"({D.team_uploads})",
    )
    init.add_argument(
        "--upload-bodies",
        type=int,
        help="upload bodies received at once per web process, at least --upload-slots; one "
        "more waits for a place up to upload_body_wait s (server.json), then gets 503 and "
        f"Retry-After ({D.upload_bodies})",
    )
    init.add_argument(
        "--health-max-queue-age",
        type=float,
        metavar="S",
        help="/api/health answers 503 once the oldest queued upload waits longer "
        f"({D.health_max_queue_age:g})",
    )
    init.add_argument(
        "--one-row-per-team",
        action="store_true",
        default=None,
        help="the public board shows each team's best run only",
    )
    init.add_argument(
        "--check-public-overlap",
        metavar="SOURCE",
        action="append",
        help="refuse a private half whose questions appear verbatim in this public release "
        "(a dataset folder or a reproduction's release; repeatable)",
    )
    init.add_argument(
        "--allow-public-overlap",
        action="store_true",
        help="with --check-public-overlap: warn instead of refusing (a rehearsal)",
    )


def _availability_settings(args: argparse.Namespace) -> dict[str, object]:
    rate = args.upload_min_rate
    return {
        "upload_timeout": args.upload_timeout,
        "upload_min_rate": None if rate is None else int(rate * 1024),
        "upload_slots": args.upload_slots,
        "team_uploads": args.team_uploads,
        "upload_bodies": args.upload_bodies,
        "health_max_queue_age": args.health_max_queue_age,
        "one_row_per_team": args.one_row_per_team,
    }


def _check_overlap(args: argparse.Namespace) -> None:
    import sys

    from searchtome.dataset.blind import is_private, read_private
    from searchtome.dataset.overlap import public_overlap

    if not is_private(args.private):
        return  # init_home says what is wrong with it
    public = read_private(args.private).questions_public
    if public:
        print(
            f"searchtome: warning: {args.private}: its questions and their gold are public in "
            f"{public}; scores on it are a rehearsal, not a blind test",
            file=sys.stderr,
        )

    for source in args.check_public_overlap or []:
        found = public_overlap(args.private, source)
        if not found:
            print(f"{source}: no private question appears in it verbatim", file=sys.stderr)
            continue
        if not args.allow_public_overlap:
            raise SearchTomeError(
                f"{args.private}: {found}; this is not a blind set: use fresh questions "
                "(`build --blind`) or a private question set, or pass --allow-public-overlap "
                "for a rehearsal"
            )
        print(
            f"searchtome: warning: {args.private}: {found}; scores on it are a rehearsal, "
            "not a blind test",
            file=sys.stderr,
        )


def _engine(args: argparse.Namespace):
    from searchtome.service.db import check_version, make_engine
    from searchtome.service.home import open_home

    home = open_home(args.home)
    engine = make_engine(home.settings.db, home.settings.busy_timeout_ms)
    check_version(engine, args.home)
    return engine


def _read_rules(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SearchTomeError(
            f"--rules {path}: cannot read it ({exc}); give a UTF-8 text file"
        ) from None


def _init(args: argparse.Namespace) -> int:
    from searchtome.service.home import init_home

    mb = args.upload_max_mb
    _check_overlap(args)
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
        title=args.title,
        description=args.description,
        rules=_read_rules(args.rules),
        anonymous=args.anonymous,
        **_availability_settings(args),
        public_scores=args.public_scores,
        ladder_margin=args.ladder_margin,
        count_refused=args.count_refused,
    )
    _init_phases(args, home.root)
    s = home.settings
    print(
        f"{home.root}: server home ready ({s.split} split, {s.daily_limit} uploads/team/day, "
        f"private fraction {s.private_fraction}); next: searchtome server add-team --home "
        f"{home.root} NAME"
    )
    return 0


def record(engine: Engine, root: Path, kind: Event, subject: str | None, message: str) -> None:
    from searchtome.service.events import record as add

    add(engine, root, kind, subject, message)


def _team_names(args: argparse.Namespace) -> list[str]:
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
    engine = _engine(args)
    added = add_teams(engine, names, baseline=args.baseline)
    what = "baseline team" if args.baseline else "team"
    for name, _token in added:
        record(engine, Path(args.home), Event.TEAM_ADDED, name, f"{what} added; token handed out")
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

    engine = _engine(args)
    revoke_team(engine, args.name)
    record(engine, Path(args.home), Event.TEAM_REVOKED, args.name, "token revoked, runs hidden")
    refresh_home(args.home)
    print(f"team {args.name!r} revoked: its token no longer works and its runs are hidden")
    return 0


def _list(args: argparse.Namespace) -> int:
    import time

    from searchtome.service.members import list_members
    from searchtome.service.store import list_teams

    engine = _engine(args)
    rows, members = list_teams(engine), list_members(engine)
    print(f"{'team':<24} {'created (UTC)':<17} {'status':<8} submissions")
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["created_at"]))
        status = "revoked" if r["revoked_at"] else "active"
        tag = "  (baseline)" if r["baseline"] else ""
        print(f"{r['name']:<24} {created:<17} {status:<8} {r['submissions']}{tag}")
        for m in members.get(r["name"], []):
            added = time.strftime("%Y-%m-%d %H:%M", time.gmtime(m["created_at"]))
            state = "revoked" if m["revoked_at"] or r["revoked_at"] else "active"
            print(f"  member {m['name']:<15} {added:<17} {state}")
    return 0


def _add_member(args: argparse.Namespace) -> int:
    import sys

    from searchtome.service.members import add_member

    engine = _engine(args)
    token = add_member(engine, args.team, args.member)
    record(engine, Path(args.home), Event.MEMBER_ADDED, args.team, f"member {args.member} added")
    print(token)
    print(
        f"member {args.member!r} of team {args.team!r} added; the token is shown once: hand "
        "it to them",
        file=sys.stderr,
    )
    return 0


def _revoke_member(args: argparse.Namespace) -> int:
    from searchtome.service.members import revoke_member

    engine = _engine(args)
    revoke_member(engine, args.team, args.member)
    what = f"member {args.member} revoked"
    record(engine, Path(args.home), Event.MEMBER_REVOKED, args.team, what)
    print(f"member {args.member!r} of team {args.team!r} revoked: their token no longer works")
    return 0


def _reveal(args: argparse.Namespace) -> int:
    from searchtome.service.cache import refresh_home
    from searchtome.service.organiser import frozen_ranking, reveal

    engine = _engine(args)
    reveal(engine, Path(args.home), args.undo)
    refresh_home(args.home)
    print("private scores hidden" if args.undo else "private scores revealed on the leaderboard")
    if not args.undo:
        print("\n".join(frozen_ranking(Path(args.home), engine)))
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
    import os
    import sys

    import uvicorn

    from searchtome.service.app import create_app
    from searchtome.service.home import HOME_ENV, open_home
    from searchtome.service.supervise import Supervisor, service_logging
    from searchtome.service.worker import run_forked

    if args.workers < 0 or args.web < 1:
        raise SearchTomeError("--workers must be 0 or more and --web 1 or more")
    home = open_home(args.home)
    _engine(args).dispose()  # checks the schema; no connection crosses the fork below
    _check_port(args.host, args.port)
    service_logging()
    _log_jobs()
    # Workers are forked from this process (they start with its imports done) and watched.
    workers = Supervisor(args.workers, run_forked, (str(home.root.resolve()), os.getpid()))
    workers.start()
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
        workers.stop()
    return 0


def _check_port(host: str, port: int) -> None:
    """Refuse a busy address in one line before anything starts (uvicorn would log a trace)."""
    import socket

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise SearchTomeError(
            f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); stop "
            "what uses it or choose another --port"
        ) from None


def _init_phases(args: argparse.Namespace, root: Path) -> None:
    from searchtome.service.phases import Phase, parse_time

    given = [(p, False) for p in args.phase or []]
    if args.final_phase:
        given.append((args.final_phase, True))
    for (name, start, end), final in given:
        phase = Phase(name, parse_time(start, "--phase"), parse_time(end, "--phase"), final)
        _save_phase(args, root, phase)


def _save_phase(args: argparse.Namespace, root: Path, phase: Phase) -> None:
    from searchtome.service.phases import iso, save_phase

    engine = _engine(args)
    new = save_phase(engine, phase)
    what = (
        f"{'added' if new else 'changed'}: {iso(phase.start)} to {iso(phase.end)}"
        f"{', final (its end is the deadline)' if phase.final else ''}, public scores "
        f"{phase.visibility.value}"
        f"{', late uploads scored apart' if phase.late else ''}"
    )
    record(engine, root, Event.PHASE, phase.name, what)
    print(f"phase {phase.name!r} {what}")


def _phase(args: argparse.Namespace) -> int:
    import dataclasses

    from searchtome.service.phases import Phase, calendar, parse_time

    engine = _engine(args)
    with engine.connect() as conn:
        cal = calendar(conn)
    if args.name is None:
        for p in cal.summary()["phases"]:  # type: ignore[union-attr]
            print(" ".join(f"{k}={v}" for k, v in p.items()))
        return 0
    old = cal.named(args.name)
    if old is None and (args.start is None or args.end is None):
        raise SearchTomeError(f"phase {args.name!r} is new: give both --start and --end")
    changes = {
        "start": None if args.start is None else parse_time(args.start, "--start"),
        "end": None if args.end is None else parse_time(args.end, "--end"),
        "final": args.final,
        "visibility": None if args.scores is None else Visibility(args.scores),
        "daily_limit": args.daily_limit,
        "phase_limit": args.limit,
        "late": args.allow_late,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    base = old or Phase(args.name, 0.0, 0.0)
    _save_phase(args, Path(args.home), dataclasses.replace(base, **changes))
    return 0


def _log(args: argparse.Namespace) -> int:
    from searchtome.service.events import read

    lines = read(_engine(args), args.kind, args.tail)
    print("\n".join(lines) if lines else "no events yet")
    return 0


def _requeue(args: argparse.Namespace) -> int:
    from searchtome.service.organiser import requeue

    print(requeue(_engine(args), Path(args.home), args.id))
    return 0


def _rescore(args: argparse.Namespace) -> int:
    from searchtome.service.organiser import rescore

    n = rescore(_engine(args), Path(args.home), None if args.all else args.id, args.reason)
    print(f"{n} run(s) queued for scoring again; their old scores are kept in the history")
    return 0
