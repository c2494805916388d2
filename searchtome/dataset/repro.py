"""Import an independent reproduction's release (``stair-rag-reproduction`` layout) as a dataset.

The release keeps one book under ``data/``::

    data/derived/{book}-toc-nodes.json          every ToC node (id, level, title, page, parent_id,
                                                path, is_leaf, is_retrieval_leaf)
    data/derived/{book}-retrieval-leaves.json   the nodes that are retrieval targets
    data/derived/{book}-sections.json           raw section text of each retrieval leaf
    data/derived/{book}-paragraphs.json         paragraphs ({leaf}-pNNN)
    data/derived/{book}-generation-units.json   merged paragraph groups ({leaf}-gNNN)
    data/splits/{book}/{train,dev,test}.jsonl   questions, with a manifest of their SHA-256
    data/retriever/{book}/manifest.json         (optional) hashes of the ToC and split manifest

Its ids (``whole-child-009``) are renumbered into ours (``whole-child/4.1.1``: 1-based position
among siblings, from the parent structure and node order) and the mapping is written to
``id_map.json``. Query ids and splits are kept as they are.

Nodes the release marks ``is_leaf`` but not ``is_retrieval_leaf`` (front and back matter such as
"Contents", "Glossary", "Media Attributions") stay in ``toc`` with ``is_leaf = False`` and are not
in ``corpus``. That keeps one invariant for every SearchTome dataset — a node is a leaf exactly
when it is a retrieval target — so the scorer's classes cannot disagree: an id in ``corpus`` is a
leaf, an id only in ``toc`` is *non-leaf*, anything else is *invalid*. The release's structural
flag is kept in ``id_map.json`` (``structural_leaf``) and in the manifest.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.dataset.layout import BookInfo, write_dataset, write_manifest
from searchtome.errors import SearchTomeError
from searchtome.io import (
    PathLike,
    atomic_dir,
    commit_dir,
    read_json,
    read_jsonl,
    sha256_file,
    write_json,
)
from searchtome.records import (
    BOOK_ID_RE,
    SPLITS,
    Book,
    Leaf,
    Paragraph,
    Query,
    TocNode,
    Unit,
    node_id,
)
from searchtome.version import __version__

log = logging.getLogger(__name__)

ID_MAP_FILE = "id_map.json"
REPRO_FORMAT = "stair-rag-reproduction"
_DEFAULT_REPOSITORY = "https://github.com/NaveenGali11/stair-rag-reproduction"
# Used only when neither the packaged catalog nor the release names the book's domain.
_KNOWN_DOMAINS = {"whole-child": "Education"}
_CC_URLS = {
    "CC BY 4.0": "https://creativecommons.org/licenses/by/4.0/",
    "CC BY-SA 4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "CC BY-NC 4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "CC BY-NC-SA 4.0": "https://creativecommons.org/licenses/by-nc-sa/4.0/",
}


@dataclass
class ImportResult:
    """What an import wrote, for the CLI summary and the tests."""

    out_dir: Path
    book_id: str
    n_nodes: int
    n_leaves: int
    n_paragraphs: int
    n_units: int
    queries: dict[str, int]
    non_retrieval_leaves: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# -- locating and verifying the release ------------------------------------------------------------
def _data_root(src: Path) -> Path:
    for cand in (src / "data", src):
        if (cand / "derived").is_dir() and (cand / "splits").is_dir():
            return cand
    raise SearchTomeError(
        f"{src}: not a reproduction release (expected data/derived/ and data/splits/ inside); "
        "pass the folder that holds data/"
    )


def _find_book(data: Path, book: str | None) -> str:
    books = sorted(p.name for p in (data / "splits").iterdir() if p.is_dir())
    if book is not None:
        if book not in books:
            from searchtome.errors import unknown_name

            raise unknown_name(f"book in {data / 'splits'}", book, books)
        return book
    if len(books) != 1:
        raise SearchTomeError(
            f"{data / 'splits'}: holds {len(books)} books ({', '.join(books) or 'none'}); "
            "choose one with --book"
        )
    return books[0]


class _Reader:
    """Reads release files and remembers the SHA-256 of each one (provenance)."""

    def __init__(self, root: Path, data: Path) -> None:
        self.root, self.data = root, data
        self.hashes: dict[str, str] = {}

    def key(self, rel: str) -> str:
        """``rel`` (inside data/) as a path relative to the release root."""
        return (self.data / rel).relative_to(self.root).as_posix()

    def path(self, rel: str) -> Path:
        path = self.data / rel
        if not path.is_file():
            raise SearchTomeError(f"{path}: missing from the release; the import needs it")
        return path

    def _record(self, path: Path) -> None:
        self.hashes[path.relative_to(self.root).as_posix()] = sha256_file(path)

    def json(self, rel: str) -> Any:
        path = self.path(rel)
        self._record(path)
        return read_json(path)

    def jsonl(self, rel: str) -> list[dict[str, Any]]:
        path = self.path(rel)
        self._record(path)
        return list(read_jsonl(path))

    def text(self, rel: str) -> str | None:
        path = self.root / rel
        if not path.is_file():
            return None
        self._record(path)
        return path.read_text(encoding="utf-8")


def _check_hash(reader: _Reader, rel: str, expected: str | None, what: str) -> str:
    path = reader.path(rel)
    actual = sha256_file(path)
    if expected is None:
        return "unrecorded"
    if actual != expected:
        raise SearchTomeError(
            f"{path}: SHA-256 {actual} does not match {expected} recorded in {what}; "
            "the release is modified or incomplete — fetch it again"
        )
    return "verified"


# -- book metadata ---------------------------------------------------------------------------------
def _manifest_fields(text: str | None) -> dict[str, str]:
    """``- Key: value`` lines of the release's MANIFEST.md (first book section)."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        m = re.match(r"^\s*-\s*([A-Za-z0-9 -]+):\s*(.+?)\s*$", line)
        if m and m.group(1) not in out:
            out[m.group(1).strip()] = m.group(2).strip().strip("*`").strip()
    return out


