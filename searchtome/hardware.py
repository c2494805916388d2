"""The machine facts recorded in a submission's ``meta.json``: the one place that reads them.

:func:`hardware` is the one-line description (``meta.json``'s ``hardware``) for every writer of
it (the baseline runner and :func:`searchtome.submissions.make_meta`), so two submissions made on
the same machine say the same thing. :func:`cpu_facts` is the machine-readable record the runner
adds under ``run_info``: the CPU model and the instruction-set features that change a neural
baseline's numbers. bfloat16 kernels round differently on CPUs with native bf16 (AVX512-BF16,
AMX) than on those without, so two machines can train apart from the same seed.
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


# The flags (as /proc/cpuinfo spells them) whose presence changes which kernels torch runs.
ISA_FLAGS: tuple[str, ...] = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is none: not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            line = next((x for x in fh if x.startswith(("flags", "Features"))), "")
    except OSError:
        return frozenset()
    return frozenset(line.split(":", 1)[1].split()) if ":" in line else frozenset()


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX); Linux only."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def cpu_facts() -> dict[str, object]:
    """``{"cpu": model, "isa": {flag: present}, "cores": usable cores}`` for ``run_info``."""
    flags = cpu_flags()
    return {
        "cpu": _cpu_name(),
        "isa": {flag: flag in flags for flag in ISA_FLAGS},
        "isa_known": bool(flags),  # False: no /proc/cpuinfo, so the flags are unknown
        "cores": _cores(),
    }


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
