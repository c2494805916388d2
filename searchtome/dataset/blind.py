"""Blind-test releases: a public dataset without one split's gold, and the private folder holding it.

:func:`make_blind` turns a complete dataset folder (what ``build`` or ``import repro`` wrote) into

* **PUBLIC** — only files known to carry no gold of the blind split: ``corpus``, ``toc``,
  ``books``, ``paragraphs`` (copied as they are), every split's queries and the qrels of the
  other splits, a manifest reduced to name, description, versions and book ids, and a card. The
  blind split's queries carry ``query_id``, ``book_id``, ``domain`` and ``text`` only, in the
  order of their ids.
* **PRIVATE** — the blind split's full queries and qrels, ``units.parquet``, the map from public
  query ids back to the source ids (``blind.json``), and every withheld file (``id_map.json``,
  ``splits.json``, ``build-report.json``, the full manifest as ``source-manifest.json``).

Ids. Source query ids may encode the gold (the reproduction's ``whole-child-009-g001-q01`` names
its leaf and unit; ours, ``book-2.1-u3-q01``, too), so every public query id and unit id is
opaque: ``q-`` / ``BOOK#u-`` plus 16 hex digits of an HMAC-SHA256 of the source id. The key is a
random secret (32 bytes from :mod:`secrets`) created with the release and written only to the
private ``blind.json``: no public file, and nothing derivable from one, gives it, so public ids
cannot be recomputed from the source release, and the units a public unit id stands for cannot
be found by re-cutting the public paragraphs into units and hashing their ids. Writing a release
into a private folder that already holds one of the same split reuses its key, so rewriting a
release keeps its ids. ``units.parquet`` stays private because the paragraphs that no public
unit covers would point at the held-back questions' sources. Runs written against the source
ids (every committed submission) are renamed with the map in ``blind.json``: :func:`rename_run`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.dataset.layout import (
    BLIND_QUERY_COLUMNS,
    BOOKS_FILE,
    CORPUS_FILE,
    MANIFEST_FILE,
    PARAGRAPHS_FILE,
    TOC_FILE,
    UNITS_FILE,
    qrels_file,
    queries_file,
    schema,
    write_manifest,
)
from searchtome.dataset.loader import Dataset, load
from searchtome.dataset.manifest import QUESTIONS_PUBLIC, BlindInfo, DatasetManifest
from searchtome.document import Format, Record, read_document, write_document
from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import (
    PathLike,
    atomic_dir,
    commit_dir,
    read_json,
    read_parquet,
    scratch_dir,
    write_json,
    write_parquet,
)
from searchtome.records import SPLITS, Query, Run, Submission, Unit

BLIND_FILE = "blind.json"
BLIND = Format("searchtome-blind", 1)
BLIND_FORMAT = BLIND.tag
SOURCE_MANIFEST = "source-manifest.json"
PUBLIC_COPIES = (CORPUS_FILE, BOOKS_FILE, TOC_FILE, PARAGRAPHS_FILE)
KEY_BYTES = 32


@dataclass(frozen=True, kw_only=True)
class PrivateHalf(Record):
    """``blind.json``, the private half's record: the split held back and the release's secret."""

    split: str
    # The release's secret: with it, anyone could link public ids to source ids.
    key: str
    key_algorithm: str
    source_query_ids: Mapping[str, str]  # public query id -> source query id
    # Where these questions and their gold are public already (a rehearsal; None: nowhere known).
    questions_public: str | None = None


@dataclass(frozen=True)
class BlindResult:
    public: Path
    private: Path
    split: str
    n_blind: int


class _Ids:
    """Opaque public ids: an HMAC of the source id under the release's secret key."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _digest(self, kind: str, source: str) -> str:
        return hmac.new(self.key, f"{kind}\0{source}".encode(), hashlib.sha256).hexdigest()[:16]

    def query(self, query_id: str) -> str:
        return f"q-{self._digest('query', query_id)}"

    def unit(self, unit_id: str | None, book_id: str) -> str | None:
        return None if unit_id is None else f"{book_id}#u-{self._digest('unit', unit_id)}"


def _query_rows(queries: list[Query], ds: Dataset, ids: _Ids, blind: bool) -> list[dict[str, Any]]:
    rows = []
    for q in queries:
        row = {
            "query_id": ids.query(q.query_id),
            "book_id": q.book_id,
            "domain": ds.domain(q.book_id),
            "text": q.text,
        }
        if not blind:
            row.update(unit_id=ids.unit(q.unit_id, q.book_id), model_generated=q.model_generated)
        rows.append(row)
    return sorted(rows, key=lambda r: (r["book_id"], r["query_id"]))