def _fallback_book(book_id: str, fields: Mapping[str, str], domain: str | None) -> Book:
    domain = domain or _KNOWN_DOMAINS.get(book_id)
    if not domain:
        raise SearchTomeError(
            f"book {book_id!r} is neither in the packaged catalog nor a known release; "
            "give its domain with --domain"
        )
    authors = tuple(a.strip() for a in re.split(r",| and ", fields.get("Authors", "")) if a.strip())
    license_ = fields.get("License", "")
    source = fields.get("Source", "")
    return Book(
        book_id=book_id,
        domain=domain,
        title=fields.get("Title", book_id),
        authors=authors,
        publisher=fields.get("Publisher", ""),
        landing_url=source,
        sha256=fields.get("SHA-256") or None,
        license=license_,
        license_url=_CC_URLS.get(license_, ""),
        notes="metadata from the reproduction's data/MANIFEST.md (book not in the catalog)",
    )


def _book_metadata(
    book_id: str, fields: Mapping[str, str], domain: str | None, warnings: list[str]
) -> Book:
    book: Book | None = None
    try:
        from searchtome.ingest.catalog import (
            load_catalog,  # written by the catalog owner; optional here
        )
    except ImportError:
        log.info("no packaged catalog yet; using the release's MANIFEST.md for %s", book_id)
    else:
        catalog = load_catalog()
        if book_id in catalog.ids():
            book = catalog.get(book_id)
    if book is None:
        book = _fallback_book(book_id, fields, domain)
    elif domain and domain != book.domain:
        raise SearchTomeError(
            f"--domain {domain!r} contradicts the catalog, which files {book_id!r} under "
            f"{book.domain!r}"
        )
    release_sha = fields.get("SHA-256")
    if release_sha and book.sha256 and release_sha != book.sha256:
        warnings.append(
            f"the release was built from a PDF with SHA-256 {release_sha}, "
            f"the catalog pins {book.sha256}"
        )
    return book


