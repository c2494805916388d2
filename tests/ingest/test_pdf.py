"""Opening PDFs: every unusable file is one clear line naming it, via the API and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.errors import SearchTomeError
from searchtome.ingest.pdf import open_pdf, opened
from searchtome.sample.render import encrypt, render_book, sample_spec


@pytest.fixture(scope="module")
def book_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pdf") / "book.pdf"
    render_book(sample_spec(chapters=2), path)
    return path


def _bad_files(root: Path, good: Path) -> dict[str, tuple[Path, str]]:
    data = good.read_bytes()
    cases = {
        "missing": (root / "nope.pdf", "file not found"),
        "folder": (root, "is a folder"),
        "empty": (root / "empty.pdf", "empty file"),
        "text": (root / "notes.pdf", "not a PDF"),
        "html": (root / "page.pdf", "HTML page"),
        "truncated": (root / "half.pdf", "damaged"),
        "garbage": (root / "garbage.pdf", "damaged or truncated"),
    }
    (root / "empty.pdf").write_bytes(b"")
    (root / "notes.pdf").write_text("just some notes\n" * 20)
    (root / "page.pdf").write_text("<!DOCTYPE html><html><body>404</body></html>")
    (root / "half.pdf").write_bytes(data[: len(data) // 2])
    (root / "garbage.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 8)
    return cases


@pytest.mark.parametrize(
    "case", ["missing", "folder", "empty", "text", "html", "truncated", "garbage"]
)
def test_unusable_files_raise_one_line_errors(tmp_path: Path, book_pdf: Path, case: str) -> None:
    from searchtome.ingest.toc import read_toc

    root = tmp_path / "in"
    root.mkdir()
    path, expected = _bad_files(root, book_pdf)[case]
    with pytest.raises(SearchTomeError) as info:
        read_toc(path)  # MuPDF opens a half file by repairing it; it has lost its outline
    message = str(info.value)
    assert expected in message
    assert str(path) in message
    assert "\n" not in message


@pytest.mark.parametrize("command", ["toc", "extract"])
@pytest.mark.parametrize("case", ["missing", "text", "truncated"])
def test_cli_reports_bad_input_without_traceback(
    tmp_path: Path, book_pdf: Path, capsys: pytest.CaptureFixture[str], command: str, case: str
) -> None:
    root = tmp_path / "in"
    root.mkdir()
    path, expected = _bad_files(root, book_pdf)[case]
    out = tmp_path / "out"
    argv = [command, str(path)] + (["--out", str(out)] if command == "extract" else [])
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("searchtome: error: ") and expected in err[0]
    assert not out.exists()  # nothing half-written


def test_user_password(tmp_path: Path, book_pdf: Path) -> None:
    locked = encrypt(book_pdf, tmp_path / "locked.pdf", user_password="s3cret")
    with pytest.raises(SearchTomeError, match="--password"):
        open_pdf(locked)
    with pytest.raises(SearchTomeError, match="password given does not open it"):
        open_pdf(locked, password="wrong")
    with opened(locked, password="s3cret") as doc:
        assert doc.page_count > 1
        assert doc[0].get_text()


def test_owner_only_encryption_opens_normally(tmp_path: Path, book_pdf: Path) -> None:
    restricted = encrypt(book_pdf, tmp_path / "restricted.pdf")
    with opened(restricted) as doc:
        assert doc.metadata["encryption"]  # really encrypted...
        assert doc[0].get_text()  # ...and readable without a password


def test_cli_password_option(
    tmp_path: Path, book_pdf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = encrypt(book_pdf, tmp_path / "locked.pdf", user_password="s3cret")
    assert main(["toc", str(locked)]) == 1
    assert "give it with --password" in capsys.readouterr().err
    assert main(["toc", str(locked), "--password", "s3cret", "--json"]) == 0
    assert '"source": "outline"' in capsys.readouterr().out