def _qrel_rows(queries: list[Query], ids: _Ids) -> list[dict[str, Any]]:
    rows = [
        {"query-id": ids.query(q.query_id), "corpus-id": q.leaf_id, "score": 1} for q in queries
    ]
    return sorted(rows, key=lambda r: r["query-id"])


def _write_public(
    src: Path, ds: Dataset, ids: _Ids, split: str, out: Path, questions_public: str | None
) -> None:
    import pyarrow as pa

    full_schema = schema("queries")
    blind_schema = pa.schema([full_schema.field(c) for c in BLIND_QUERY_COLUMNS])
    for name in PUBLIC_COPIES:
        shutil.copyfile(src / name, out / name)
    for s in SPLITS:
        queries = ds.queries(s)
        rows = _query_rows(queries, ds, ids, blind=s == split)
        write_parquet(out / queries_file(s), rows, blind_schema if s == split else full_schema)
        if s != split:
            write_parquet(out / qrels_file(s), _qrel_rows(queries, ids), schema("qrels"))
    source = ds.manifest  # reduced to what identifies the data: no generation or split record
    public = DatasetManifest(
        name=source.name,
        description=source.description,
        searchtome_version=source.searchtome_version,
        books=source.books,
        license=source.license,
        blind=BlindInfo(
            split=split,
            format=BLIND_FORMAT,
            note=f"the {split} queries' gold is held back; query and unit ids are opaque",
            extra={QUESTIONS_PUBLIC: questions_public} if questions_public else {},
        ),
    )
    write_manifest(out, public)
    from searchtome.dataset.card import write_card  # the card reads the public folder back

    write_card(out)


def _write_private(
    src: Path, ds: Dataset, ids: _Ids, split: str, out: Path, questions_public: str | None
) -> None:
    out.chmod(0o700)  # before any gold is written into it
    queries = ds.queries(split)
    write_parquet(
        out / queries_file(split), _query_rows(queries, ds, ids, blind=False), schema("queries")
    )
    write_parquet(out / qrels_file(split), _qrel_rows(queries, ids), schema("qrels"))
    units = [
        {
            "unit_id": ids.unit(u.unit_id, u.book_id),
            "leaf_id": u.leaf_id,
            "book_id": u.book_id,
            "paragraph_ids": list(u.paragraph_ids),
            "text": u.text,
        }
        for u in ds.units()
    ]
    write_parquet(out / UNITS_FILE, sorted(units, key=lambda u: u["unit_id"]), schema("units"))
    for path in sorted(src.rglob("*.json")):
        rel = path.relative_to(src)
        target = out / (SOURCE_MANIFEST if rel.as_posix() == MANIFEST_FILE else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    public_ids = {ids.query(q.query_id): q.query_id for q in queries}
    held = PrivateHalf(
        split=split,
        key=ids.key.hex(),
        key_algorithm="HMAC-SHA256(key, KIND \\0 SOURCE_ID)[:16 hex], KIND query or unit",
        source_query_ids=dict(sorted(public_ids.items())),
        questions_public=questions_public or None,
    )
    write_json(out / BLIND_FILE, write_document(BLIND, held))
    name = f"{ds.manifest.name or 'dataset'} (private)"
    write_manifest(out, DatasetManifest(name=name, blind=BlindInfo(split=split, private=True)))
    owner_only(out)


def owner_only(root: Path) -> None:
    """Files 0600 and folders 0700 under ``root`` (itself included): the gold is the owner's."""
    root.chmod(0o700)
    for path in root.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)


def _release_key(private: Path, split: str) -> bytes:
    """The key of the release already in ``private`` (same split), else a fresh random one."""
    try:
        held = read_private(private) if is_private(private) else None
    except SearchTomeError:
        held = None
    key = held.key if held is not None and held.split == split else None
    if key is not None and len(key) == 2 * KEY_BYTES:
        try:
            return bytes.fromhex(key)
        except ValueError:
            pass
    return secrets.token_bytes(KEY_BYTES)