# -- conversion ------------------------------------------------------------------------------------
def _ordinals(book_id: str, nodes: list[dict[str, Any]], path: Path) -> dict[str, str]:
    """Their node id → ours, from parent links and document order; the tree is checked."""
    ours: dict[str, str] = {}
    children: dict[str | None, int] = defaultdict(int)
    ordinal: dict[str | None, tuple[int, ...]] = {None: ()}
    level: dict[str | None, int] = {None: 0}
    titles: dict[str | None, list[str]] = {None: []}
    for node in nodes:
        nid, parent = node["id"], node.get("parent_id")
        if nid in ours:
            raise SearchTomeError(f"{path}: node {nid} occurs twice")
        if parent not in ordinal:
            raise SearchTomeError(
                f"{path}: node {nid} names parent {parent!r}, which is not an earlier node"
            )
        if node["level"] != level[parent] + 1:
            raise SearchTomeError(
                f"{path}: node {nid} has level {node['level']}, its parent level {level[parent]}"
            )
        if list(node["path"]) != [*titles[parent], node["title"]]:
            raise SearchTomeError(f"{path}: node {nid}: path does not extend its parent's path")
        children[parent] += 1
        ordinal[nid] = (*ordinal[parent], children[parent])
        level[nid] = node["level"]
        titles[nid] = list(node["path"])
        ours[nid] = node_id(book_id, ordinal[nid])
    return ours


def _numbered(items: list[dict[str, Any]], suffix: str, path: Path) -> dict[str, int]:
    """Their ``{leaf}-p003`` → 3, checking that each leaf's items are numbered 1, 2, 3, …"""
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for item in items:
        leaf, _, num = item["id"].rpartition(f"-{suffix}")
        if leaf != item["leaf_id"] or not num.isdigit():
            raise SearchTomeError(f"{path}: id {item['id']!r} is not {item['leaf_id']}-{suffix}N")
        seen[leaf] += 1
        if int(num) != seen[leaf]:
            raise SearchTomeError(
                f"{path}: {item['id']} is out of order (expected number {seen[leaf]})"
            )
        out[item["id"]] = seen[leaf]
    return out


