"""Trying to break a blind release's secrecy from its public half alone (and the source data).

The attacker holds the PUBLIC folder and, for `import repro`, the public source release it came
from. Public ids must not be recomputable from either, and the withheld units must not be
identifiable by re-cutting the public paragraphs into units and hashing their ids.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from searchtome.cli import main
from searchtome.dataset.blind import BLIND_FORMAT, make_blind, read_private
from searchtome.dataset.loader import load
from searchtome.generate.units import UnitConfig, make_units
from tests.hostile.conftest import build_args


def _public_ids(public: Path) -> tuple[set[str], set[str]]:
    queries, units = set(), set()
    for split in ("train", "dev", "test"):
        for row in pq.read_table(public / f"queries/{split}.parquet").to_pylist():
            queries.add(row["query_id"])
            if row.get("unit_id"):
                units.add(row["unit_id"])
    return queries, units


def _hmac_ids(key: bytes, kind: str, sources: list[str]) -> set[str]:
    return {
        hmac.new(key, f"{kind}\0{s}".encode(), hashlib.sha256).hexdigest()[:16] for s in sources
    }


def _candidate_keys(full: Path, public: Path, split: str) -> list[bytes]:
    """Every key an attacker could derive: the old data-derived key (the source release is
    public), hashes of every public file, of the manifest text, of the split name."""
    ds = load(full)
    old = hashlib.sha256(BLIND_FORMAT.encode())
    for q in sorted(ds.queries(split), key=lambda q: q.query_id):
        old.update(f"{q.query_id}\t{q.leaf_id}\t{q.unit_id}\t{q.text}\n".encode())
    keys = [old.digest(), BLIND_FORMAT.encode(), split.encode(), b""]
    for path in sorted(p for p in public.rglob("*") if p.is_file()):
        data = path.read_bytes()
        keys += [hashlib.sha256(data).digest(), hashlib.sha256(data).hexdigest().encode()]
    return keys


def _suffixes(ids: set[str]) -> set[str]:
    return {i.rpartition("-")[2] for i in ids}


def _attack(full: Path, public: Path, private: Path, split: str) -> None:
    ds = load(full)
    public_q, public_u = _public_ids(public)
    source_q = [q.query_id for s in ("train", "dev", "test") for q in ds.queries(s)]
    # Units re-cut from the PUBLIC paragraphs, with the default settings and the tiny ones.
    paragraphs = load(public).paragraphs()
    recut: set[str] = {u.unit_id for u in ds.units()}
    if paragraphs:
        for cfg in (UnitConfig(), UnitConfig(min_chars=100), UnitConfig(min_chars=1, drop_below=1)):
            got, _ = make_units(load(public).leaves(), paragraphs, cfg)
            recut |= {u.unit_id for u in got}
    for key in _candidate_keys(full, public, split):
        assert not _hmac_ids(key, "query", source_q) & _suffixes(public_q)
        assert not _hmac_ids(key, "unit", sorted(recut)) & _suffixes(public_u)
    # The real key links them, and lives in the private half only.
    secret = read_private(private).key
    assert _hmac_ids(bytes.fromhex(secret), "query", source_q) & _suffixes(public_q)
    for path in (p for p in public.rglob("*") if p.is_file()):
        text = path.read_bytes()
        assert secret.encode() not in text and bytes.fromhex(secret) not in text, path
        if path.suffix == ".parquet":
            cells = json.dumps(pq.read_table(path).to_pylist())
            assert secret not in cells
            assert not any(f'"{u}"' in cells for u in recut), f"{path} names a source unit"


def test_make_blind_ids_cannot_be_recomputed(tiny_dataset, tmp_path):
    public, private = tmp_path / "pub", tmp_path / "priv"
    make_blind(tiny_dataset, public, private, "test")
    _attack(tiny_dataset, public, private, "test")
    for split in ("dev", "train"):  # any split held back
        make_blind(tiny_dataset, tmp_path / split, tmp_path / f"{split}-p", split)
        _attack(tiny_dataset, tmp_path / split, tmp_path / f"{split}-p", split)


def test_a_blind_build_keeps_units_and_key_private_and_rebuilds_stably(
    book_dir, server, tmp_path, capsys
):
    cache, full = tmp_path / "c.sqlite", tmp_path / "full"
    assert main(build_args(book_dir, server.base_url, full, cache)) == 0
    public = tmp_path / "blind"
    args = build_args(book_dir, server.base_url, public, cache, "--blind", "test")
    assert main(args) == 0
    private = tmp_path / "blind-private"
    for withheld in ("units.parquet", "build-report.json", "splits.json", "qrels/test.parquet"):
        assert not (public / withheld).exists() and (
            (private / withheld).exists() or withheld == "splits.json"
        ), withheld
    _attack(full, public, private, "test")
    before = _public_ids(public)
    assert main(args) == 0  # rebuilt into the same private folder: the same key, the same ids
    assert _public_ids(public) == before
    assert not list(tmp_path.glob(".blind.*"))  # no scratch left behind


def test_an_unreadable_private_folder_gets_a_fresh_key(tiny_dataset, tmp_path):
    private = tmp_path / "priv"
    private.mkdir()
    (private / "blind.json").write_text('{"format": "searchtome-blind-v1", "key": "zz"}')
    make_blind(tiny_dataset, tmp_path / "pub", private, "test")
    assert len(read_private(private).key) == 64


@pytest.mark.parametrize("split", ["validation", "TEST"])
def test_an_unknown_blind_split_is_one_line(tiny_dataset, tmp_path, split, capsys):
    rc = main(["publish", str(tiny_dataset), "--repo", "org/x", "--blind", split, "--dry-run"])
    assert rc != 0 and "Traceback" not in capsys.readouterr().err
