"""``manifest.json`` as a typed document: every shape written so far reads back and writes the
same bytes; older layouts are upgraded explicitly; a bad field is one line naming file and field."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from searchtome.dataset.loader import load
from searchtome.dataset.manifest import (
    FORMAT_VERSION,
    MANIFEST_VERSION,
    BlindInfo,
    BuildSplit,
    CatalogCollection,
    DatasetManifest,
    FileHash,
    Generation,
    PdfDirCollection,
    ReleaseGeneration,
    ReleaseSplit,
    read_manifest,
    write_manifest,
)
from searchtome.dataset.repro import import_repro
from searchtome.errors import SearchTomeError
from searchtome.io import dumps, read_json
from tests.conftest import PEER, make_tiny_dataset

FILES = {
    "README.md": {"bytes": 8335, "sha256": "9f" * 32},
    "books.parquet": {"bytes": 8412, "sha256": "8a" * 32},
}

# The demo's build (`searchtome demo --quick`), its file list cut to two entries.
BUILD: dict[str, Any] = {
    "build": {"fingerprint": "ec" * 32, "format": "searchtome-build-v1"},
    "collection": {
        "files": {"nursing-primer.pdf": "14" * 32},
        "kind": "pdf-dir",
        "metadata_sha256": None,
    },
    "extraction": {"infer_toc": False, "leaf_depth": {"deep-book": 2}},
    "files": FILES,
    "format": "searchtome-dataset-v1",
    "generation": {
        "counts": {
            "questions_generated": 227,
            "questions_kept": 57,
            "removed": {"duplicate": 63, "more than asked for": 104},
            "units": 57,
            "units_failed": 0,
            "units_too_short": 0,
        },
        "endpoint_kind": "local",
        "filters": {"copy_fraction": 0.8, "max_chars": 300, "require_question_mark": True},
        "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "note": "Questions were generated offline by SmolLM2-135M-Instruct.",
        "prompt_sha256": "02" * 32,
        "prompt_version": "questions-v1-fewshot",
        "questions_per_unit": "auto",
        "repair": True,
        "sampling": {"max_tokens": 48, "seed": 42, "temperature": 0.0},
        "seed": 42,
        "strictness": "lenient",
        "units": {"drop_below": 40, "min_chars": 150},
    },
    "name": "searchtome-sample-quick",
    "restrictions": {"law-notes": ["no-llm-training", "share-alike"]},
    "split": {
        "algorithm": "grouped-leaf-aware-v1",
        "leaf_coverage": {"dev": 6, "test": 21, "train": 21},
        "leaves_in_train": True,
        "leaves_missing_from_train": 0,
        "manifest": "splits.json",
        "questions": {"dev": 6, "test": 30, "train": 21},
        "ratios": {"dev": 0.12163009404388715, "test": 0.5473354231974922, "train": 0.33},
        "rule": "by-unit",
        "seed": 42,
        "units": {"dev": 6, "test": 30, "train": 21},
    },
    "versions": {"pyarrow": "26.0.1", "pymupdf": "2.0", "searchtome": "0.1.0"},
}

CATALOG = {
    "kind": "catalog",
    "catalog": "searchtome-v2",
    "catalog_version": 2,
    "catalog_sha256": "ab" * 32,
    "books": ["law-notes", "river-atlas"],
}

# The shape `import repro` writes, with the nulls a release that lacks a record gives.
RELEASE: dict[str, Any] = {
    "books": ["whole-child"],
    "description": "The Whole Child: converted to the SearchTome dataset layout.",
    "files": FILES,
    "format": "searchtome-dataset-v1",
    "generation": {
        "endpoint_kind": "not recorded in the release",
        "filters": {"paragraphs removed before unit building": {"url_only": 7}},
        "hand_written": 6,
        "model": ["a", "b"],
        "model_family": "Mixtral-8x7B-Instruct (AWQ quantized)",
        "model_revision": None,
        "prompt_version": "whole-child-questions-v1",
        "questions_generated": 3214,
        "seed": 42,
        "units": None,
    },
    "hand_written_queries": ["whole-child-149-g003-q01"],
    "id_map": "id_map.json",
    "leaf_text": "raw PDF text of each section as released (running headers/footers kept)",
    "name": "searchtome-whole-child-repro",
    "non_retrieval_leaves": [
        {"node_id": "whole-child/1", "source_id": "whole-child-001", "title": "Contents"}
    ],
    "searchtome_version": "0.1.0",
    "source": {
        "book_sha256": None,
        "files": {"SOURCE.md": "a3" * 32},
        "kind": "stair-rag-reproduction",
        "license": "CC BY-NC-SA 4.0",
        "repository": "https://github.com/NaveenGali11/stair-rag-reproduction",
        "verification": {"data/splits/whole-child/dev.jsonl": "verified"},
    },
    "split": {
        "constraints": None,
        "counts": {"dev": 392, "test": 1758, "train": 1064},
        "group_key": "source_unit_id",
        "leaf_coverage": {"dev": 66, "test": 86, "train": 129},
        "paper_reference_counts": None,
        "rule": "grouped by generation unit (grouped-leaf-aware-v1)",
        "seed": 42,
        "unit_counts": {"dev": 88, "test": 296, "train": 171},
    },
    "split_constraints": {"whole-child-149-g003-q01": "train_only"},
    "warnings": [],
}

PUBLIC = {
    "blind": {"format": "searchtome-blind-v1", "note": "held back", "split": "test"},
    "books": ["whole-child"],
    "description": "The Whole Child",
    "files": FILES,
    "format": "searchtome-dataset-v1",
    "name": "searchtome-whole-child-repro",
    "searchtome_version": "0.1.0",
}
PRIVATE = {"blind": "test", "files": FILES, "format": FORMAT_VERSION, "name": "x (private)"}
# benchmarks/contention.py's slices of a dataset: the source is the folder they were cut from.
SLICE = {"files": FILES, "format": FORMAT_VERSION, "name": "first-12-leaves", "source": "/tmp/wc"}

# An early build manifest (4b244dd, the first `searchtome build`): no ToC depths, prompt hash,
# questions per unit, unit sizes or counts yet; a key this version does not model.
EARLY_BUILD: dict[str, Any] = {
    "format": "searchtome-dataset-v1",
    "name": "tiny",
    "collection": CATALOG,
    "extraction": {"infer_toc": False},
    "generation": {
        "model": "m",
        "endpoint_kind": "openai-compatible",
        "prompt_version": "questions-v1",
        "sampling": {"temperature": 0.7},
        "filters": {},
        "future_key": {"kept": [1, 2]},
    },
    "split": {"rule": "by-unit", "seed": 42, "ratios": {"train": 0.5, "dev": 0.2, "test": 0.3}},
    "restrictions": {},
    "build": {"format": "searchtome-build-v1", "fingerprint": "f0" * 32},
    "files": {},
}


@pytest.mark.parametrize(
    "data",
    [BUILD, {**BUILD, "collection": CATALOG}, RELEASE, PUBLIC, PRIVATE, EARLY_BUILD, SLICE],
    ids=[
        "build",
        "catalog-build",
        "release",
        "blind-public",
        "blind-private",
        "early-build",
        "slice",
    ],
)
def test_every_shape_reads_back_and_writes_the_same_bytes(data: dict[str, Any]) -> None:
    before = copy.deepcopy(data)
    manifest = DatasetManifest.from_dict(data)
    assert manifest.version == MANIFEST_VERSION
    assert dumps(manifest.to_dict()) == dumps(data)
    assert data == before  # the reader does not touch what it was given
    # and the written form reads back as the same object
    assert DatasetManifest.from_dict(manifest.to_dict()) == manifest


def test_fields_are_typed_by_part() -> None:
    build = DatasetManifest.from_dict({**BUILD, "collection": CATALOG})
    assert isinstance(build.collection, CatalogCollection)
    assert build.collection.books == ("law-notes", "river-atlas")
    assert isinstance(build.generation, Generation) and isinstance(build.split, BuildSplit)
    assert build.generation.units is not None and build.generation.units.min_chars == 150
    assert build.generation.counts is not None and build.generation.counts.questions_kept == 57
    assert build.files["README.md"] == FileHash(sha256="9f" * 32, bytes=8335)
    assert build.restrictions == {"law-notes": ("no-llm-training", "share-alike")}
    assert build.build is not None and build.build.fingerprint == "ec" * 32
    assert build.blind_split is None and build.imported_from is None

    release = DatasetManifest.from_dict(RELEASE)
    assert isinstance(release.generation, ReleaseGeneration)
    assert isinstance(release.split, ReleaseSplit) and release.split.constraints is None
    assert release.generation.writer == "Mixtral-8x7B-Instruct (AWQ quantized)"
    assert release.generation.n_hand_written == 6
    assert release.imported_from == "https://github.com/NaveenGali11/stair-rag-reproduction"
    assert release.non_retrieval_leaves and release.non_retrieval_leaves[0].title == "Contents"

    assert DatasetManifest.from_dict(PUBLIC).blind_split == "test"
    private = DatasetManifest.from_dict(PRIVATE)
    assert private.blind == BlindInfo(split="test", private=True) and private.blind_split is None

    early = DatasetManifest.from_dict(EARLY_BUILD)
    assert isinstance(early.collection, CatalogCollection)
    assert early.generation is not None and early.generation.extra == {
        "future_key": {"kept": [1, 2]}
    }
    assert isinstance(DatasetManifest.from_dict(BUILD).collection, PdfDirCollection)
    sliced = DatasetManifest.from_dict(SLICE)
    assert sliced.source == "/tmp/wc" and sliced.imported_from is None


def test_version_0_is_upgraded_explicitly() -> None:
    # Without a format, settings flat at the top (what the card has read since its first version).
    old = {
        "name": "hand-made",
        "model": "/models/tiny",
        "endpoint_kind": "local",
        "seed": 7,
        "split_rule": "grouped by generation unit",
        "split_seed": 3,
        "generation": {"prompt_version": "questions-v1", "seed": 13},
    }
    m = DatasetManifest.from_dict(old)
    assert m.version == 1
    assert m.generation == Generation(
        model="/models/tiny", endpoint_kind="local", prompt_version="questions-v1", seed=13
    )
    assert isinstance(m.split, BuildSplit) and (m.split.rule, m.split.seed) == (
        "grouped by generation unit",
        3,
    )
    # The flat seed stays where it is: the generation object records its own.
    assert m.extra == {"seed": 7}
    written = m.to_dict()
    assert written["format"] == FORMAT_VERSION and "model" not in written
    assert DatasetManifest.from_dict(written) == m  # upgraded once, stable after


def test_the_tiny_fixture_upgrades_and_loads(tmp_path: Path) -> None:
    root = make_tiny_dataset(tmp_path / "data")
    ds = load(root)
    assert ds.manifest.name == "tiny-synthetic"
    assert ds.manifest.generation == Generation(seed=7)  # its flat seed, moved
    assert set(ds.manifest.files) >= {"corpus.parquet", "books.parquet"}


def test_the_writer_is_the_reader_inverse(tmp_path: Path) -> None:
    root = make_tiny_dataset(tmp_path / "data")
    manifest = DatasetManifest.from_dict({**BUILD, "files": {}})
    write_manifest(root, manifest)
    text = (root / "manifest.json").read_text()
    back = read_manifest(root)
    assert back == manifest.with_files(back.files) and dumps(back.to_dict()) == text
    # The mapping form (build information without format and files) writes the same bytes.
    info = {k: v for k, v in BUILD.items() if k not in ("format", "files")}
    write_manifest(root, info)
    assert (root / "manifest.json").read_text() == text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"generation": {"seed": "42"}},
            r'generation\.seed: expected an integer, got "42"',
        ),
        ({"files": {"a.parquet": {"bytes": 3}}}, r"files\.a\.parquet\.sha256: missing"),
        ({"collection": {"kind": "zip"}}, r"collection\.kind: 'zip' is not one of catalog"),
        ({"restrictions": {"b": "no-llm-training"}}, r"restrictions\.b: expected a list"),
        ({"format": "searchtome-dataset-v9"}, r"format: searchtome-dataset-v9 is newer"),
        ({"format": "beir"}, r'format: expected "searchtome-dataset-vN", got "beir"'),
    ],
)
def test_a_bad_field_is_one_line_naming_file_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    root = make_tiny_dataset(tmp_path / "data")
    path = root / "manifest.json"
    path.write_text(json.dumps({**read_json(path), **change}))
    with pytest.raises(SearchTomeError) as err:
        load(root)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: ")
    assert re.search(message, text), text
    assert text.endswith("fix or remove that field (or rebuild the dataset)")


def test_a_folder_without_a_manifest_records_nothing(tmp_path: Path) -> None:
    root = make_tiny_dataset(tmp_path / "data")
    (root / "manifest.json").unlink()
    manifest = load(root).manifest
    assert manifest == DatasetManifest.missing() and manifest.to_dict() == {}


@pytest.mark.skipif(not (PEER / "data" / "splits").is_dir(), reason="../shared/peer is missing")
def test_the_imported_release_reads_back_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "whole-child"
    import_repro(PEER, out)
    text = (out / "manifest.json").read_text()
    manifest = read_manifest(out)
    assert dumps(manifest.to_dict()) == text
    assert manifest.source is not None and manifest.source.license == "CC BY-NC-SA 4.0"
    assert isinstance(manifest.split, ReleaseSplit) and manifest.split.seed == 42


def test_a_hand_written_version_key_is_data_not_the_format_version() -> None:
    data = {"format": FORMAT_VERSION, "name": "mine", "version": "2026-12", "files": {}}
    manifest = DatasetManifest.from_dict(data)
    assert manifest.version == MANIFEST_VERSION and manifest.label == "2026-12"
    assert dumps(manifest.to_dict()) == dumps(data)
