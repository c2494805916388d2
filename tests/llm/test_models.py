"""The SmolLM2 conversion runs once even when several processes ask for the model at once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from searchtome.io import exclusive
from searchtome.llm import models


def test_a_second_caller_waits_for_the_first_conversion(tmp_path, monkeypatch) -> None:
    """Without the lock the second caller finds no folder yet and converts again; with it, it
    waits and returns the folder the first one made."""
    # A home of its own: the suite's shared models folder must never see this stand-in.
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path / "home"))
    calls: list[Path] = []
    converting = threading.Event()

    def slow_convert(target: Path) -> None:
        calls.append(target)
        converting.set()
        time.sleep(0.5)  # the second caller asks while this one is still writing
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        (target / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(models, "_convert_smollm2", slow_convert)
    results: list[Path] = []
    first = threading.Thread(target=lambda: results.append(models.smollm2_path()))
    first.start()
    assert converting.wait(30)
    results.append(models.smollm2_path())
    first.join(30)
    assert len(calls) == 1
    assert results[0] == results[1] == calls[0]
    assert (calls[0] / "config.json").is_file()


def test_exclusive_holds_other_processes_off(tmp_path) -> None:
    lock, log = tmp_path / "x.lock", tmp_path / "log"
    holder = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from searchtome.io import exclusive\n"
        "with exclusive(sys.argv[1]):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(0.5)\n"
        "    Path(sys.argv[2]).write_text('holder done\\n')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder, str(lock), str(log)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        with exclusive(lock):
            # Only reached once the holder has let go, so its line is already there.
            assert log.read_text() == "holder done\n"
    finally:
        assert proc.wait(timeout=60) == 0


@pytest.mark.parametrize("name", ["x.lock", "deeper/x.lock"])
def test_exclusive_creates_the_lock_file(tmp_path, name) -> None:
    with exclusive(tmp_path / name):
        assert (tmp_path / name).is_file()


def test_the_gguf_file_is_parsed_once_while_converting() -> None:
    """Inside the conversion one GGUF parse and one tensor-name map serve every caller; outside
    it, gguf's own functions are back."""
    gguf = pytest.importorskip("gguf")
    real_reader, real_map = gguf.GGUFReader, gguf.get_tensor_name_map
    path = models.smollm2_gguf()
    arch = next(iter(gguf.MODEL_ARCH_NAMES))
    with models._gguf_parsed_once():
        assert gguf.GGUFReader(path) is gguf.GGUFReader(path)
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert gguf.GGUFReader is real_reader and gguf.get_tensor_name_map is real_map
