"""A server process gives freed memory back to the system (service.memory, glibc only)."""

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
    assert memory.give_back()
def rss_kib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
before = rss_kib()
for _ in range(3):
    body = b"x" * 5_000_000  # an upload's bytes, written, then freed
    del body
print(rss_kib() - before)
"""
SMALL = """
import sys, time
from searchtome.service import memory
memory.TRIM_SECONDS = 0.1
if sys.argv[1] == "fixed":
    assert memory.give_back()
def rss_kib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
blocks = [bytes(2000) + i.to_bytes(4, "big") for i in range(30_000)]  # 60 MB in the heap
pin = bytes(2000) + b"pin"  # allocated last: the heap's top stays in use
del blocks
before = rss_kib()
time.sleep(0.5)
print(before - rss_kib())
"""
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _kib(probe: str, mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", probe, mode], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_freed_upload_buffers_return_to_the_system_with_the_threshold_fixed() -> None:
    # glibc's own rule: the first freed 5 MB block raises the threshold, the next ones stay
    assert _kib(PROBE, "plain") > 4000
    assert _kib(PROBE, "fixed") < 1000


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_small_blocks_freed_mid_heap_are_returned_by_the_trimming_thread() -> None:
    assert _kib(SMALL, "plain") < 1000  # glibc alone keeps the heap's middle
    assert _kib(SMALL, "fixed") > 40_000


def test_elsewhere_than_glibc_nothing_is_changed(monkeypatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("musl", "1.2"))
    assert memory.give_back() is False
