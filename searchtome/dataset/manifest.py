"""``manifest.json`` as a typed, versioned document: one reader, one writer, explicit upgrades.

A dataset folder's manifest records where the data came from and the SHA-256 of every other
file. :class:`DatasetManifest` holds it as frozen dataclasses nested by part: the collection of
books, library versions, ToC options, question generation, the split, the build record, the file
hashes and, for an imported release, its source. :func:`read_manifest` (or
:meth:`DatasetManifest.from_dict`) is the one reader: it upgrades older layouts explicitly
(:data:`MANIFEST`, on the document kernel) and names the file and field of a bad value in one line;
:func:`write_manifest` is the one writer.

Versions (``format`` in the file, ``version`` on the object):

* **1** (``searchtome-dataset-v1``, every manifest written so far). Settings live in the
  ``generation`` and ``split`` objects.
* **0**: a manifest without ``format`` (written by hand), or whose settings are flat top-level
  keys (``model``, ``seed``, ``split_rule``, ...), the layout the dataset card has read since
  its first version. The upgrade moves each flat key into its object when that object lacks it.

Writing a manifest that was read gives the same bytes: keys this version does not model, and
keys recorded as ``null``, are kept in ``extra`` and written back as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.document import (
    NOT_WRITTEN,
    FieldError,
    Format,
    Record,
    document_error,
    read_record,
)
from searchtome.io import PathLike, read_json, sha256_file, write_json

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
FORMAT_PREFIX = "searchtome-dataset-v"
FORMAT_VERSION = f"{FORMAT_PREFIX}{MANIFEST_VERSION}"


# -- the parts -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileHash(Record):
    """One file of the folder: its SHA-256 and size."""

    sha256: str
    bytes: int


@dataclass(frozen=True)
class CatalogCollection(Record):
    """Books taken from a catalog (``build --catalog``)."""

    kind: str = "catalog"
    catalog: str | None = None
    catalog_version: str | int | None = None
    catalog_sha256: str | None = None
    books: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PdfDirCollection(Record):
    """Books from a folder of PDFs (``build --pdf-dir``): file name → SHA-256."""

    NULLS = frozenset({"metadata_sha256"})

    kind: str = "pdf-dir"
    files: Mapping[str, str] | None = None
    metadata_sha256: str | None = None


Collection = CatalogCollection | PdfDirCollection
_COLLECTIONS: dict[str, type[Record]] = {"catalog": CatalogCollection, "pdf-dir": PdfDirCollection}


@dataclass(frozen=True)
class Versions(Record):
    """The library versions a build ran with."""

    searchtome: str | None = None
    pymupdf: str | None = None
    pyarrow: str | None = None


@dataclass(frozen=True)
class Extraction(Record):
    """ToC options; ``leaf_depth``: the outline depth of each book that was cut."""

    infer_toc: bool = False
    leaf_depth: Mapping[str, int] | None = None


@dataclass(frozen=True)
class UnitSettings(Record):
    min_chars: int | None = None
    drop_below: int | None = None


@dataclass(frozen=True)
class GenerationCounts(Record):
    units: int | None = None
    units_failed: int | None = None
    units_too_short: int | None = None
    questions_generated: int | None = None
    questions_kept: int | None = None
    removed: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Generation(Record):
    """How ``searchtome build`` wrote the questions (also any hand-written ``generation``)."""

    model: str | None = None
    endpoint_kind: str | None = None
    note: str | None = None
    prompt_version: str | None = None
    prompt_sha256: str | None = None
    seed: int | None = None
    sampling: Mapping[str, Any] | None = None  # SamplingParams.fingerprint()
    questions_per_unit: int | str | None = None  # a count or "auto"
    strictness: str | None = None
    repair: bool | None = None
    filters: Mapping[str, Any] | None = None  # FilterConfig.to_dict()
    units: UnitSettings | None = None
    counts: GenerationCounts | None = None

    @property
    def writer(self) -> str | None:
        """Who wrote the questions, for people."""
        return self.model

    @property
    def n_hand_written(self) -> int:
        return 0


@dataclass(frozen=True)
class ReleaseGeneration(Record):
    """What an imported release's questions record about their generation; a setting whose
    questions disagree lists every value seen."""

    NULLS = frozenset(
        {"model", "model_revision", "prompt_version", "seed", "questions_generated", "units"}
    )

    model: str | list[str] | None = None
    model_revision: str | list[str] | None = None
    model_family: str | None = None
    endpoint_kind: str | None = None
    prompt_version: str | list[str] | None = None
    seed: int | list[str] | None = None
    questions_generated: int | None = None
    units: int | None = None
    filters: Mapping[str, Any] | None = None
    hand_written: int | None = None

    @property
    def writer(self) -> str | None:
        model = self.model_family or self.model
        return None if model is None else str(model)

    @property
    def n_hand_written(self) -> int:
        return self.hand_written or 0


@dataclass(frozen=True)
class BuildSplit(Record):
    """The split of a build: rule, seed, ratios and the counts per split (``splits.json`` has
    the rest)."""

    rule: str | None = None
    algorithm: str | None = None
    seed: int | None = None
    ratios: Mapping[str, float] | None = None
    leaves_in_train: bool | None = None
    questions: Mapping[str, int] | None = None
    units: Mapping[str, int] | None = None
    leaf_coverage: Mapping[str, int] | None = None
    leaves_missing_from_train: int | None = None
    manifest: str | None = None


@dataclass(frozen=True)
class ReleaseSplit(Record):
    """An imported release's split, as its own split manifest records it."""

    NULLS = frozenset(
        {
            "seed",
            "group_key",
            "unit_counts",
            "leaf_coverage",
            "constraints",
            "paper_reference_counts",
        }
    )

    rule: str | None = None
    seed: int | None = None
    group_key: str | None = None
    counts: Mapping[str, int] | None = None
    unit_counts: Mapping[str, int] | None = None
    leaf_coverage: Mapping[str, int] | None = None
    constraints: Mapping[str, Any] | None = None
    paper_reference_counts: Mapping[str, int] | None = None


