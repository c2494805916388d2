"""The dataset revision hashes the data files: a card edit leaves it, a data edit moves it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from searchtome.baselines.runner import dataset_facts

from searchtome.dataset.card import write_card
from searchtome.dataset.layout import CARD_FILE, CORPUS_FILE
from searchtome.dataset.loader import load
from searchtome.dataset.manifest import MANIFEST_FILE, verify_manifest, write_manifest
from searchtome.dataset.revision import data_sha256, dataset_revision
from searchtome.io import sha256_file
from searchtome.mteb import task_metadata

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT.parent / "shared" / "peer" / "whole-child"


@pytest.fixture
def data(tiny_dataset: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(tiny_dataset, copy)
    write_card(copy)
    return copy


def pins(data: Path) -> tuple[str, str]:
    """What a run and an MTEB result of a local dataset pin."""
    ds = load(data)
    return dataset_facts(ds)["revision"], task_metadata(ds).dataset["revision"]


def test_a_card_edit_leaves_the_revision(data: Path) -> None:
    before, manifest_before = pins(data), sha256_file(data / MANIFEST_FILE)
    card = data / CARD_FILE
    card.write_text(card.read_text() + "\nA sentence a maintainer added.\n")
    write_card(data)  # merges the edit, rewrites the manifest's hashes
    assert not verify_manifest(data)
    assert sha256_file(data / MANIFEST_FILE) != manifest_before  # the old pin would have moved
    assert pins(data) == before
    revision = dataset_revision(data)
    assert before[0].endswith(f" (data sha256:{revision[:16]})")
    assert before[1] == revision[:40]


def test_a_data_file_edit_moves_the_revision(data: Path) -> None:
    before = pins(data)
    table = pq.read_table(data / CORPUS_FILE)
    texts = table.column("text").to_pylist()
    texts[0] += " (edited)"
    pq.write_table(
        table.set_column(table.schema.get_field_index("text"), "text", [texts]), data / CORPUS_FILE
    )
    write_manifest(data, load(data).manifest)
    after = pins(data)
    assert after[0] != before[0] and after[1] != before[1]


def test_without_a_manifest_the_files_themselves_are_hashed(data: Path) -> None:
    recorded = dataset_revision(data)
    (data / MANIFEST_FILE).unlink()
    assert dataset_revision(data) == recorded
    (data / CARD_FILE).write_text("another card\n")
    assert dataset_revision(data) == recorded


def test_the_listing_leaves_out_only_the_top_level_card_and_manifest() -> None:
    from searchtome.dataset.manifest import FileHash

    files = {"corpus.parquet": FileHash("a" * 64, 1), "sub/README.md": FileHash("b" * 64, 1)}
    with_card = {**files, "README.md": FileHash("c" * 64, 1)}
    assert data_sha256(with_card) == data_sha256(files)
    assert data_sha256(files) != data_sha256({"corpus.parquet": files["corpus.parquet"]})


@pytest.mark.skipif(not PEER.is_dir(), reason="needs ../shared/peer/whole-child")
def test_the_committed_pins_are_the_whole_child_imports_revision(tmp_path: Path) -> None:
    """Every committed run and MTEB result pins what a fresh import of the release gives."""
    import json

    from searchtome.cli import main
    from searchtome.leaderboard.runlist import read_run_list

    assert main(["--no-progress", "import", "repro", str(PEER), "--out", str(tmp_path / "wc")]) == 0
    run_pin, mteb_pin = pins(tmp_path / "wc")
    listed = read_run_list(ROOT / "leaderboard" / "whole-child" / "runs.txt")  # the project's
    metas = [ROOT / "submissions" / name / "meta.json" for name in listed]
    assert metas and all(json.loads(m.read_text())["dataset_revision"] == run_pin for m in metas)
    results = sorted((ROOT / "docs" / "mteb-upstream" / "results").glob("*/*/SearchTome*.json"))
    assert results and all(
        json.loads(r.read_text())["dataset_revision"] == mteb_pin for r in results
    )