def import_repro(
    src: PathLike,
    out_dir: PathLike,
    *,
    book: str | None = None,
    domain: str | None = None,
    repository: str | None = None,
    write_card: bool = True,
) -> ImportResult:
    """Convert the release in ``src`` into a SearchTome dataset folder ``out_dir`` (atomically)."""
    src = Path(src).resolve()
    out = Path(out_dir)
    data = _data_root(src)
    root = data.parent if data != src else src
    book_id = _find_book(data, book)
    if not BOOK_ID_RE.match(book_id):
        raise SearchTomeError(f"{data / 'splits' / book_id}: {book_id!r} is not a usable book id")
    if out.exists() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise SearchTomeError(
            f"{out}: exists, is not empty and is not a SearchTome dataset; "
            "choose another --out (an existing dataset folder is replaced)"
        )
    reader = _Reader(root, data)
    warnings: list[str] = []

    # Split files first: nothing is converted from an unverified release.
    split_manifest_rel = f"splits/{book_id}/manifest.json"
    split_manifest = reader.json(split_manifest_rel)
    recorded = split_manifest.get("split_sha256") or {}
    verification: dict[str, str] = {}
    for split in SPLITS:
        if split not in recorded:
            raise SearchTomeError(
                f"{data / split_manifest_rel}: no SHA-256 recorded for split {split!r}; "
                "the split files cannot be verified"
            )
        rel = f"splits/{book_id}/{split}.jsonl"
        verification[reader.key(rel)] = _check_hash(
            reader, rel, recorded[split], f"{data / split_manifest_rel} (split_sha256)"
        )
    units_rel = f"derived/{book_id}-generation-units.json"
    verification[reader.key(units_rel)] = _check_hash(
        reader,
        units_rel,
        split_manifest.get("source_units_sha256"),
        f"{data / split_manifest_rel} (source_units_sha256)",
    )
    nodes_rel = f"derived/{book_id}-toc-nodes.json"
    retriever_rel = f"retriever/{book_id}/manifest.json"
    if (data / retriever_rel).is_file():
        retriever = reader.json(retriever_rel)
        verification[reader.key(nodes_rel)] = _check_hash(
            reader,
            nodes_rel,
            retriever.get("source_nodes_sha256"),
            f"{data / retriever_rel} (source_nodes_sha256)",
        )
        verification[reader.key(split_manifest_rel)] = _check_hash(
            reader,
            split_manifest_rel,
            retriever.get("source_split_manifest_sha256"),
            f"{data / retriever_rel} (source_split_manifest_sha256)",
        )

    nodes_path = reader.path(nodes_rel)
    nodes = reader.json(nodes_rel)
    retrieval = reader.json(f"derived/{book_id}-retrieval-leaves.json")
    sections = reader.json(f"derived/{book_id}-sections.json")
    paragraphs_raw = reader.json(f"derived/{book_id}-paragraphs.json")
    units_raw = reader.json(units_rel)
    questions = {s: reader.jsonl(f"splits/{book_id}/{s}.jsonl") for s in SPLITS}
    removals_rel = f"derived/{book_id}-generation-removals.json"
    removals = reader.json(removals_rel) if (data / removals_rel).is_file() else []

    manifest_md = reader.text("data/MANIFEST.md")
    fields = _manifest_fields(manifest_md)
    source_md = reader.text("SOURCE.md") or ""
    if repository is None:
        m = re.search(r"https://github\.com/[\w.-]+/[\w.-]+", source_md)
        repository = m.group(0) if m else _DEFAULT_REPOSITORY
    reader.text("DATA_LICENSE.md")
    catalog_book = _book_metadata(book_id, fields, domain, warnings)

    # ToC.
    ids = _ordinals(book_id, nodes, nodes_path)
    retrieval_ids = [n["id"] for n in nodes if n.get("is_retrieval_leaf")]
    if sorted(retrieval_ids) != sorted(n["id"] for n in retrieval):
        raise SearchTomeError(
            f"{data / f'derived/{book_id}-retrieval-leaves.json'}: does not list exactly the "
            f"nodes marked is_retrieval_leaf in {nodes_path.name}"
        )
    has_children = {n.get("parent_id") for n in nodes}
    for n in nodes:
        if n.get("is_retrieval_leaf") and (not n.get("is_leaf") or n["id"] in has_children):
            raise SearchTomeError(f"{nodes_path}: retrieval leaf {n['id']} has children")
    is_target = set(retrieval_ids)
    toc = [
        TocNode(
            node_id=ids[n["id"]],
            book_id=book_id,
            title=n["title"],
            level=int(n["level"]),
            page=n.get("page"),
            parent_id=ids[n["parent_id"]] if n.get("parent_id") else None,
            is_leaf=n["id"] in is_target,
            path=tuple(n["path"]),
        )
        for n in nodes
    ]
    excluded = [n for n in nodes if n.get("is_leaf") and n["id"] not in is_target]

    # Paragraphs and units, renumbered within each leaf.
    para_path = reader.path(f"derived/{book_id}-paragraphs.json")
    unit_path = reader.path(units_rel)
    for item, where in [(p, para_path) for p in paragraphs_raw] + [
        (u, unit_path) for u in units_raw
    ]:
        if item["leaf_id"] not in is_target:
            raise SearchTomeError(f"{where}: {item['id']} belongs to {item['leaf_id']}, not a leaf")
    para_num = _numbered(paragraphs_raw, "p", para_path)
    unit_num = _numbered(units_raw, "g", unit_path)
    para_ids = {pid: f"{ids[pid.rpartition('-p')[0]]}#p{n}" for pid, n in para_num.items()}
    unit_ids = {uid: f"{ids[uid.rpartition('-g')[0]]}#u{n}" for uid, n in unit_num.items()}
    paragraphs = [
        Paragraph(para_ids[p["id"]], ids[p["leaf_id"]], p["text"], p.get("page_start"))
        for p in paragraphs_raw
    ]
    units = []
    for u in units_raw:
        missing = [p for p in u["source_paragraph_ids"] if p not in para_ids]
        if missing:
            raise SearchTomeError(f"{unit_path}: {u['id']} names unknown paragraphs {missing}")
        units.append(
            Unit(
                unit_ids[u["id"]],
                ids[u["leaf_id"]],
                book_id,
                tuple(para_ids[p] for p in u["source_paragraph_ids"]),
                u["text"],
            )
        )

    # Leaves: the raw section text; pages from the section start to its last paragraph.
    last_page: dict[str, int] = {}
    for p in paragraphs_raw:
        end = p.get("page_end") or p.get("page_start")
        if end is not None:
            last_page[p["leaf_id"]] = max(end, last_page.get(p["leaf_id"], end))
    by_id = {n["id"]: n for n in nodes}
    section_ids = [s["id"] for s in sections]
    if sorted(section_ids) != sorted(is_target):
        raise SearchTomeError(
            f"{reader.path(f'derived/{book_id}-sections.json')}: sections do not match the "
            "retrieval leaves one to one"
        )
    leaves = []
    for s in sections:
        node = by_id[s["id"]]
        start = node.get("page")
        end = max(x for x in (start, last_page.get(s["id"])) if x is not None) if start else None
        leaves.append(
            Leaf(ids[s["id"]], book_id, tuple(node["path"]), node["title"], s["text"], start, end)
        )

    # Queries: ids and splits unchanged, gold leaf and unit renamed.
    queries = []
    hand_written, constrained = [], {}
    for split, rows in questions.items():
        qfile = reader.path(f"splits/{book_id}/{split}.jsonl")
        for lineno, q in enumerate(rows, 1):
            where = f"{qfile}:{lineno}"
            if q.get("split") != split:
                raise SearchTomeError(f"{where}: split {q.get('split')!r} in the {split} file")
            gold = q["gold_leaf_id"]
            if gold not in is_target:
                raise SearchTomeError(f"{where}: gold leaf {gold!r} is not a retrieval leaf")
            if q.get("gold_path") and list(q["gold_path"]) != list(by_id[gold]["path"]):
                raise SearchTomeError(f"{where}: gold_path differs from the ToC path of {gold}")
            unit = q.get("source_unit_id")
            if unit is not None and unit not in unit_ids:
                raise SearchTomeError(f"{where}: unknown source_unit_id {unit!r}")
            model_generated = bool(q.get("model_generated", True))
            if not model_generated:
                hand_written.append(q["id"])
            if q.get("split_constraint"):
                constrained[q["id"]] = q["split_constraint"]
            queries.append(
                Query(
                    query_id=q["id"],
                    book_id=book_id,
                    text=q["query"],
                    leaf_id=ids[gold],
                    split=split,
                    unit_id=unit_ids[unit] if unit else None,
                    model_generated=model_generated,
                )
            )

    generation = _generation_info(questions, removals, split_manifest)
    counts = {s: len(questions[s]) for s in SPLITS}
    info = {
        "name": f"searchtome-{book_id}-repro",
        "description": (
            f"{catalog_book.title}: the SearchTome book released by an independent reproduction, "
            "converted to the SearchTome dataset layout."
        ),
        "searchtome_version": __version__,
        "books": [book_id],
        "generation": generation,
        "split": {
            "rule": f"grouped by generation unit ({split_manifest.get('algorithm_version', '?')})",
            "seed": split_manifest.get("seed"),
            "group_key": split_manifest.get("group_key"),
            "counts": counts,
            "unit_counts": split_manifest.get("actual_unit_counts"),
            "leaf_coverage": split_manifest.get("leaf_coverage"),
            "constraints": split_manifest.get("constraints"),
            "paper_reference_counts": split_manifest.get("paper_reference_counts"),
        },
        "source": {
            "kind": REPRO_FORMAT,
            "repository": repository,
            "license": fields.get("License") or catalog_book.license,
            "book_sha256": fields.get("SHA-256"),
            "files": dict(sorted(reader.hashes.items())),
            "verification": dict(sorted(verification.items())),
        },
        "id_map": ID_MAP_FILE,
        "leaf_text": "raw PDF text of each section as released (running headers/footers kept)",
        "non_retrieval_leaves": [
            {"node_id": ids[n["id"]], "source_id": n["id"], "title": n["title"]} for n in excluded
        ],
        "hand_written_queries": sorted(hand_written),
        "split_constraints": dict(sorted(constrained.items())),
        "warnings": warnings,
    }
    id_map = {
        "source": f"{repository} ({book_id})",
        "nodes": {
            n["id"]: {
                "id": ids[n["id"]],
                "title": n["title"],
                "retrieval_leaf": n["id"] in is_target,
                "structural_leaf": bool(n.get("is_leaf")),
            }
            for n in nodes
        },
        "paragraphs": para_ids,
        "units": unit_ids,
    }

    n_pages = int(fields["Page count"]) if fields.get("Page count", "").isdigit() else None
    tmp = atomic_dir(out)
    try:
        write_dataset(
            tmp,
            books=[BookInfo(catalog_book, n_pages=n_pages, toc_source="outline")],
            toc=toc,
            leaves=leaves,
            queries=queries,
            paragraphs=paragraphs,
            units=units,
        )
        write_json(tmp / ID_MAP_FILE, id_map)
        write_manifest(tmp, info)
        if write_card:
            from searchtome.dataset.card import write_card as _write_card

            _write_card(tmp)
        commit_dir(tmp, out)
    except BaseException:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for w in warnings:
        log.warning("%s", w)
    return ImportResult(
        out_dir=out,
        book_id=book_id,
        n_nodes=len(toc),
        n_leaves=len(leaves),
        n_paragraphs=len(paragraphs),
        n_units=len(units),
        queries=counts,
        non_retrieval_leaves=[ids[n["id"]] for n in excluded],
        warnings=warnings,
    )


