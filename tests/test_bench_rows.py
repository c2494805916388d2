"""benchmarks/bench_rows.py: a benchmark table keeps its finished rows when a row raises."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_rows.py"


@pytest.fixture(scope="module")
def bench_rows():
    spec = importlib.util.spec_from_file_location("bench_rows", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_rows"] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_rows", None)


class PeerTimeout(Exception):
    """Stands for the peer client's own error (openai's APITimeoutError in the real run)."""


def test_a_row_that_raises_is_marked_failed_and_the_others_still_run(bench_rows, capsys):
    Row = bench_rows.Row
    emitted: list[str] = []

    def two_rows():
        yield Row("first", 1.0, {"peer": 2.0})
        yield Row("second", 3.0, {"peer": "not installed (x)"})

    def half_then_raise():
        yield Row("kept", 1.5, {"peer": 0.5})
        raise PeerTimeout("Request timed out.\n  after 600 s | retry")

    def after():
        yield Row("last", 2.0, {"peer": 4.0})

    makers = {"ok": two_rows, "client": half_then_raise, "tail": after}
    rows = bench_rows.run_rows(makers, lambda row: emitted.append(row.what))
    assert [r.what for r in rows] == ["first", "second", "kept", "client", "last"]
    assert emitted == ["first", "second", "kept", "client", "last"]  # as each finished
    failed = rows[3]
    assert failed.failed == "PeerTimeout: Request timed out. after 600 s | retry"
    assert math.isnan(failed.ours) and not any(r.failed for r in rows if r is not failed)
    assert bench_rows.markdown(failed) == [
        "| client | | **failed**: PeerTimeout: Request timed out. after 600 s \\| retry | | | |"
    ]
    assert bench_rows.markdown(rows[0]) == ["| first | 1 | peer | 2 | **0.5** |  |"]
    assert "Traceback" in capsys.readouterr().err


def test_a_reason_is_one_short_line(bench_rows):
    assert bench_rows.reason(TimeoutError()) == "TimeoutError"
    long = bench_rows.reason(ValueError("x" * 1000))
    assert len(long) == bench_rows.REASON_CHARS and long.endswith("…") and "\n" not in long


def test_ctrl_c_still_stops_the_run(bench_rows):
    def interrupted():
        raise KeyboardInterrupt
        yield  # a generator, like the real rows

    with pytest.raises(KeyboardInterrupt):
        bench_rows.run_rows({"x": interrupted}, lambda row: None)
