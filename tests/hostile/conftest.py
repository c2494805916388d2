"""Shared pieces of the build-side hostile-input suite: a small book, a real fake server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.fake_openai import FakeOpenAIServer
from tests.generate.test_build import make_pdf


@pytest.fixture
def book_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "pdfs"
    make_pdf(folder / "field-notes.pdf", chapters=1, sections=2, paragraphs=2, seed=3)
    return folder


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def build_args(book_dir: Path, url: str, out: Path, cache: Path, *extra: str) -> list[str]:
    return [
        "--no-progress",
        "build",
        "--pdf-dir",
        str(book_dir),
        "--endpoint",
        url,
        "--unit-min-chars",
        "100",
        "--max-attempts",
        "2",
        "--cache",
        str(cache),
        "--out",
        str(out),
        *extra,
    ]
