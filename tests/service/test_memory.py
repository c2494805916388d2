"""A server process gives a freed upload's pages back (glibc's threshold fixed, service.memory)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from searchtome.service import memory

PROBE = """
import sys
from searchtome.service import memory
if sys.argv[1] == "fixed":
    assert memory.fixed_threshold()
def rss_kib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
before = rss_kib()
for _ in range(3):
    body = b"x" * 5_000_000  # an upload's bytes, written, then freed
    del body
print(rss_kib() - before)
"""
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _kept_kib(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_freed_upload_buffers_return_to_the_system_with_the_threshold_fixed() -> None:
    # glibc's own rule: the first freed 5 MB block raises the threshold, the next ones stay
    assert _kept_kib("plain") > 4000
    assert _kept_kib("fixed") < 1000


def test_elsewhere_than_glibc_nothing_is_changed(monkeypatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("musl", "1.2"))
    assert memory.fixed_threshold() is False
