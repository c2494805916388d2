"""The one-line description of the machine recorded in a submission's ``meta.json``.

One implementation for every writer of ``hardware`` (the baseline runner and
:func:`searchtome.submissions.make_meta`), so two submissions made on the same machine say the
same thing.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys


def _cpu_name() -> str:
    # platform.processor() is empty or just "x86_64" on Linux; /proc/cpuinfo has the model.
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def _cores() -> int:
    # The cores this process may use (a container's limit), not the machine's count.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def hardware() -> str:
    """``"<cpu>, <n> cores, <n> GiB RAM, GPU <name>"`` (``no GPU used`` without a CUDA torch)."""
    gib = ""
    with contextlib.suppress(ValueError, OSError, AttributeError):
        gib = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM"
    gpu = ""
    # Only a torch that is already loaded counts: importing it here would cost seconds.
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        gpu = f", GPU {torch.cuda.get_device_name(0)}"
    return f"{_cpu_name()}, {_cores()} cores{gib}{gpu or ', no GPU used'}"