def make_blind(
    full: PathLike,
    public: PathLike,
    private: PathLike,
    split: str,
    questions_public: str | None = None,
) -> BlindResult:
    """Write PUBLIC and PRIVATE from the complete dataset ``full`` (each atomically).

    ``questions_public``: where the blind split's questions and gold are already public (the
    release a reproduction was imported from); recorded in both halves and said in the card, as
    such a release is a rehearsal, not a blind test. PRIVATE is written owner-only.
    """
    src = Path(full)
    if split not in SPLITS:
        raise unknown_name("blind split", split, SPLITS)
    ds = load(src)
    if ds.manifest.blind is not None:
        raise SearchTomeError(f"{src}: is already a blind release")
    if not ds.queries(split):
        raise SearchTomeError(f"{src}: the {split} split has no queries to hold back")
    pub, priv = Path(public), Path(private)
    ids = _Ids(_release_key(priv, split))
    if pub.resolve() == priv.resolve() or priv.resolve().is_relative_to(pub.resolve()):
        raise SearchTomeError(f"{priv}: the private folder may not lie inside the public one")
    for target, writer in ((pub, _write_public), (priv, _write_private)):
        tmp = atomic_dir(target)
        try:
            writer(src, ds, ids, split, tmp, questions_public)
            commit_dir(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return BlindResult(pub, priv, split, len(ds.queries(split)))


def is_private(path: PathLike) -> bool:
    """Whether ``path`` is the private folder of a blind release."""
    return (Path(path) / BLIND_FILE).is_file()


def read_private(private: PathLike) -> PrivateHalf:
    """The private half's ``blind.json``, typed (strict: searchtome wrote it)."""
    path = Path(private) / BLIND_FILE
    advice = "write the release again with `searchtome publish --blind`"
    return read_document(BLIND, PrivateHalf, read_json(path), path, advice)


def with_private(public: Dataset, private: PathLike) -> Dataset:
    """``public`` with its blind split's queries (and gold) and the units put back."""
    blind = read_private(private).split
    held = load_private_queries(private)
    others = [q for s in SPLITS if s != blind for q in public.queries(s)]
    units = [Unit.from_dict(r) for r in _rows(Path(private) / UNITS_FILE)]
    return Dataset(
        root=public.root,
        books=public.books,
        _toc=list(public.nodes.values()),
        _leaves=public.leaves(),
        _queries=others + held,
        _paragraphs=public.paragraphs(),
        _units=units,
        manifest=public.manifest,
    )


def _rows(path: Path) -> list[dict[str, Any]]:
    return read_parquet(path)


def load_private_queries(private: PathLike) -> list[Query]:
    """The blind split's queries with their gold, in public ids."""
    root = Path(private)
    split = read_private(root).split
    gold = {r["query-id"]: r["corpus-id"] for r in _rows(root / qrels_file(split)) if r["score"]}
    return [
        Query(
            query_id=r["query_id"],
            book_id=r["book_id"],
            text=r["text"],
            leaf_id=gold[r["query_id"]],
            split=split,
            unit_id=r.get("unit_id"),
            model_generated=bool(r.get("model_generated", True)),
        )
        for r in _rows(root / queries_file(split))
    ]


def private_qrels(private: PathLike) -> dict[str, dict[str, int]]:
    """The held-back qrels as ``{public query id: {leaf id: 1}}``, in the private file's order."""
    return {q.query_id: {q.leaf_id: 1} for q in load_private_queries(private)}


def rename_run(item: Run | Submission, private: PathLike) -> Run | Submission:
    """A run in source query ids renamed to the public ids; one in public ids is returned as is."""
    back = read_private(private).source_query_ids
    public_of = {source: public for public, source in back.items()}
    run = item.run if isinstance(item, Submission) else item
    if not any(qid in public_of for qid in run.rankings):
        return item
    renamed = Run(
        run.name,
        {public_of.get(q, q): ids for q, ids in run.rankings.items()},
        None if run.scores is None else {public_of.get(q, q): s for q, s in run.scores.items()},
        run.meta,
    )
    if isinstance(item, Submission):
        return Submission(item.system, renamed, item.meta, item.path)
    return renamed


def default_private(public: PathLike) -> Path:
    """Where the private folder goes when none is named: ``PUBLIC-private`` beside it."""
    path = Path(public)
    return path.with_name(f"{path.name}-private")


def blind_release(
    write_full: Callable[[Path], Any],
    public: PathLike,
    split: str,
    private: PathLike | None = None,
    questions_public: str | None = None,
) -> BlindResult:
    """Write a complete dataset with ``write_full(folder)`` into scratch, then split it."""
    pub = Path(public)
    pub.parent.mkdir(parents=True, exist_ok=True)
    scratch = scratch_dir(pub, "full")  # removed below; a killed run's by the next one
    try:
        write_full(scratch / "full")
        priv = private or default_private(pub)
        return make_blind(scratch / "full", pub, priv, split, questions_public)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