def _generation_info(
    questions: Mapping[str, list[dict[str, Any]]],
    removals: list[dict[str, Any]],
    split_manifest: Mapping[str, Any],
) -> dict[str, Any]:
    """The generation settings the questions record (one value each, or every value seen)."""
    rows = [q for split in SPLITS for q in questions[split]]

    def values(key: str) -> Any:
        seen = sorted({str(q.get(key)) for q in rows if q.get(key) is not None})
        if not seen:
            return None
        if len(seen) == 1:
            first = next(q[key] for q in rows if q.get(key) is not None)
            return first
        return seen

    reasons: dict[str, int] = defaultdict(int)
    for r in removals:
        reasons[r.get("reason", "unknown")] += 1
    return {
        "model": values("generation_model_id"),
        "model_revision": values("generation_model_revision"),
        "model_family": "Mixtral-8x7B-Instruct (AWQ quantized)",
        "endpoint_kind": "not recorded in the release",
        "prompt_version": values("generation_prompt_version"),
        "seed": values("generation_seed"),
        "questions_generated": split_manifest.get("total_questions", len(rows)),
        "units": split_manifest.get("total_units"),
        "filters": {
            "paragraphs removed before unit building": dict(sorted(reasons.items())),
        },
        "hand_written": sum(1 for q in rows if not q.get("model_generated", True)),
    }
