"""Import an independent reproduction's release (``stair-rag-reproduction`` layout) as a dataset.

Reading and verifying the release is :mod:`searchtome.dataset.repro_release`; this module converts
its records. Its ids (``whole-child-009``) are renumbered into ours (``whole-child/4.1.1``: 1-based
position among siblings, from the parent structure and node order) and the mapping is written to
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
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.dataset.card import write_card as write_dataset_card
from searchtome.dataset.layout import BookInfo, write_dataset, write_manifest
from searchtome.dataset.manifest import (
    DatasetManifest,
    NonRetrievalLeaf,
    ReleaseGeneration,
    ReleaseSplit,
    Source,
)
from searchtome.dataset.repro_release import (
    Release,
    ReleaseSplitRecord,
    book_metadata,
    data_root,
    find_book,
    read_release,
)
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, staged_dir, write_json
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


@dataclass
class _Converted:
    """The release's records in our ids, plus what the manifest and id map report about them."""

    ids: dict[str, str]  # their node id -> ours
    targets: set[str]  # their ids of the retrieval leaves
    toc: list[TocNode]
    excluded: list[dict[str, Any]]  # structural leaves that are not retrieval targets
    para_ids: dict[str, str] = field(default_factory=dict)
    unit_ids: dict[str, str] = field(default_factory=dict)
    paragraphs: list[Paragraph] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    leaves: list[Leaf] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    hand_written: list[str] = field(default_factory=list)
    constrained: dict[str, Any] = field(default_factory=dict)


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
    data = data_root(src)
    root = data.parent if data != src else src
    book_id = find_book(data, book)
    if not BOOK_ID_RE.match(book_id):
        raise SearchTomeError(f"{data / 'splits' / book_id}: {book_id!r} is not a usable book id")
    if out.exists() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise SearchTomeError(
            f"{out}: exists, is not empty and is not a SearchTome dataset; "
            "choose another --out (an existing dataset folder is replaced)"
        )
    release = read_release(root, data, book_id, repository)
    warnings: list[str] = []
    catalog_book = book_metadata(book_id, release.fields, domain, warnings)

    conv = _convert_toc(release)
    _convert_paragraphs_and_units(release, conv)
    _convert_leaves(release, conv)
    _convert_queries(release, conv)

    fields = release.fields
    n_pages = int(fields["Page count"]) if fields.get("Page count", "").isdigit() else None
    _write(
        out,
        BookInfo(catalog_book, n_pages=n_pages, toc_source="outline"),
        conv,
        id_map=_id_map(release, conv),
        info=_manifest_info(release, catalog_book, conv, warnings),
        card=write_card,
    )
    for w in warnings:
        log.warning("%s", w)
    return ImportResult(
        out_dir=out,
        book_id=book_id,
        n_nodes=len(conv.toc),
        n_leaves=len(conv.leaves),
        n_paragraphs=len(conv.paragraphs),
        n_units=len(conv.units),
        queries={s: len(release.questions[s]) for s in SPLITS},
        non_retrieval_leaves=[conv.ids[n["id"]] for n in conv.excluded],
        warnings=warnings,
    )


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


