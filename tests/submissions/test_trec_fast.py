"""The vectorised TREC reader reads exactly what the line parser reads, or hands the file over.

Each file below is parsed twice, by ``parse_trec`` as it is (fast path first) and with the
fast path switched off; the runs, first lines, tags and problems must be identical. Files the
fast path must refuse (so the line parser reports their problems) are listed as such.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from searchtome.submissions import trec, trec_fast
from searchtome.submissions.lines import DEFAULT_LIMITS, Limits

GOOD = "q1 Q0 a/1 1 3.5 run\nq1 Q0 a/2 2 2.5 run\nq2 Q0 b/1 1 9 run\n"
TAKEN = {
    "plain": GOOD,
    "no final newline": GOOD.rstrip("\n"),
    "crlf": GOOD.replace("\n", "\r\n"),
    "bom": "\ufeff" + GOOD,
    "unsorted, ties, rank disagrees": (
        "q2 Q0 z 1 1.0 t\nq1 Q0 a/2 5 1.0 t\nq1 Q0 a/10 2 1.0 t\nq2 Q0 y 2 2.0 t\n"
        "q1 Q0 a/1 1 0.5 t\nq3 Q0 a/1 1 -0 t\nq1 Q0 é 9 1.0 t\n"
    ),
    "several tags": "q1 Q0 a 1 1 x\nq1 Q0 b 2 0.5 y\nq2 Q0 a 1 1 x\n",
    "numbers both read alike": "q1 Q0 a 0001 1e3 t\nq1 Q0 b -2 .5 t\nq1 Q0 c 3 +7. t\n",
    "non-ascii ids": "q1 Q0 книга/1 1 1 t\nq1 Q0 本/2 2 0.5 t\n",
}
REFUSED = {
    "blank line": GOOD.replace("\n", "\n\n", 1),
    "tab": GOOD.replace(" ", "\t", 2),
    "two spaces": GOOD.replace(" ", "  ", 1),
    "trailing space": GOOD.replace("\n", " \n", 1),
    "five fields": "q1 Q0 a 1 1.0\n",
    "seven fields": "q1 Q0 a 1 1.0 t extra\n",
    "duplicate id, other score": "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 0.9 t\nq1 Q0 a 3 0.5 t\n",
    "rank not an int": "q1 Q0 a one 1.0 t\n",
    "rank python reads": "q1 Q0 a +1 1.0 t\nq1 Q0 b 1_0 2 t\n",
    "score not a number": "q1 Q0 a 1 high t\n",
    "score python reads": "q1 Q0 a 1 1_0 t\n",
    "nan": "q1 Q0 a 1 nan t\n",
    "infinity": "q1 Q0 a 1 1e999 t\n",
    "lone carriage return": "q1 Q0 a 1 1 t\rq2 Q0 a 1 1 t\n",
    "no-break space": "q1 Q0 a\u00a0b 1 1 t\n",
    "quote": 'q1 Q0 "a b" 1 1 t\n',
    "empty": "",
}


@pytest.fixture(autouse=True)
def every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These files are tiny: let the fast path take them anyway."""
    monkeypatch.setattr(trec_fast, "MIN_BYTES", 0)


def test_small_files_go_to_the_line_parser(tmp_path, monkeypatch) -> None:
    path = tmp_path / "run.trec"
    path.write_text(GOOD)
    monkeypatch.setattr(trec_fast, "MIN_BYTES", len(GOOD) + 1)
    assert trec_fast.read_fast(path, DEFAULT_LIMITS) is None
    monkeypatch.setattr(trec_fast, "MIN_BYTES", len(GOOD))
    assert trec_fast.read_fast(path, DEFAULT_LIMITS) is not None


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, limits: Limits = DEFAULT_LIMITS):
    fast = trec.parse_trec(path, None, limits)
    with monkeypatch.context() as m:
        m.setattr(trec, "read_fast", lambda path, limits: None)
        slow = trec.parse_trec(path, None, limits)
    return fast, slow