@dataclass(frozen=True)
class BuildRecord(Record):
    """What `searchtome build` compares to skip an unchanged rebuild."""

    format: str | None = None
    fingerprint: str | None = None


@dataclass(frozen=True)
class Source(Record):
    """The foreign release a dataset was imported from, and the SHA-256 of every file read."""

    NULLS = frozenset({"kind", "repository", "license", "book_sha256"})

    kind: str | None = None
    repository: str | None = None
    license: str | None = None
    book_sha256: str | None = None
    files: Mapping[str, str] | None = None
    verification: Mapping[str, str] | None = None


@dataclass(frozen=True)
class NonRetrievalLeaf(Record):
    """An outline leaf of the release that is not a retrieval target (front or back matter)."""

    node_id: str | None = None
    source_id: str | None = None
    title: str | None = None


# BlindInfo.extra key: where the held-back questions and their gold are public already (a blind
# release cut from a public one, like ``import repro --blind``, is a rehearsal).
QUESTIONS_PUBLIC = "questions_public"


@dataclass(frozen=True)
class BlindInfo(Record):
    """A blind release: which split's gold is held back. The public half records this object;
    the ``private`` half only the split's name (a string)."""

    split: str = ""
    format: str | None = None
    note: str | None = None
    private: bool = field(default=False, metadata=NOT_WRITTEN)


