"""Shared helpers of the service tests: a blind release, servers on free ports, PostgreSQL.

Every server is a real ``searchtome server run`` (or ``server worker``) subprocess on
127.0.0.1; requests go over real HTTP. PostgreSQL is Debian's server binary, run by the
unprivileged ``postgres`` user (root may not run it) from a throw-away data folder.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchtome.dataset.blind import load_private_queries, make_blind
from searchtome.submissions import make_meta
from tests.conftest import make_tiny_dataset

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def blind_release(root: Path) -> tuple[Path, Path]:
    """The tiny dataset written as a blind release: ``(public, private)``."""
    make_tiny_dataset(root / "full")
    make_blind(root / "full", root / "public", root / "private", "test")
    return root / "public", root / "private"


def release_with_run(root: Path) -> tuple[Path, Path, Path, tuple[bytes, bytes]]:
    """A blind release and one correct run's ``(predictions, meta)`` bytes: ``(root, public,
    private, files)``, what the fault, supervision and availability tests start from."""
    public, private = blind_release(root)
    folder = submission(root / "run", private, "run")
    files = ((folder / "predictions.jsonl").read_bytes(), (folder / "meta.json").read_bytes())
    return root, public, private, files


def meta_json(system: str) -> dict[str, Any]:
    return make_meta(
        system,
        description="a test system",
        command="searchtome run test",
        dataset_revision="tiny-blind",
        hardware="cpu",
        date_="2025-01-31",
    )


def submission(
    folder: Path, private: Path, system: str = "sys", right: float = 1.0, gz: bool = False
) -> Path:
    """A submission folder answering every blind query; the first ``right`` share correctly."""
    queries = load_private_queries(private)
    n_right = round(right * len(queries))
    wrong = {q.leaf_id for q in queries}
    lines = []
    for i, q in enumerate(queries):
        other = next(leaf for leaf in sorted(wrong) if leaf != q.leaf_id)
        ids = [q.leaf_id] if i < n_right else [other]
        lines.append(json.dumps({"query_id": q.query_id, "leaf_ids": ids}) + "\n")
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(lines).encode()
    if gz:
        import gzip

        (folder / "predictions.jsonl.gz").write_bytes(gzip.compress(text))
    else:
        (folder / "predictions.jsonl").write_bytes(text)
    (folder / "meta.json").write_text(json.dumps(meta_json(system)))
    return folder


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``searchtome ARGS`` in this process (a subprocess would pay the imports again)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from searchtome.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([*args, "--no-progress"])
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def init_home(home: Path, public: Path, private: Path, *extra: str) -> None:
    done = cli(
        "server",
        "init",
        "--home",
        str(home),
        "--public",
        str(public),
        "--private",
        str(private),
        "--permutations",
        "200",
        *extra,
    )
    assert done.returncode == 0, done.stderr


def add_team(home: Path, name: str) -> str:
    done = cli("server", "add-team", "--home", str(home), name)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Server:
    """``searchtome server run`` on a free port; ``url``, ``pid``; stopped on exit."""

    def __init__(
        self, home: Path, workers: int = 1, web: int = 1, env: dict[str, str] | None = None
    ) -> None:
        self.home, self.workers, self.web, self.env = home, workers, web, env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "searchtome",
                "server",
                "run",
                "--home",
                str(self.home),
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--web",
                str(self.web),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            start_new_session=True,
        )
        wait_until(lambda: get(self.url + "/api/health")[0] == 200, 60, self.output)
        return self

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


class Worker:
    """One ``searchtome server worker`` process (its own session, so a kill reaches only it)."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "searchtome", "server", "worker", "--home", str(home)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def wait_until(check: Any, timeout: float, why: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if check():
                return
        time.sleep(0.1)
    raise AssertionError(f"timed out; {why() if callable(why) else why or ''}")


def get(url: str, token: str | None = None) -> tuple[int, Any, dict[str, str]]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            raw, status, headers = r.read(), r.status, dict(r.headers)
    except urllib.error.HTTPError as exc:
        raw, status, headers = exc.read(), exc.code, dict(exc.headers)
    ctype = headers.get("content-type", "")
    return status, json.loads(raw) if "json" in ctype else raw.decode(), headers


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def multipart(fields: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = "testboundary7e3f"
    out = b""
    for name, (filename, data) in fields.items():
        out += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            + data
            + b"\r\n"
        )
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def upload(url: str, token: str, predictions: bytes, meta: bytes, name: str = "predictions.jsonl"):
    body, ctype = multipart({"meta": ("meta.json", meta), "predictions": (name, predictions)})
    return post(
        url + "/api/submissions", body, {"Authorization": f"Bearer {token}", "Content-Type": ctype}
    )


def wait_scored(url: str, token: str, public_id: str, timeout: float = 60) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def done() -> bool:
        seen.update(get(f"{url}/api/submissions/{public_id}", token)[1])
        return seen.get("state") in ("scored", "rejected", "failed")

    wait_until(done, timeout, lambda: seen)
    return seen


def board_rows(url: str, until: Any = None, scope: str = "public") -> list[dict[str, Any]]:
    """The leaderboard's rows of ``scope``; with ``until`` (rows -> bool), once it holds.

    A scoring worker refreshes the stored board just after it records a score, so a run is on
    the board a moment after its status says ``scored``.
    """
    rows: list[dict[str, Any]] = []

    def ready() -> bool:
        rows[:] = get(url + "/api/leaderboard")[1].get(scope, {}).get("rows", [])
        return until is None or bool(until(rows))

    wait_until(ready, 30, lambda: rows)
    return rows


# -- PostgreSQL ----------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL server on a free port; yields a SQLAlchemy URL of an empty database.

    Raises ``RuntimeError`` saying why when it cannot start (the tests skip with that reason).
    """
    bindir = postgres_bin()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binary (apt-get install postgresql)")
    run_as: list[str] = []
    if os.geteuid() == 0:  # root may not run postgres: the package's own user does
        # runuser lives in /usr/sbin, which a CI image's PATH may lack: look there as well.
        runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
        if runuser is None:
            raise RuntimeError("running as root without runuser to start postgres as 'postgres'")
        run_as = [runuser, "-u", "postgres", "--"]
    data = Path(tempfile.mkdtemp(prefix="searchtome-pg-"))
    if run_as:
        shutil.chown(data, "postgres")
    port = free_port()
    done = subprocess.run(
        [
            *run_as,
            str(bindir / "initdb"),
            "-D",
            str(data / "db"),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        shutil.rmtree(data, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {done.stderr.strip()[-300:]}")
    proc = subprocess.Popen(
        [
            *run_as,
            str(bindir / "postgres"),
            "-D",
            str(data / "db"),
            "-p",
            str(port),
            "-k",
            str(data),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(data / "log", "wb"),  # noqa: SIM115 (kept open by the server process)
        start_new_session=True,
    )
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    try:
        _wait_for_postgres(url, proc)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # fast shutdown
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(data, ignore_errors=True)


def _wait_for_postgres(url: str, proc: subprocess.Popen[bytes]) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited with status {proc.returncode}")
        try:
            with engine.connect():
                engine.dispose()
                return
        except sa.exc.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError("postgres did not accept connections in 30 s") from None
            time.sleep(0.2)
