"""ToC inference reads pages in a process pool with the same result as in one process: the
extraction files of the real PDFs without an outline and of the sample books (ToC inferred, the
outline ignored) byte for byte, and what the pages of the other real PDFs read as."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from types import SimpleNamespace

import pymupdf
import pytest

from searchtome.ingest import reading
from searchtome.ingest.extract import extract_book, write_extraction
from searchtome.sample.books import render_sample

REAL_PDFS = Path(__file__).resolve().parents[3] / "shared" / "realpdfs"
REAL = sorted(REAL_PDFS.glob("*.pdf")) if REAL_PDFS.is_dir() else []
NO_OUTLINE = [p for p in REAL if "NO_OUTLINE" in p.name]
# The outlined ones up to 400 pages (six of ten; the four manuals of 474-916 pages take about
# 15 s of CPU more and read the same way, docs/ingestion.md).
OUTLINED = [p for p in REAL if p not in NO_OUTLINE and pymupdf.Document(p).page_count <= 400]


@pytest.fixture(autouse=True)
def _threads_of_this_test(monkeypatch):
    """The fork-safety check sees the threads this test starts, not those an earlier test in the
    same worker process left behind (a fresh `searchtome extract` process has none)."""
    before = set(threading.enumerate()) - {threading.current_thread()}
    view = SimpleNamespace(
        enumerate=lambda: [t for t in threading.enumerate() if t not in before],
        current_thread=threading.current_thread,
    )
    monkeypatch.setattr(reading, "threading", view)


@pytest.fixture(scope="module")
def sample_pdfs(tmp_path_factory) -> list[Path]:
    return sorted(render_sample(tmp_path_factory.mktemp("samples")).values())


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _both_ways(pdf: Path, tmp_path: Path, monkeypatch) -> tuple[dict, dict, list[int]]:
    """The extraction files read in one process and in the pool, and the pool sizes used."""
    pools: list[int] = []
    real_pool = reading._read_in_pool

    def spy(doc, processes, done):
        pools.append(processes)
        return real_pool(doc, processes, done)

    monkeypatch.setattr(reading, "_read_in_pool", spy)
    monkeypatch.setenv("SEARCHTOME_THREADS", "1")
    write_extraction(extract_book(pdf, infer_toc="always"), tmp_path / "serial")
    assert pools == []
    monkeypatch.setenv("SEARCHTOME_THREADS", "2")
    write_extraction(extract_book(pdf, infer_toc="always"), tmp_path / "pool")
    return _files(tmp_path / "serial"), _files(tmp_path / "pool"), pools


@pytest.mark.skipif(not REAL, reason="../shared/realpdfs is not available")
@pytest.mark.parametrize("pdf", NO_OUTLINE, ids=lambda p: p.name)
def test_a_real_pdf_extracts_the_same_in_a_pool(pdf, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(reading, "MIN_POOL_PAGES", 20)  # rfc1035's 55 pages in a pool too
    serial, pool, pools = _both_ways(pdf, tmp_path, monkeypatch)
    assert pools == [2]
    assert pool == serial


@pytest.mark.skipif(not REAL, reason="../shared/realpdfs is not available")
@pytest.mark.parametrize("pdf", OUTLINED, ids=lambda p: p.name)
def test_every_page_of_a_real_pdf_reads_the_same_in_a_pool(pdf, monkeypatch) -> None:
    """Lines, styles, blocks and section-text blocks: all that inference and extraction use."""
    monkeypatch.setattr(reading, "MIN_POOL_PAGES", 20)
    monkeypatch.setenv("SEARCHTOME_THREADS", "2")
    with pymupdf.open(pdf) as doc:
        assert reading.pool_size(doc) == 2
        pooled = reading.read_layout(doc)
        alone = reading.read_range(doc, 0, doc.page_count)
    assert pooled.text_pages is not None and pooled.pages[-1].number == len(pooled.pages)
    assert pooled == alone


def test_a_sample_book_reads_the_same_in_a_pool(sample_pdfs, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(reading, "MIN_POOL_PAGES", 1)
    monkeypatch.setattr(reading, "RUNS_PER_WORKER", 3)  # runs of 1-2 pages: every join is used
    for pdf in sample_pdfs:
        serial, pool, pools = _both_ways(pdf, tmp_path / pdf.stem, monkeypatch)
        assert pools == [2]
        assert pool == serial, pdf.name


def test_page_runs_cover_every_page_once_in_order() -> None:
    for n_pages, runs in ((396, 8), (10, 3), (3, 8), (1, 1)):
        got = reading.page_runs(n_pages, runs)
        assert got[0][0] == 0 and got[-1][1] == n_pages
        assert all(a[1] == b[0] for a, b in itertools.pairwise(got))
        sizes = [b - a for a, b in got]
        assert len(got) == min(runs, n_pages) and max(sizes) - min(sizes) <= 1


def _doc(pages: int) -> pymupdf.Document:
    doc = pymupdf.open()
    for _ in range(pages):
        doc.new_page().insert_text((72, 72), "text")
    return doc


def test_when_pages_are_read_in_one_process(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SEARCHTOME_THREADS", "2")
    short, long = tmp_path / "short.pdf", tmp_path / "long.pdf"
    _doc(reading.MIN_POOL_PAGES - 1).save(short)
    _doc(reading.MIN_POOL_PAGES).save(long)
    with pymupdf.open(long) as doc:
        assert reading.pool_size(doc) == 2
        monkeypatch.setenv("SEARCHTOME_THREADS", "1")  # the switch that turns the pool off
        assert reading.pool_size(doc) == 1
        monkeypatch.setenv("SEARCHTOME_THREADS", "2")
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
        try:  # forking now could copy a lock that thread holds
            assert reading.pool_size(doc) == 1
        finally:
            stop.set()
            other.join()
        assert reading.pool_size(doc) == 2
    with pymupdf.open(short) as doc:
        assert reading.pool_size(doc) == 1
    with pymupdf.open(stream=long.read_bytes(), filetype="pdf") as doc:
        assert reading.pool_size(doc) == 1  # no file for the workers to open
    locked = tmp_path / "locked.pdf"
    _doc(reading.MIN_POOL_PAGES).save(
        locked, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o"
    )
    with pymupdf.open(locked) as doc:
        assert doc.authenticate("u")
        assert reading.pool_size(doc) == 1  # the workers do not have the password