# -- the document ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetManifest(Record):
    """A dataset folder's ``manifest.json``. ``version`` is written as ``format``."""

    version: int = field(default=MANIFEST_VERSION, metadata=NOT_WRITTEN)  # written as format
    name: str | None = None
    pretty_name: str | None = None  # hand-written only: the card's pretty_name
    description: str | None = None
    license: str | None = None
    collection: Collection | None = None
    versions: Versions | None = None
    searchtome_version: str | None = None
    books: tuple[str, ...] | None = None
    extraction: Extraction | None = None
    generation: Generation | ReleaseGeneration | None = None
    split: BuildSplit | ReleaseSplit | None = None
    restrictions: Mapping[str, tuple[str, ...]] | None = None
    source: Source | str | None = None  # a string: a note of where a derived copy came from
    id_map: str | None = None
    leaf_text: str | None = None
    non_retrieval_leaves: tuple[NonRetrievalLeaf, ...] | None = None
    hand_written_queries: tuple[str, ...] | None = None
    split_constraints: Mapping[str, str] | None = None
    warnings: tuple[str, ...] | None = None
    blind: BlindInfo | None = None
    build: BuildRecord | None = None
    files: Mapping[str, FileHash] = field(default_factory=dict)

    # -- reading ---------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> DatasetManifest:
        """The manifest held by ``data`` (a loaded ``manifest.json``), upgraded to this version.

        ``where`` names the file in the one-line error a bad field raises.
        """
        label = where or MANIFEST_FILE
        try:
            if not isinstance(data, Mapping):
                raise FieldError("", "expected a JSON object")
            body, version = MANIFEST.upgrade(data)
            return dataclasses.replace(_read_document(body), read_version=version)
        except FieldError as bad:
            raise document_error(
                label, bad, "fix or remove that field (or rebuild the dataset)"
            ) from None

    @classmethod
    def missing(cls) -> DatasetManifest:
        """The manifest of a folder without ``manifest.json``: nothing recorded."""
        return cls(version=0)

    # -- writing ---------------------------------------------------------------------------------
    def to_dict(self, *, files: bool = True, format: bool = True) -> dict[str, Any]:
        """The JSON object; ``files=False`` / ``format=False`` leave those keys out (the build
        fingerprint covers neither, a leaderboard records no file list)."""
        out = super().to_dict()
        if self.blind is not None and self.blind.private:
            out["blind"] = self.blind.split
        if not files or (self.version == 0 and not self.files):
            out.pop("files")
        if format and self.version:
            out["format"] = f"{FORMAT_PREFIX}{self.version}"
        return out

    def with_files(self, files: Mapping[str, FileHash]) -> DatasetManifest:
        return dataclasses.replace(self, files=dict(sorted(files.items())))

    # -- what readers ask ------------------------------------------------------------------------
    @property
    def blind_split(self) -> str | None:
        """The split whose gold this (public) folder holds back, if it is a blind release."""
        blind = self.blind
        return blind.split if blind is not None and not blind.private and blind.split else None

    @property
    def imported_from(self) -> str | None:
        """The repository of the foreign release this dataset was converted from."""
        return self.source.repository if isinstance(self.source, Source) else None

    @property
    def question_model(self) -> str | None:
        """The model that wrote the questions (a release's: every model seen, as text)."""
        model = self.generation.model if self.generation is not None else None
        return None if model is None else str(model)

    @property
    def question_endpoint(self) -> str | None:
        """How that model was reached: ``local``, an API, ..."""
        return self.generation.endpoint_kind if self.generation is not None else None

    @property
    def question_note(self) -> str | None:
        """The build's note on the questions (why a local model's are weak); a release's
        generation record has no such field, so a note there is one of its extra keys."""
        gen = self.generation
        note = gen.note if isinstance(gen, Generation) else gen.extra.get("note") if gen else None
        return note if isinstance(note, str) else None

    @property
    def label(self) -> str | None:
        """A ``revision`` or ``version`` a hand-written manifest records (ours record none)."""
        value = self.extra.get("revision") or self.extra.get("version")
        return None if value is None else str(value)


def _read_document(body: dict[str, Any]) -> DatasetManifest:
    """The version-1 object; the generation and split records are a release's when the
    manifest has a ``source`` (``import repro``), a build's otherwise."""
    release = isinstance(body.get("source"), Mapping)
    parts: dict[str, Any] = {}
    kinds: dict[str, type[Record]] = {
        "generation": ReleaseGeneration if release else Generation,
        "split": ReleaseSplit if release else BuildSplit,
    }
    for key, kind in kinds.items():
        if isinstance(body.get(key), Mapping):
            parts[key] = kind.from_dict(body.pop(key), key)
    collection = body.get("collection")
    if isinstance(collection, Mapping):
        kind_name = collection.get("kind", "catalog")
        if kind_name not in _COLLECTIONS:
            raise FieldError("collection.kind", f"{kind_name!r} is not one of catalog, pdf-dir")
        parts["collection"] = _COLLECTIONS[kind_name].from_dict(
            body.pop("collection"), "collection"
        )
    blind = body.get("blind")
    if isinstance(blind, str):  # the private half's short form
        parts["blind"] = BlindInfo(split=body.pop("blind"), private=True)
    return dataclasses.replace(read_record(DatasetManifest, body, ""), **parts)


