"""A SQLite cache of LLM replies, so an interrupted build resumes and others can rebuild offline.

Each finished reply is committed on its own (WAL journal): a build killed at any moment, even
with ``kill -9``, loses at most the replies still in flight. ``synchronous=NORMAL`` is enough for
that (a committed WAL transaction survives a process crash; only a power cut can drop the last
few, which a rerun simply asks again).

Keys. ``key`` hashes the model label, prompt version, sampling parameters and the request's
messages (which hold the unit text and the number of questions): a change to any of them is a
different request. The endpoint is not part of it: replicas serving one model share replies, and
an exported cache replays anywhere (``--endpoint cache``). Each row still records the ``host``
that answered, for ``cache info`` and for telling a local model's replies apart.

Caches written before the host left the key (their ``key`` column hashes the host too) are read
as they are, without migration: lookups go by ``content_key``, which has always been the key
without the host. Such a cache may hold two hosts' different replies to one request; the one
from an endpoint the build names wins (``prefer_hosts``), otherwise that is an error.

Claims. Two builds sharing a cache would otherwise both ask for every reply neither has yet.
Before a request is sent, its key is claimed with a lock file in ``<cache>.claims/`` (created
with ``O_EXCL``, naming the process and host); a process that finds a live claim waits for the
reply to appear in the cache instead of asking (:class:`Claims`). A claim whose process is gone
(a killed build, on this host) or that is older than ``ttl`` (another host) is stale and taken
over, so a crash never blocks a key.

Export/import: one gzip JSON-lines file, rows sorted by key, no timestamps: exporting the same
cache twice gives the same bytes.
"""

from __future__ import annotations

import contextlib
import enum
import gzip
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write, dumps, process_alive, stable_hash
from searchtome.settings import cache_dir

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
EXPORT_FORMAT = "searchtome-llm-cache-v1"
DEFAULT_FILE = "responses.sqlite"


def default_cache_path() -> Path:
    return cache_dir("llm") / DEFAULT_FILE


@dataclass(frozen=True)
class CacheKey:
    """Everything that determines a reply, and ``host``: the endpoint recorded as answering
    (not part of the key)."""

    host: str
    model: str
    prompt_version: str
    sampling: Mapping[str, Any]
    messages: Sequence[Mapping[str, str]]

    # Cached: a request's key is read several times on its way (lookup, claim, store), and each
    # hash is a JSON encoding of the whole prompt. A frozen dataclass never changes under them.
    @cached_property
    def request_hash(self) -> str:
        return stable_hash([dict(m) for m in self.messages])

    @cached_property
    def content_key(self) -> str:
        return stable_hash(
            {
                "model": self.model,
                "prompt_version": self.prompt_version,
                "sampling": dict(self.sampling),
                "messages": self.request_hash,
            }
        )

    @property
    def key(self) -> str:
        """The row key: the request without the endpoint (see the module docstring)."""
        return self.content_key


@dataclass(frozen=True)
class CachedReply:
    content: str | None
    finish_reason: str | None
    served_model: str | None
    host: str


@dataclass(frozen=True)
class CacheEntry:
    """One row as :meth:`ResponseCache.scan` gives it (``content`` ``None`` when too long)."""

    key: str
    model: str
    host: str
    prompt_version: str
    length: int | None
    content: str | None
    finish_reason: str | None


