"""A PDF's pages read for ToC inference, in this process or in a pool of processes.

Inference needs, for every page, its styled lines (:mod:`searchtome.ingest.styled`), its blocks
(where page furniture is found) and the section-text blocks that extraction uses afterwards
(:func:`searchtome.ingest.layout.remember_pages`): one MuPDF text page per page, which is most
of the cost of inferring a ToC. Pages are independent of each other, so a long book is read by
several processes: this one reads the first share of the pages while each worker opens the file
itself (a MuPDF document cannot be handed to another process; PyMuPDF's documentation splits
large files the same way) and reads runs of consecutive pages from the rest; the runs come back
in page order and are joined, so everything after this sees exactly what reading in one process
gives.

How many processes: ``SEARCHTOME_THREADS``, else the CPUs this process may use
(:func:`searchtome.threads.decide`); ``SEARCHTOME_THREADS=1`` reads in this process only. A
book of fewer than :data:`MIN_POOL_PAGES` pages, or a document that is not a file of its own
(opened from memory) or that needed a password, is read in this process too.

Workers are forked: a fresh interpreter (``spawn``, ``forkserver``) costs about 0.1 s of CPU
each in imports, and it runs the main module again, which a script or ``python -m searchtome``
does not guard against. Forking copies only the calling thread, so a lock another thread holds
would stay held in the child: the pool is used only when no other thread runs but tqdm's
monitor (which the workers never touch), and where the platform has no fork the pages are read
here.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from searchtome.ingest.layout import Block, Page, page_from_textpage, text_flags
from searchtome.ingest.styled import Line, block_lines
from searchtome.settings import progress
from searchtome.threads import decide

if TYPE_CHECKING:
    import pymupdf

# Below this many pages starting the workers costs about what they save (benchmarks/extract.py:
# rfc1035, 55 pages, reads in 0.06 s of CPU in one process).
MIN_POOL_PAGES = 80
# Runs of pages per worker: more than one, so a worker that got easy pages takes another run.
RUNS_PER_WORKER = 4


@dataclass
class Layout:
    """What reading some pages gives, in page order."""

    lines: list[Line]
    pages: list[Page]  # blocks aligned with the dict blocks, empty ones included
    text_pages: list[Page] | None  # extraction's blocks; None once a page's could not be made

    def extend(self, other: Layout) -> None:
        self.lines.extend(other.lines)
        self.pages.extend(other.pages)
        if self.text_pages is not None:
            self.text_pages = (
                None if other.text_pages is None else [*self.text_pages, *other.text_pages]
            )


def read_range(
    doc: pymupdf.Document, start: int, stop: int, done: Callable[[int], object] | None = None
) -> Layout:
    """Pages ``start`` to ``stop - 1`` (0-based) of ``doc``; ``done(1)`` after each page."""
    # The same flags as the section text (TEXTFLAGS_DICT less images is TEXTFLAGS_TEXT), so each
    # page's text page also gives extract's blocks: the PDF is read once.
    flags = text_flags()
    out = Layout([], [], [])
    lines = out.lines
    for number in range(start + 1, stop + 1):
        page = doc[number - 1]
        rect = page.rect  # computed by MuPDF at each access
        fpage = Page(number, rect.width, rect.height)
        textpage = page.get_textpage(flags=flags)
        out.text_pages = _with_blocks(out.text_pages, textpage, page)
        blocks = fpage.blocks
        for bi, block in enumerate(textpage.extractDICT()["blocks"]):
            texts = block_lines(block, number, bi, lines)
            bx0, by0, bx1, by1 = block["bbox"]
            # Keep block indices aligned with the dict blocks, empty ones included.
            blocks.append(Block(bx0, by0, bx1, by1, texts or [""], text="\n".join(texts)))
        out.pages.append(fpage)
        if done is not None:
            done(1)
    return out


def _with_blocks(
    pages: list[Page] | None, textpage: pymupdf.TextPage, page: pymupdf.Page
) -> list[Page] | None:
    """``pages`` plus this page's section-text blocks; None once one failed, so that
    read_pages reads the file itself and reports the page's error as it always has."""
    if pages is None:
        return None
    try:
        pages.append(page_from_textpage(textpage, page))
    except RuntimeError:
        return None
    return pages