def _convert_toc(release: Release) -> _Converted:
    """Every node in our ids; only retrieval leaves are leaves, and they may not have children."""
    nodes, book_id = release.nodes, release.book_id
    nodes_path = release.path("toc-nodes")
    ids = _ordinals(book_id, nodes, nodes_path)
    retrieval_ids = [n["id"] for n in nodes if n.get("is_retrieval_leaf")]
    if sorted(retrieval_ids) != sorted(n["id"] for n in release.retrieval):
        raise SearchTomeError(
            f"{release.reader.data / f'derived/{book_id}-retrieval-leaves.json'}: does not list "
            f"exactly the nodes marked is_retrieval_leaf in {nodes_path.name}"
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
    return _Converted(ids=ids, targets=is_target, toc=toc, excluded=excluded)


def _convert_paragraphs_and_units(release: Release, conv: _Converted) -> None:
    """Paragraphs and units of retrieval leaves, renumbered within each leaf."""
    ids = conv.ids
    para_path = release.path("paragraphs")
    unit_path = release.path("generation-units")
    items = [(p, para_path) for p in release.paragraphs] + [(u, unit_path) for u in release.units]
    for item, where in items:
        if item["leaf_id"] not in conv.targets:
            raise SearchTomeError(f"{where}: {item['id']} belongs to {item['leaf_id']}, not a leaf")
    para_num = _numbered(release.paragraphs, "p", para_path)
    unit_num = _numbered(release.units, "g", unit_path)
    conv.para_ids = {pid: f"{ids[pid.rpartition('-p')[0]]}#p{n}" for pid, n in para_num.items()}
    conv.unit_ids = {uid: f"{ids[uid.rpartition('-g')[0]]}#u{n}" for uid, n in unit_num.items()}
    conv.paragraphs = [
        Paragraph(conv.para_ids[p["id"]], ids[p["leaf_id"]], p["text"], p.get("page_start"))
        for p in release.paragraphs
    ]
    for u in release.units:
        missing = [p for p in u["source_paragraph_ids"] if p not in conv.para_ids]
        if missing:
            raise SearchTomeError(f"{unit_path}: {u['id']} names unknown paragraphs {missing}")
        conv.units.append(
            Unit(
                conv.unit_ids[u["id"]],
                ids[u["leaf_id"]],
                release.book_id,
                tuple(conv.para_ids[p] for p in u["source_paragraph_ids"]),
                u["text"],
            )
        )


def _convert_leaves(release: Release, conv: _Converted) -> None:
    """Leaves: the raw section text; pages from the section start to its last paragraph."""
    last_page: dict[str, int] = {}
    for p in release.paragraphs:
        end = p.get("page_end") or p.get("page_start")
        if end is not None:
            last_page[p["leaf_id"]] = max(end, last_page.get(p["leaf_id"], end))
    by_id = {n["id"]: n for n in release.nodes}
    section_ids = [s["id"] for s in release.sections]
    if sorted(section_ids) != sorted(conv.targets):
        raise SearchTomeError(
            f"{release.path('sections')}: sections do not match the retrieval leaves one to one"
        )
    for s in release.sections:
        node = by_id[s["id"]]
        start = node.get("page")
        end = max(x for x in (start, last_page.get(s["id"])) if x is not None) if start else None
        conv.leaves.append(
            Leaf(
                conv.ids[s["id"]],
                release.book_id,
                tuple(node["path"]),
                node["title"],
                s["text"],
                start,
                end,
            )
        )


def _convert_queries(release: Release, conv: _Converted) -> None:
    """Queries: ids and splits unchanged, gold leaf and unit renamed; each row is checked."""
    by_id = {n["id"]: n for n in release.nodes}
    for split, rows in release.questions.items():
        qfile = release.split_path(split)
        for lineno, q in enumerate(rows, 1):
            where = f"{qfile}:{lineno}"
            if q.get("split") != split:
                raise SearchTomeError(f"{where}: split {q.get('split')!r} in the {split} file")
            gold = q["gold_leaf_id"]
            if gold not in conv.targets:
                raise SearchTomeError(f"{where}: gold leaf {gold!r} is not a retrieval leaf")
            if q.get("gold_path") and list(q["gold_path"]) != list(by_id[gold]["path"]):
                raise SearchTomeError(f"{where}: gold_path differs from the ToC path of {gold}")
            unit = q.get("source_unit_id")
            if unit is not None and unit not in conv.unit_ids:
                raise SearchTomeError(f"{where}: unknown source_unit_id {unit!r}")
            model_generated = bool(q.get("model_generated", True))
            if not model_generated:
                conv.hand_written.append(q["id"])
            if q.get("split_constraint"):
                conv.constrained[q["id"]] = q["split_constraint"]
            conv.queries.append(
                Query(
                    query_id=q["id"],
                    book_id=release.book_id,
                    text=q["query"],
                    leaf_id=conv.ids[gold],
                    split=split,
                    unit_id=conv.unit_ids[unit] if unit else None,
                    model_generated=model_generated,
                )
            )


# -- what is written -------------------------------------------------------------------------------
def _manifest_info(
    release: Release, catalog_book: Book, conv: _Converted, warnings: list[str]
) -> DatasetManifest:
    """The manifest's build information: generation, split rule, provenance, exclusions."""
    split_manifest, fields = release.split_manifest, release.fields
    book_id = release.book_id
    return DatasetManifest(
        name=f"searchtome-{book_id}-repro",
        description=(
            f"{catalog_book.title}: the SearchTome book released by an independent reproduction, "
            "converted to the SearchTome dataset layout."
        ),
        searchtome_version=__version__,
        books=(book_id,),
        generation=_generation_info(release.questions, release.removals, split_manifest),
        split=ReleaseSplit(
            rule=f"grouped by generation unit ({split_manifest.algorithm_version})",
            seed=split_manifest.seed,
            group_key=split_manifest.group_key,
            counts={s: len(release.questions[s]) for s in SPLITS},
            unit_counts=split_manifest.actual_unit_counts,
            leaf_coverage=split_manifest.leaf_coverage,
            constraints=split_manifest.constraints,
            paper_reference_counts=split_manifest.paper_reference_counts,
        ),
        source=Source(
            kind=REPRO_FORMAT,
            repository=release.repository,
            license=fields.get("License") or catalog_book.license,
            book_sha256=fields.get("SHA-256"),
            files=dict(sorted(release.reader.hashes.items())),
            verification=dict(sorted(release.verification.items())),
        ),
        id_map=ID_MAP_FILE,
        leaf_text="raw PDF text of each section as released (running headers/footers kept)",
        non_retrieval_leaves=tuple(
            NonRetrievalLeaf(node_id=conv.ids[n["id"]], source_id=n["id"], title=n["title"])
            for n in conv.excluded
        ),
        hand_written_queries=tuple(sorted(conv.hand_written)),
        split_constraints=dict(sorted(conv.constrained.items())),
        warnings=tuple(warnings),
    )


def _id_map(release: Release, conv: _Converted) -> dict[str, Any]:
    """Their ids -> ours, for nodes (with both leaf flags), paragraphs and units."""
    return {
        "source": f"{release.repository} ({release.book_id})",
        "nodes": {
            n["id"]: {
                "id": conv.ids[n["id"]],
                "title": n["title"],
                "retrieval_leaf": n["id"] in conv.targets,
                "structural_leaf": bool(n.get("is_leaf")),
            }
            for n in release.nodes
        },
        "paragraphs": conv.para_ids,
        "units": conv.unit_ids,
    }


def _write(
    out: Path,
    book: BookInfo,
    conv: _Converted,
    *,
    id_map: Mapping[str, Any],
    info: DatasetManifest,
    card: bool,
) -> None:
    """Write the dataset into a temporary folder, then swap it in; nothing half-written stays."""
    with staged_dir(out) as tmp:
        write_dataset(
            tmp,
            books=[book],
            toc=conv.toc,
            leaves=conv.leaves,
            queries=conv.queries,
            paragraphs=conv.paragraphs,
            units=conv.units,
        )
        write_json(tmp / ID_MAP_FILE, id_map)
        write_manifest(tmp, info)
        if card:
            write_dataset_card(tmp)


def _generation_info(
    questions: Mapping[str, list[dict[str, Any]]],
    removals: list[dict[str, Any]],
    split_manifest: ReleaseSplitRecord,
) -> ReleaseGeneration:
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
    return ReleaseGeneration(
        model=values("generation_model_id"),
        model_revision=values("generation_model_revision"),
        model_family="Mixtral-8x7B-Instruct (AWQ quantized)",
        endpoint_kind="not recorded in the release",
        prompt_version=values("generation_prompt_version"),
        seed=values("generation_seed"),
        questions_generated=(
            len(rows) if split_manifest.total_questions is None else split_manifest.total_questions
        ),
        units=split_manifest.total_units,
        filters={"paragraphs removed before unit building": dict(sorted(reasons.items()))},
        hand_written=sum(1 for q in rows if not q.get("model_generated", True)),
    )