class Claims:
    """Claims on cache keys, so that processes sharing a cache never send one request twice.

    The cheap path: while no other live process claims keys in this cache, claims are kept in
    memory (a set) and announced by one marker, ``members/<id>.solo``, held only while at least
    one in-memory claim is outstanding. A process that starts claiming writes its own marker
    first and then lists ``members/``; so of two processes that start together at least one
    sees the other (the write comes before the list in both). Whoever sees another live member
    claims with files from then on (``<key>.claim``, linked into place whole), and a process
    that finds another's ``.solo`` marker waits until it is gone: the solo process, noticing the
    newcomer (``members/`` changed: one ``stat`` per claim and release), first writes a claim
    file for every request it has in flight, then renames its marker to ``.peer``. From then on
    both claim with files, as every process did before this cheap path (a file per request:
    about a quarter of the generator's throughput at 256 in flight, docs/benchmarks.md).

    A claimant that crashed holds nothing: its in-memory claims died with it, and a marker or
    claim file whose process is gone (this host) or that is older than ``ttl`` and not renewed
    (another host; live processes renew theirs every ``ttl / 4``) is ignored and taken over.
    ``SEARCHTOME_CLAIMS=files`` always claims with files: for a cache on a network file system,
    whose clients may see another host's new marker only seconds late.
    """

    # A listing of members/ is trusted as current only once the folder's mtime is this old:
    # file systems stamp it from a coarse clock, so two changes within one tick share a stamp.
    SETTLED_NS = 50_000_000
    _counter = 0

    def __init__(self, folder: Path, ttl: float = 900.0) -> None:
        import socket

        self.folder = folder
        self.members = folder / "members"
        self.ttl = ttl
        self.host = socket.gethostname()
        self.owner = {"pid": os.getpid(), "host": self.host}
        self._text = json.dumps(self.owner)
        self._mine: set[str] = set()  # keys this instance holds with files
        self._local: set[str] = set()  # keys this instance holds in memory (solo)
        self._shared = claims_mode() is ClaimsMode.FILES  # once shared, this instance stays so
        Claims._counter += 1
        self._id = f"{os.getpid()}-{Claims._counter}-{os.urandom(3).hex()}"
        self._marker: Path | None = None  # our members/ entry while it exists
        self._listed_ns: int | None = None  # members/ mtime at our last trusted listing
        self._others = (False, False)  # (another live member is solo, any other live member)
        self._touched = 0.0
        self._ready = False

    # -- the claims ---------------------------------------------------------------------------
    def try_claim(self, key: str) -> bool:
        """Claim ``key``; ``False`` when another claim holds it (or another process must first
        publish the requests it has in flight)."""
        if not self._ready:
            self.members.mkdir(parents=True, exist_ok=True)
            self._ready = True
        if key in self._local:
            return False
        if self._marker is None:  # announce ourselves before looking for others
            self._set_marker("peer" if self._shared else "solo")
        solo_elsewhere = self._look_around()[0]  # goes shared if anyone else is here
        if not self._shared:
            self._local.add(key)
            return True
        if solo_elsewhere:
            return False  # that process's in-flight requests are not on disk yet
        return self._claim_file(key)

    def held(self, key: str) -> bool:
        """Whether a live claim (ours or another process's) holds ``key``."""
        if key in self._local:
            return True
        if self._others[0] and self._look_around()[0]:
            return True  # wait until the solo process has published its claims
        path = self._path(key)
        return path.exists() and not self._stale(path)

    def release(self, key: str) -> None:
        if key in self._local:
            self._local.discard(key)
            if not self._shared:
                self._look_around()  # a newcomer waits on us: publish before going quiet
            if not self._shared and not self._local:
                self._set_marker(None)
        if key in self._mine:
            self._mine.discard(key)
            with contextlib.suppress(OSError):
                self._path(key).unlink()
        self._heartbeat()

    def close(self) -> None:
        """Release every claim and the marker (a closed cache claims nothing)."""
        for key in [*self._local, *self._mine]:
            self.release(key)
        self._set_marker(None)
        if self._ready:
            with contextlib.suppress(OSError):
                self.members.rmdir()  # only when empty: other members keep theirs

    # -- members --------------------------------------------------------------------------------
    def _look_around(self) -> tuple[bool, bool]:
        """Whether another live member is solo, and whether any is; lists members/ only when it
        changed (one ``stat`` otherwise). A solo instance that sees another member publishes."""
        try:
            stamp = os.stat(self.members).st_mtime_ns
        except OSError:
            return self._others
        if stamp != self._listed_ns:
            self._others = self._list_members()
            settled = time.time_ns() - stamp > self.SETTLED_NS
            self._listed_ns = stamp if settled else None
        if self._others[1] and not self._shared:
            self._publish()
        self._heartbeat()
        return self._others

    def _list_members(self) -> tuple[bool, bool]:
        solo = anyone = False
        mine = self._marker.name if self._marker else None
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.members):
                if entry.name == mine or not entry.name.endswith((".solo", ".peer")):
                    continue
                if self._stale(Path(entry.path)):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)  # its owner is gone
                    continue
                anyone = True
                solo = solo or entry.name.endswith(".solo")
        return solo, anyone

    def _publish(self) -> None:
        """Leave the cheap path: a claim file for every request in flight, then ``.peer``."""
        self._shared = True
        for key in sorted(self._local):
            if not self._claim_file(key):
                log.warning("claim %s: held by another process as well; asking anyway", key)
        self._local.clear()
        self._set_marker("peer")

    def _set_marker(self, state: str | None) -> None:
        """Make our members/ entry ``<id>.<state>`` (``None``: no entry)."""
        old = self._marker
        new = self.members / f"{self._id}.{state}" if state else None
        if old == new:
            return
        try:
            if old is None:
                self._write_marker(new)
            elif new is None:
                old.unlink()
            else:
                os.rename(old, new)
        except FileNotFoundError:
            # Ours went missing (a closing peer removed an empty members/ meanwhile).
            if new is not None:
                self._write_marker(new)
        self._marker = new
        self._touched = time.monotonic()

    def _write_marker(self, path: Path | None) -> None:
        if path is not None:
            self.members.mkdir(parents=True, exist_ok=True)
            self._place(path)  # an empty marker would read as a dead member's and be removed

    def _heartbeat(self) -> None:
        # Another host judges our marker and claims by their age: renew them well within ttl.
        if self._marker is None or time.monotonic() - self._touched < self.ttl / 4:
            return
        self._touched = time.monotonic()
        for path in [self._marker, *(self._path(k) for k in self._mine)]:
            with contextlib.suppress(OSError):
                os.utime(path)

    # -- files ----------------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.claim"

    def _claim_file(self, key: str) -> bool:
        """``key`` claimed with a file; ``False`` when another live claim holds it."""
        path = self._path(key)
        for _ in range(3):
            if self._place(path):
                self._mine.add(key)
                return True
            if not self._stale(path):
                return False
            # Only one of several processes that found it stale wins the rename.
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, path.with_name(f"{path.name}.stale.{os.getpid()}"))
                os.unlink(path.with_name(f"{path.name}.stale.{os.getpid()}"))
        return False

    def _place(self, path: Path) -> bool:
        """Create ``path`` holding our owner record; ``False`` when it exists. The record is
        written to a private file first and hard-linked into place, so the file is never visible
        empty: create-then-write let a racing process read an empty claim, take it for a killed
        claimant's, and claim (or remove) it too."""
        tmp = path.with_name(f"{path.name}.new.{os.getpid()}")
        tmp.write_text(self._text, encoding="utf-8")
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return True

    def _stale(self, path: Path) -> bool:
        try:
            owner = json.loads(path.read_text(encoding="utf-8"))
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return False  # released meanwhile: not stale, simply gone (the next try wins)
        except (OSError, ValueError):
            return True  # unreadable: not a claim this code wrote
        if not isinstance(owner, dict):
            return True
        if owner.get("host") == self.host and isinstance(owner.get("pid"), int):
            # A reused pid looks alive: past four times the ttl the claim is stale anyway.
            return not process_alive(owner["pid"]) or age > 4 * self.ttl
        return age > self.ttl  # another host's process cannot be asked


