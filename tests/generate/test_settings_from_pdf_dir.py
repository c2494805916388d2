"""``build --settings-from`` of a dataset built with ``--pdf-dir``: one line saying what to pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.cli import main


def _pdf_dir_dataset(folder: Path) -> Path:
    """A manifest as `build --pdf-dir` records it (the fields --settings-from reads)."""
    folder.mkdir()
    manifest = {
        "name": "searchtome-pdfs",
        "collection": {"kind": "pdf-dir", "files": {"b.pdf": "ab" * 32, "a.pdf": "cd" * 32}},
        "generation": {"model": "m", "prompt_version": "questions-v1", "sampling": {}},
        "split": {"seed": 1},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_a_pdf_dir_dataset_asks_for_its_pdfs_and_downloads_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import searchtome.ingest.fetch as fetch

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("the catalog's books must not be fetched")

    monkeypatch.setattr(fetch, "fetch_books", no_download)
    data = _pdf_dir_dataset(tmp_path / "data")
    argv = ["--no-progress", "build", "--settings-from", str(data), "--out", str(tmp_path / "o")]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err == (
        f"searchtome: error: {data / 'manifest.json'}: was built from local PDFs (a.pdf, b.pdf); "
        f"rebuild it with --settings-from {data} --pdf-dir FOLDER, FOLDER holding those files "
        "(their SHA-256 are in the manifest's collection.files)"
    )
    assert not (tmp_path / "o").exists()