def _same(fast, slow) -> None:
    assert fast.run.name == slow.run.name
    assert list(fast.run.rankings.items()) == list(slow.run.rankings.items())
    assert list(fast.run.scores.items()) == list(slow.run.scores.items())
    assert fast.line_of == slow.line_of and fast.tags == slow.tags
    assert fast.problems == slow.problems


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_fast_path_reads_what_the_line_parser_reads(name, tmp_path, monkeypatch) -> None:
    path = tmp_path / "run.trec"
    path.write_bytes(TAKEN[name].encode())
    assert trec_fast.read_fast(path, DEFAULT_LIMITS) is not None
    _same(*_both(path, monkeypatch))
    gz = tmp_path / "run.trec.gz"
    gz.write_bytes(gzip.compress(TAKEN[name].encode()))
    assert trec_fast.read_fast(gz, DEFAULT_LIMITS) is not None
    _same(*_both(gz, monkeypatch))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_fast_path_hands_odd_files_to_the_line_parser(name, tmp_path, monkeypatch) -> None:
    path = tmp_path / "run.trec"
    path.write_bytes(REFUSED[name].encode())
    assert trec_fast.read_fast(path, DEFAULT_LIMITS) is None
    _same(*_both(path, monkeypatch))


def test_fast_path_respects_every_cap(tmp_path, monkeypatch) -> None:
    path = tmp_path / "run.trec"
    long_id = "x" * 300
    path.write_text(GOOD + f"q9 Q0 {long_id} 1 1 t\n" + GOOD.replace("q", "p"))
    for limits in (
        Limits(max_line_bytes=200),  # one overlong line among short ones
        Limits(max_file_bytes=100),
        Limits(max_decompressed_bytes=100),
    ):
        assert trec_fast.read_fast(path, limits) is None
        fast, slow = _both(path, monkeypatch, limits)
        assert fast.problems == slow.problems and fast.problems[0].severity == "error"
    assert trec_fast.read_fast(path, Limits(max_line_bytes=400)) is not None
    gz = tmp_path / "bad.trec.gz"
    gz.write_bytes(gzip.compress(GOOD.encode())[:-12])  # truncated stream
    assert trec_fast.read_fast(gz, DEFAULT_LIMITS) is None


@pytest.mark.parametrize("chunk", [3, 5, 1 << 22])
def test_the_scan_works_across_chunks(chunk, tmp_path, monkeypatch) -> None:
    """Reading in small chunks (lines and UTF-8 characters cut in two) changes nothing."""
    monkeypatch.setattr(trec_fast, "_SCAN_BYTES", chunk)
    for text in (*TAKEN.values(), REFUSED["no-break space"], REFUSED["tab"]):
        path = tmp_path / "run.trec"
        path.write_bytes(text.encode())
        _same(*_both(path, monkeypatch))
    path.write_text("q1 Q0 a 1 1 t\nq1 Q0 bbbbbbbbbbbbbbbbbbbb 2 0.5 t\nq2 Q0 a 1 1 t\n")
    assert trec_fast.read_fast(path, Limits(max_line_bytes=35)) is not None
    assert trec_fast.read_fast(path, Limits(max_line_bytes=34)) is None


@pytest.mark.parametrize("chunk", [1 << 14, 1 << 22])
@pytest.mark.parametrize("where", ["start", "middle", "end", "across chunks"])
def test_the_line_cap_holds_with_windows(chunk, where, tmp_path, monkeypatch) -> None:
    """A cap of 8,192 bytes or more is checked one newline per half-cap window, falling back
    to every newline where a window has none: a line of exactly the cap is read, one byte
    more is refused, wherever it sits."""
    monkeypatch.setattr(trec_fast, "_SCAN_BYTES", chunk)
    short = "".join(f"q1 Q0 d{i} {i + 1} {1 / (i + 1):.6f} t\n" for i in range(3000))
    cap = 9000
    for size, read in ((cap, True), (cap + 1, False)):
        line = "q2 Q0 " + "x" * (size - len("q2 Q0  1 1 t\n")) + " 1 1 t\n"
        assert len(line.encode()) == size
        # at a line start: the first, one near the middle, after the last, or one such that
        # the long line straddles the first chunk boundary
        at = {"start": 0, "middle": len(short) // 2, "end": len(short)}.get(where, chunk - cap // 2)
        cut = short.rfind("\n", 0, at) + 1 if at else 0
        text = short[:cut] + line + short[cut:].replace("q1", "q3")
        path = tmp_path / "run.trec"
        path.write_text(text)
        assert (trec_fast.read_fast(path, Limits(max_line_bytes=cap)) is not None) is read