class ClaimsMode(enum.Enum):
    """How a build claims the requests it is about to send (``SEARCHTOME_CLAIMS``)."""

    AUTO = "auto"  # in memory while alone on the cache, claim files once another build shares it
    FILES = "files"  # claim files always (a cache on a network file system)


def claims_mode() -> ClaimsMode:
    """``SEARCHTOME_CLAIMS`` read (unset: :attr:`ClaimsMode.AUTO`)."""
    raw = os.environ.get("SEARCHTOME_CLAIMS", "").strip().lower() or ClaimsMode.AUTO.value
    try:
        return ClaimsMode(raw)
    except ValueError:
        raise SearchTomeError(
            f"SEARCHTOME_CLAIMS={os.environ['SEARCHTOME_CLAIMS']!r}: expected one of "
            + ", ".join(m.value for m in ClaimsMode)
        ) from None


class ResponseCache:
    """One SQLite file; safe to use from one thread at a time per instance."""

    def __init__(self, path: PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            raise SearchTomeError(
                f"{self.path}: not a usable response cache ({exc}); move it away or pass "
                "another --cache file"
            ) from None
        self._lock = threading.Lock()
        self.claims = Claims(self.path.with_name(f"{self.path.name}.claims"))

    def _init_schema(self) -> None:
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self._db.execute(
                """CREATE TABLE IF NOT EXISTS responses (
                    key TEXT PRIMARY KEY,
                    content_key TEXT NOT NULL,
                    request_hash TEXT NOT NULL,
                    host TEXT NOT NULL,
                    model TEXT NOT NULL,
                    prompt_version TEXT NOT NULL,
                    sampling TEXT NOT NULL,
                    content TEXT,
                    finish_reason TEXT,
                    served_model TEXT
                )"""
            )
            self._db.execute(
                "CREATE INDEX IF NOT EXISTS responses_content ON responses (content_key)"
            )
            # OR IGNORE: two builds creating one cache at once both find no row (a plain INSERT
            # failed the second with a UNIQUE error); whichever wrote first, the version is read.
            self._db.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )
            row = self._db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if int(row[0]) != SCHEMA_VERSION:
                raise SearchTomeError(
                    f"{self.path}: cache schema {row[0]}, this searchtome reads {SCHEMA_VERSION}"
                )

    # -- lookups ---------------------------------------------------------------------------------
    def get(self, key: CacheKey, *, prefer_hosts: Sequence[str] = ()) -> CachedReply | None:
        """The stored reply for ``key``, whichever endpoint gave it. When an older cache holds
        different replies from several hosts, the first of ``prefer_hosts`` that has one wins;
        with none of them, that is an error."""
        with self._lock:
            rows = self._db.execute(
                "SELECT content, finish_reason, served_model, host FROM responses "
                "WHERE content_key=? ORDER BY host",
                (key.content_key,),
            ).fetchall()
        if not rows:
            return None
        if len({(r[0], r[1]) for r in rows}) == 1:
            return CachedReply(*rows[0])
        for host in prefer_hosts:
            mine = [r for r in rows if r[3] == host]
            if mine:
                return CachedReply(*mine[0])
        hosts = ", ".join(r[3] for r in rows)
        raise SearchTomeError(
            f"{self.path}: endpoints {hosts} gave different replies to the same request; "
            "pass one of them as --endpoint to choose its replies"
        )

    def put(
        self,
        key: CacheKey,
        content: str | None,
        finish_reason: str | None,
        served_model: str | None = None,
        host: str | None = None,
    ) -> None:
        """Store one reply (answered by ``host``, default ``key.host``) and commit at once (the
        unit is then safe from a kill)."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.key,
                    key.content_key,
                    key.request_hash,
                    host or key.host,
                    key.model,
                    key.prompt_version,
                    dumps(dict(key.sampling), indent=None),
                    content,
                    finish_reason,
                    served_model,
                ),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def request_hashes(self) -> set[str]:
        """Hashes of the messages of every stored reply (tests use it to check resumption)."""
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT request_hash FROM responses")}

    def scan(self, max_chars: int) -> Iterator[CacheEntry]:
        """Every row, in key order, without loading a content over ``max_chars`` characters (its
        length is given instead): ``cache check`` on a cache poisoned with 8 MB replies stays
        small."""
        query = (
            "SELECT key, model, host, prompt_version, length(content), "
            "CASE WHEN length(content) <= ? THEN content END, finish_reason "
            "FROM responses ORDER BY key"
        )
        with self._lock:
            cursor = self._db.execute(query, (max_chars,))
            while batch := cursor.fetchmany(500):
                yield from (CacheEntry(*row) for row in batch)

    def delete(self, keys: Iterable[str]) -> int:
        """Remove the rows with these keys (one transaction); returns how many went."""
        keys = list(keys)
        with self._lock, self._db:
            before = self._db.total_changes
            self._db.executemany("DELETE FROM responses WHERE key=?", ((k,) for k in keys))
            return self._db.total_changes - before

    def close(self) -> None:
        self.claims.close()
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sharing ---------------------------------------------------------------------------------
    def rows(self) -> Iterator[dict[str, Any]]:
        """Every cached reply as a JSON-ready row, in key order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, content_key, request_hash, host, model, prompt_version, sampling, "
                "content, finish_reason, served_model FROM responses ORDER BY key"
            ).fetchall()
        names = (
            "key",
            "content_key",
            "request_hash",
            "host",
            "model",
            "prompt_version",
            "sampling",
            "content",
            "finish_reason",
            "served_model",
        )
        for row in rows:
            item = dict(zip(names, row, strict=True))
            item["sampling"] = json.loads(item["sampling"])
            yield item

    def export(self, path: PathLike, *, model: str | None = None) -> int:
        """Write every reply (or one model's) to one gzip JSON-lines file; return the count."""
        rows = [r for r in self.rows() if model is None or r["model"] == model]
        header = {"format": EXPORT_FORMAT, "count": len(rows)}
        path = Path(path)
        with (
            atomic_write(path, "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
        ):
            gz.write((dumps(header, indent=None) + "\n").encode("utf-8"))
            for row in rows:
                gz.write((dumps(row, indent=None) + "\n").encode("utf-8"))
        log.info("exported %d replies to %s", len(rows), path)
        return len(rows)

    def import_file(self, path: PathLike, *, replace: bool = False) -> dict[str, int]:
        """Merge an exported file, one reply per request (``content_key``). Existing replies win
        unless ``replace``; conflicts counted."""
        path = Path(path)
        stats = {"added": 0, "same": 0, "conflicts": 0, "replaced": 0}
        try:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                lines = iter(fh)
                try:
                    header = json.loads(next(lines))
                except StopIteration:
                    raise SearchTomeError(f"{path}: empty file, not a cache export") from None
                if header.get("format") != EXPORT_FORMAT:
                    raise SearchTomeError(
                        f"{path}: not a searchtome cache export (format {header.get('format')!r},"
                        f" expected {EXPORT_FORMAT!r})"
                    )
                rows = [json.loads(line) for line in lines if line.strip()]
        except FileNotFoundError:
            raise SearchTomeError(f"{path}: file not found") from None
        except (OSError, json.JSONDecodeError, EOFError) as exc:
            raise SearchTomeError(
                f"{path}: unreadable cache export ({exc}); export it again"
            ) from None
        if len(rows) != header.get("count"):
            raise SearchTomeError(
                f"{path}: holds {len(rows)} replies but its header says {header.get('count')};"
                " the file is truncated, export it again"
            )
        required = {"key", "content_key", "request_hash", "host", "model", "prompt_version"}
        with self._lock, self._db:
            for n, row in enumerate(rows, 2):
                if not required <= row.keys():
                    raise SearchTomeError(f"{path}: line {n} lacks {sorted(required - row.keys())}")
                old = self._db.execute(
                    "SELECT content, finish_reason FROM responses WHERE content_key=?",
                    (row["content_key"],),
                ).fetchall()
                if old:
                    if (row.get("content"), row.get("finish_reason")) in {tuple(o) for o in old}:
                        stats["same"] += 1
                        continue
                    stats["conflicts"] += 1
                    if not replace:
                        continue
                    stats["replaced"] += 1
                    self._db.execute(
                        "DELETE FROM responses WHERE content_key=?", (row["content_key"],)
                    )
                else:
                    stats["added"] += 1
                self._db.execute(
                    "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        row["content_key"],  # the key, whatever an older export called it
                        row["content_key"],
                        row["request_hash"],
                        row["host"],
                        row["model"],
                        row["prompt_version"],
                        dumps(row.get("sampling", {}), indent=None),
                        row.get("content"),
                        row.get("finish_reason"),
                        row.get("served_model"),
                    ),
                )
        if stats["conflicts"]:
            log.warning(
                "%s: %d replies differ from the ones already cached (%s)",
                path,
                stats["conflicts"],
                "replaced" if replace else "kept the cached ones",
            )
        return stats
