"""Claims on cache keys: in memory while a process is alone, files once another one shares the
cache, and nothing a crashed claimant held blocks anyone (searchtome.llm.cache.Claims)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from searchtome.errors import SearchTomeError
from searchtome.llm.cache import Claims, ResponseCache


def _claim_files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.claim")}


def _members(folder: Path) -> set[str]:
    return {p.suffix for p in (folder / "members").iterdir()}


def test_alone_claims_stay_in_memory(tmp_path: Path) -> None:
    claims = Claims(tmp_path / "c")
    assert claims.try_claim("k1") and claims.try_claim("k2")
    assert not claims.try_claim("k1") and claims.held("k1")  # a duplicate in this process waits
    assert _claim_files(tmp_path / "c") == set() and _members(tmp_path / "c") == {".solo"}
    claims.release("k1")
    assert not claims.held("k1") and claims.try_claim("k1")
    claims.release("k1")
    claims.release("k2")
    assert not (tmp_path / "c" / "members").exists() or _members(tmp_path / "c") == set()
    claims.close()
    assert list((tmp_path / "c").iterdir()) == []


def test_a_newcomer_waits_until_the_solo_process_has_published_its_claims(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    a, b = Claims(folder), Claims(folder)  # two builds (one process here: distinct instances)
    assert a.try_claim("k1")  # alone: in memory only
    # b announces itself, sees a's solo marker and waits: k1 is in flight but not on disk.
    assert not b.try_claim("k1") and b.held("k1")
    assert not b.try_claim("k2") and b.held("k2")  # every key: a may hold any of them
    assert a.try_claim("k3")  # a notices b here: k1 and k3 become files, a turns peer
    assert _claim_files(folder) == {"k1.claim", "k3.claim"}
    assert _members(folder) == {".peer"}
    assert not b.try_claim("k1") and b.held("k1")  # now held by a's file
    assert b.try_claim("k2") and not a.try_claim("k2")  # b claims with files too
    a.release("k1")
    assert not b.held("k1") and b.try_claim("k1")
    for claims, keys in ((a, ("k3",)), (b, ("k1", "k2"))):
        for key in keys:
            claims.release(key)
    a.close()
    b.close()
    assert list(folder.iterdir()) == []


def test_two_processes_starting_together_never_both_stay_alone(tmp_path: Path) -> None:
    """Each writes its marker before it lists the others, so one of them always sees the other."""
    folder = tmp_path / "c"
    a, b = Claims(folder), Claims(folder)
    a._set_marker("solo")  # a has announced itself but not listed yet
    assert not b.try_claim("k")  # b lists: sees a's marker, so it waits for a...
    assert a.try_claim("k")  # ...and a, listing, sees b: it claims with a file from now on
    assert _claim_files(folder) == {"k.claim"} and _members(folder) == {".peer"}
    assert not b.try_claim("k") and b.held("k")
    a.release("k")
    assert b.try_claim("k") and _claim_files(folder) == {"k.claim"}
    b.release("k")
    a.close()
    b.close()
    assert list(folder.iterdir()) == []


_CLAIMER = """
import sys, time
from pathlib import Path
from searchtome.llm.cache import Claims
claims = Claims(Path(sys.argv[1]))
assert claims.try_claim("k")
print("claimed", flush=True)
time.sleep(600)
"""


def test_a_killed_claimants_claims_expire_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "claimed"
    live = Claims(folder)
    assert not live.try_claim("k")  # the other process is alone with k in memory: wait
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not live.held("k")  # its marker belongs to a dead process now
    assert live.try_claim("k")
    live.release("k")
    live.close()
    assert list(folder.iterdir()) == []


def test_another_hosts_marker_counts_until_its_ttl(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    (folder / "members").mkdir(parents=True)
    marker = folder / "members" / "elsewhere.solo"
    marker.write_text(json.dumps({"pid": 1, "host": "some-other-host"}))
    claims = Claims(folder, ttl=60)
    assert not claims.try_claim("k") and claims.held("k")
    old = time.time() - 61
    os.utime(marker, (old, old))  # not renewed within the ttl: that process is gone
    os.utime(folder / "members")  # (a change of members/ is what makes us list it again)
    time.sleep(Claims.SETTLED_NS / 1e9)
    assert not claims.held("k") and claims.try_claim("k")
    claims.close()


def test_files_mode_always_claims_with_files_and_is_seen(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "c"
    monkeypatch.setenv("SEARCHTOME_CLAIMS", "files")
    files = Claims(folder)
    assert files.try_claim("k1") and _claim_files(folder) == {"k1.claim"}
    monkeypatch.delenv("SEARCHTOME_CLAIMS")
    auto = Claims(folder)
    assert auto.try_claim("k2") and _claim_files(folder) == {"k1.claim", "k2.claim"}
    assert not auto.try_claim("k1")
    files.close()
    auto.close()
    assert list(folder.iterdir()) == []
    monkeypatch.setenv("SEARCHTOME_CLAIMS", "lock")
    with pytest.raises(SearchTomeError, match="SEARCHTOME_CLAIMS='lock': expected one of auto"):
        ResponseCache(tmp_path / "x.sqlite")


def test_a_claim_file_is_never_visible_without_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A racing process that read an empty claim took it for a killed claimant's and claimed the
    # key as well; so the moment a claim appears under its name, it must already say who holds it.
    monkeypatch.setenv("SEARCHTOME_CLAIMS", "files")
    seen: dict[str, object] = {}  # what each file held at the moment it appeared
    real_link = os.link

    def link(src: str | Path, dst: str | Path) -> None:
        seen[Path(dst).name] = json.loads(Path(src).read_text(encoding="utf-8"))
        real_link(src, dst)

    monkeypatch.setattr(os, "link", link)
    claims = Claims(tmp_path / "c")
    assert claims.try_claim("k1")
    # The claim and this process's members/ marker (an empty one would read as a dead member's).
    assert "k1.claim" in seen and any(name.endswith(".peer") for name in seen), seen
    assert all(isinstance(o, dict) and o["pid"] == os.getpid() for o in seen.values()), seen
    assert len(_claim_files(tmp_path / "c")) == 1
    assert not any(p.name.count(".new.") for p in (tmp_path / "c").iterdir())  # no leftovers
    other = Claims(tmp_path / "c")
    assert not other.try_claim("k1") and other.held("k1")
    claims.release("k1")
    claims.close()
    other.close()