# Version 0's flat settings and the object key each one moves to.
FLAT_KEYS: dict[str, tuple[str, str]] = {
    "model": ("generation", "model"),
    "endpoint_kind": ("generation", "endpoint_kind"),
    "endpoint_host": ("generation", "endpoint_host"),
    "prompt_version": ("generation", "prompt_version"),
    "seed": ("generation", "seed"),
    "sampling": ("generation", "sampling"),
    "filters": ("generation", "filters"),
    "split_rule": ("split", "rule"),
    "split_seed": ("split", "seed"),
    "split_ratios": ("split", "ratios"),
}


def _upgrade_v0(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 → 1: flat settings move into ``generation`` / ``split`` (a key the object
    already has stays where it is); the format is set."""
    out = dict(data)
    for flat, (section, key) in FLAT_KEYS.items():
        if flat not in out or out[flat] is None:
            continue
        part = out.get(section)
        part = dict(part) if isinstance(part, Mapping) else {} if part is None else None
        if part is None or key in part:
            continue  # a non-object section, or one that records the key itself
        part[key] = out.pop(flat)
        out[section] = part
    return out


_KEYED = Format(FORMAT_PREFIX.removesuffix("-v"), MANIFEST_VERSION, upgrades=(_upgrade_v0,))


def _told_version(data: Mapping[str, Any]) -> int:
    """0 for a manifest without ``format`` or with flat settings (a bad or newer format fails
    first); else the version ``format`` names."""
    if "format" not in data:
        return 0
    version = _KEYED.version_of(data)
    return 0 if _has_flat_settings(data) else version


MANIFEST = dataclasses.replace(_KEYED, shape=_told_version)


def read_manifest(path: PathLike) -> DatasetManifest:
    """The manifest of a dataset folder (or a ``manifest.json`` path), upgraded and checked."""
    p = Path(path)
    p = p / MANIFEST_FILE if p.is_dir() else p
    return DatasetManifest.from_dict(read_json(p), str(p))


def _has_flat_settings(data: Mapping[str, Any]) -> bool:
    """Whether a manifest keeps a setting flat that its object lacks (version 0's layout)."""
    return any(
        data.get(flat) is not None and (not isinstance(data.get(s), Mapping) or k not in data[s])
        for flat, (s, k) in FLAT_KEYS.items()
    )


def file_hashes(out_dir: PathLike) -> dict[str, FileHash]:
    """The SHA-256 and size of every file except the manifest itself (and hidden ones)."""
    out = Path(out_dir)
    result = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if rel == MANIFEST_FILE or any(part.startswith(".") for part in Path(rel).parts):
            continue
        result[rel] = FileHash(sha256=sha256_file(path), bytes=path.stat().st_size)
    return result


def write_manifest(out_dir: PathLike, manifest: DatasetManifest | Mapping[str, Any]) -> Path:
    """``manifest.json``: ``manifest`` with the hash of every other file in ``out_dir``.

    A mapping (the build information, without ``format`` and ``files``) is read as a manifest
    first, so what is written is always what :func:`read_manifest` gives back.
    """
    if not isinstance(manifest, DatasetManifest):
        where = str(Path(out_dir) / MANIFEST_FILE)
        manifest = DatasetManifest.from_dict({"format": FORMAT_VERSION, **manifest}, where)
    if not manifest.version:
        manifest = dataclasses.replace(manifest, version=MANIFEST_VERSION)
    full = manifest.with_files(file_hashes(out_dir))
    return write_json(Path(out_dir) / MANIFEST_FILE, full.to_dict())


def diff_hashes(
    expected: Mapping[str, FileHash],
    actual: Mapping[str, FileHash],
    *,
    missing: str = "listed in the manifest but missing",
    extra: str = "present but not in the manifest",
    changed: str = "SHA-256 differs from the manifest",
) -> list[str]:
    """``path: problem`` for every file whose presence or SHA-256 differs between two listings."""
    problems = []
    for rel in sorted(set(expected) | set(actual)):
        if rel not in actual:
            problems.append(f"{rel}: {missing}")
        elif rel not in expected:
            problems.append(f"{rel}: {extra}")
        elif expected[rel].sha256 != actual[rel].sha256:
            problems.append(f"{rel}: {changed}")
    return problems


def verify_manifest(out_dir: PathLike) -> list[str]:
    """Differences between the files on disk and ``manifest.json`` (empty when they agree)."""
    return diff_hashes(read_manifest(out_dir).files, file_hashes(out_dir))