def pool_size(doc: pymupdf.Document) -> int:
    """How many processes read ``doc`` (1: this one alone; see the module docstring)."""
    if doc.page_count < MIN_POOL_PAGES or not doc.name or doc.needs_pass or not _can_fork():
        return 1
    return min(decide().count, max(1, doc.page_count * 2 // MIN_POOL_PAGES))


def _can_fork() -> bool:
    """Whether forking is safe here: the platform has it and no other thread could hold a lock
    the child needs (tqdm's monitor only sleeps and adjusts bars, which workers do not use)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    return all(t.name == "tqdm_monitor" and t.daemon for t in others)


def read_layout(doc: pymupdf.Document) -> Layout:
    """Every page of ``doc``, by :func:`pool_size` processes; the same result either way."""
    n = doc.page_count
    workers = pool_size(doc)
    with progress(total=n, desc="reading layout", unit="p") as bar:
        if workers == 1:
            return read_range(doc, 0, n, bar.update)
        return _read_in_pool(doc, workers, bar.update)


def page_runs(n_pages: int, runs: int) -> list[tuple[int, int]]:
    """``runs`` consecutive (start, stop) ranges covering ``n_pages`` pages, sizes within one."""
    runs = max(1, min(runs, n_pages))
    size, extra = divmod(n_pages, runs)
    out, start = [], 0
    for i in range(runs):
        stop = start + size + (i < extra)
        out.append((start, stop))
        start = stop
    return out


def _read_in_pool(doc: pymupdf.Document, processes: int, done: Callable[[int], object]) -> Layout:
    """``doc`` read by ``processes`` processes: this one reads the first share of the pages
    while ``processes - 1`` forked workers read the rest in runs, which come back in order.

    This process takes a share rather than waiting, so two processes cost one fork and half
    a book's results to send back, not two forks and the whole book.
    """
    from concurrent.futures import ProcessPoolExecutor

    n_pages = doc.page_count
    own = n_pages // processes
    pool = ProcessPoolExecutor(
        processes - 1,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_open_in_worker,
        initargs=(doc.name, n_pages),
    )
    try:
        runs = [
            (own + a, own + b)
            for a, b in page_runs(n_pages - own, (processes - 1) * RUNS_PER_WORKER)
        ]
        futures = [pool.submit(_read_worker_range, a, b) for a, b in runs]
        out = read_range(doc, 0, own, done)
        for (a, b), future in zip(runs, futures, strict=True):
            out.extend(future.result())
            done(b - a)
        return out
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# The worker's own opening of the file: once per worker, not once per run of pages, so MuPDF's
# caches (fonts, resources) are filled once.
_WORKER_DOC: list[pymupdf.Document] = []


def _open_in_worker(path: str, n_pages: int) -> None:
    """A worker's start: interrupts are the parent's to handle (no traceback for Ctrl-C, not
    the console script's SIGTERM handler inherited through fork); the file opened once."""
    import gc
    import signal

    import pymupdf

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    gc.disable()  # as in the parent (searchtome.io.collector_paused): no cycles are made here
    doc = pymupdf.open(path, filetype="pdf")
    if doc.page_count != n_pages:  # the file changed since the parent opened it
        raise RuntimeError(f"{path}: {doc.page_count} pages, not {n_pages}; was it replaced?")
    _WORKER_DOC[:] = [doc]


def _read_worker_range(start: int, stop: int) -> Layout:
    """One run of pages, read from the worker's document."""
    return read_range(_WORKER_DOC[0], start, stop)
