"""The server home (``SRV``): its settings file, the two dataset halves, the SQLite file.

::

    SRV/server.json    settings, the database URL and the secret of the public/private split
    SRV/public/        copy of the blind release's public half (what web processes read)
    SRV/private/       copy of its private half (gold; read by scoring workers only)
    SRV/server.db      the SQLite database, unless --db names another

SRV is created private (mode 0700): the private half and the split secret never leave it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.document import Format, Record, read_document, write_document
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, read_json, write_json

SETTINGS_FILE = "server.json"
SERVER = Format("searchtome-server", 1)  # server.json, on the document kernel
FORMAT = SERVER.tag
HOME_ENV = "SEARCHTOME_SERVER_HOME"


@dataclass(frozen=True)
class ServerSettings(Record):
    """Everything ``server init`` records (``server.json``, read strictly: a hand edit of the
    wrong type is one error line, a key this version does not know is kept); defaults written
    once here."""

    db: str = ""
    split: str = "test"
    daily_limit: int = 5  # accepted uploads per team and UTC day
    private_fraction: float = 0.0  # share of the test queries scored in secret until reveal
    max_final: int = 2  # runs a team may mark as final
    upload_max_bytes: int = 64 << 20  # the whole request body, enforced while it streams
    upload_timeout: float = 300.0  # seconds an upload's body may take in all
    upload_min_rate: int = 8 << 10  # bytes/s an upload's body must average after the grace
    upload_grace: float = 10.0  # seconds before the minimum rate applies
    upload_slots: int = 4  # uploads read and checked at once, per web process
    team_uploads: int = 2  # uploads of one team in flight at once, per web process
    upload_bodies: int = 64  # upload bodies received at once (spooled to disk), per web process
    upload_body_wait: float = 30.0  # seconds an upload waits for one of those before a 503
    health_max_queue_age: float = 900.0  # /api/health is 503 once an upload waits longer
    one_row_per_team: bool = False  # the public board shows each team's best run only
    max_decompressed_bytes: int = 256 << 20
    lease_seconds: float = 120.0  # a claimed job is retried when its worker stops heartbeating
    busy_timeout_ms: int = 5000
    requests_per_minute: int = 120  # per client address, per web process
    public_scores: str = "rounded"  # exact | rounded | ladder (searchtome.service.public)
    ladder_margin: float = 2.0  # standard errors a run must beat its team's best by (ladder)
    count_refused: bool = False  # uploads refused or failed keep their quota slot
    permutations: int = 2000
    bootstrap: int = 1000
    title: str = ""  # the competition's name on its page (default: the dataset's)
    description: str = ""  # what the competition is, shown under the title
    rules: str = ""  # the rules, shown on the page (blank lines separate paragraphs)
    anonymous: bool = False  # the board shows "team <id>" for participants until `server reveal`
    secret: str = ""  # key of the query split; never shown
    created: float = 0.0


@dataclass(frozen=True)
class Home:
    root: Path
    settings: ServerSettings

    @property
    def public(self) -> Path:
        return self.root / "public"

    @property
    def private(self) -> Path:
        return self.root / "private"


def open_home(root: PathLike | None = None) -> Home:
    """Read ``SRV/server.json`` (``root`` or ``$SEARCHTOME_SERVER_HOME``)."""
    if root is None:
        root = os.environ.get(HOME_ENV)
        if not root:
            raise SearchTomeError(f"no server home; pass --home SRV or set {HOME_ENV}")
    path = Path(root) / SETTINGS_FILE
    if not path.is_file():
        raise SearchTomeError(f"{path}: not a server home; create it with `searchtome server init`")
    advice = "fix that value, or create the home again with `searchtome server init`"
    settings = read_document(SERVER, ServerSettings, read_json(path), path, advice)
    return Home(Path(root), settings)


def _check_halves(public: Path, private: Path) -> str:
    from searchtome.dataset.blind import is_private, read_private
    from searchtome.dataset.loader import load

    if not is_private(private):
        raise SearchTomeError(
            f"{private}: not the private half of a blind release (no blind.json); write one "
            "with `searchtome publish --blind`, `build --blind` or `import repro --blind`"
        )
    split = read_private(private).split
    manifest = load(public).manifest
    if manifest.blind_split != split:
        blind = manifest.blind.to_dict() if manifest.blind else None
        raise SearchTomeError(
            f"{public}: not the public half of this release (its manifest says blind={blind!r}, "
            f"the private half holds {split!r})"
        )
    return split


def init_home(
    root: PathLike, public: PathLike, private: PathLike, db: str | None = None, **options: Any
) -> Home:
    """Create SRV: copy both halves, draw the split secret, write server.json, migrate the DB."""
    from searchtome.dataset.blind import owner_only
    from searchtome.service.db import make_engine, migrate, sqlite_url

    home = Path(root)
    if (home / SETTINGS_FILE).exists():
        raise SearchTomeError(f"{home}: already a server home; use another --home")
    pub, priv = Path(public), Path(private)
    split = _check_halves(pub, priv)
    _check_slots(options)
    fraction = float(options.get("private_fraction") or 0.0)
    if not 0.0 <= fraction < 1.0:
        raise SearchTomeError(f"--private-fraction {fraction}: must be at least 0 and below 1")
    from searchtome.service.kinds import ScoreMode

    modes = [m.value for m in ScoreMode]
    if (options.get("public_scores") or ServerSettings.public_scores) not in modes:
        raise SearchTomeError(f"--public-scores {options['public_scores']!r}: use one of {modes}")
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o700)
    for src, name in ((pub, "public"), (priv, "private")):
        shutil.rmtree(home / name, ignore_errors=True)
        shutil.copytree(src, home / name)
    owner_only(home / "private")  # whatever modes the copied folder had
    settings = ServerSettings(
        db=db or sqlite_url((home / "server.db").resolve()),
        split=split,
        secret=secrets.token_hex(32),
        created=time.time(),
        **{k: v for k, v in options.items() if v is not None},
    )
    migrate(make_engine(settings.db, settings.busy_timeout_ms))
    write_json(home / SETTINGS_FILE, write_document(SERVER, settings))
    (home / SETTINGS_FILE).chmod(0o600)
    return Home(home, settings)


def _check_slots(options: dict[str, Any]) -> None:
    """Per-team upload slots must stay below the process's, so one team cannot take them all."""
    d = ServerSettings()
    slots = options.get("upload_slots") or d.upload_slots
    team = options.get("team_uploads") or d.team_uploads
    if not 1 <= team < slots:
        raise SearchTomeError(
            f"--team-uploads {team}: must be at least 1 and below --upload-slots ({slots}), so "
            "that one team cannot hold every upload slot"
        )
    bodies = options.get("upload_bodies") or d.upload_bodies
    if bodies < slots:
        raise SearchTomeError(
            f"--upload-bodies {bodies}: must be at least --upload-slots ({slots}); a body is "
            "received before its upload takes a slot"
        )
    for name in ("upload_timeout", "upload_min_rate", "health_max_queue_age"):
        value = options.get(name)
        if value is not None and value <= 0:
            raise SearchTomeError(f"--{name.replace('_', '-')} {value}: must be above 0")


def private_queries(query_ids: list[str], secret: str, fraction: float) -> set[str]:
    """The secret part of the test queries: the ``round(fraction * n)`` smallest HMACs.

    Reproducible from the secret alone, exact in size, and unpredictable without the secret.
    """
    if fraction <= 0 or not query_ids:
        return set()
    key = bytes.fromhex(secret)
    ranked = sorted(query_ids, key=lambda q: hmac.new(key, q.encode(), hashlib.sha256).digest())
    return set(ranked[: round(fraction * len(query_ids))])
