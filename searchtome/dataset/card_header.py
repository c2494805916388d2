"""The dataset card's YAML header: licence ids, size category, ``configs``, and merging.

Facts derived from the data (``license``, ``size_categories``) are ours and always regenerated;
list keys are unioned (the user's entries first); ``configs`` are merged by ``config_name`` (a
user's config is never replaced, ours are added when missing, and a difference is noted); any
other key the user set is kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from searchtome.dataset.layout import (
    BOOKS_FILE,
    CORPUS_FILE,
    PARAGRAPHS_FILE,
    TOC_FILE,
    UNITS_FILE,
    qrels_file,
    queries_file,
)
from searchtome.dataset.loader import Dataset, load
from searchtome.dataset.manifest import DatasetManifest
from searchtome.io import PathLike
from searchtome.records import SPLITS

# Hugging Face licence identifiers we map free-text licence names onto.
_HF_IDS = {
    "cc-by-4.0",
    "cc-by-sa-4.0",
    "cc-by-nc-4.0",
    "cc-by-nc-sa-4.0",
    "cc-by-nd-4.0",
    "cc-by-nc-nd-4.0",
    "cc-by-3.0",
    "cc-by-sa-3.0",
    "cc-by-nc-3.0",
    "cc-by-nc-sa-3.0",
    "cc-by-nc-nd-3.0",
    "cc-by-2.0",
    "cc-by-2.5",
    "cc0-1.0",
    "gfdl",
    "mit",
    "apache-2.0",
}
_CC_WORDS = {
    "attribution": "by",
    "noncommercial": "nc",
    "sharealike": "sa",
    "noderivatives": "nd",
    "noderivs": "nd",
}
_CC_ORDER = ("by", "nc", "nd", "sa")

# Keys of our YAML header that are facts about the data: always regenerated. Who wrote the text
# and the labels is one of them: a card kept from an earlier build must not go on claiming
# experts for questions an LLM wrote.
_OWNED_KEYS = (
    "license",
    "size_categories",
    "source_datasets",
    "language_creators",
    "annotations_creators",
)
# List keys: the user's entries first, then ours.
_LIST_KEYS = (
    "language",
    "task_categories",
    "task_ids",
    "tags",
    "multilinguality",
)


def hf_license(name: str) -> str:
    """``"CC BY-NC-SA 4.0"`` (or its long form) → ``"cc-by-nc-sa-4.0"``; unknown → ``"other"``."""
    text = name.strip().lower()
    if text in _HF_IDS:
        return text
    text = text.replace("creative commons", "cc").replace("non-commercial", "noncommercial")
    text = text.replace("share-alike", "sharealike").replace("no-derivatives", "noderivatives")
    text = text.replace("no derivatives", "noderivatives").replace("public domain", "cc0 1.0")
    words = [_CC_WORDS.get(w, w) for w in re.split(r"[\s_/,()-]+", text) if w]
    words = [w for w in words if w not in ("international", "license", "licence", "unported")]
    if not words:
        return "other"
    if words[0] == "cc0":
        return "cc0-1.0"
    if words[0] == "cc":
        version = words[-1]
        parts = set(words[1:-1])
        if re.fullmatch(r"\d\.\d", version) and parts and parts <= set(_CC_ORDER):
            ident = "-".join(["cc", *(p for p in _CC_ORDER if p in parts), version])
            if ident in _HF_IDS:
                return ident
        return "other"
    ident = "-".join(words)
    return ident if ident in _HF_IDS else "other"


def size_category(n: int) -> str:
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if n < limit:
            return label
    return "1M<n<10M"


def configs_for(data_dir: PathLike) -> list[dict[str, Any]]:
    """The ``configs`` YAML entries for the files present in ``data_dir``.

    In the order the dataset viewer shows them, the order a reader needs them: the corpus and
    the queries, then the qrels that join them (``default``, what ``load_dataset`` reads
    without a config name), then the books, the ToC and the raw paragraphs and units.
    """
    root = Path(data_dir)
    configs: list[dict[str, Any]] = []
    single = [
        ("corpus", CORPUS_FILE),
        ("queries", None),
        ("default", None),
        ("books", BOOKS_FILE),
        ("toc", TOC_FILE),
        ("paragraphs", PARAGRAPHS_FILE),
        ("units", UNITS_FILE),
    ]
    for name, file in single:
        if name == "default":
            qrels = [s for s in SPLITS if (root / qrels_file(s)).is_file()]
            if qrels:
                configs.append(
                    {
                        "config_name": "default",
                        "data_files": [{"split": s, "path": qrels_file(s)} for s in qrels],
                    }
                )
        elif name == "queries":
            splits = [s for s in SPLITS if (root / queries_file(s)).is_file()]
            if splits:
                configs.append(
                    {
                        "config_name": "queries",
                        "data_files": [{"split": s, "path": queries_file(s)} for s in splits],
                    }
                )
        elif (root / file).is_file():
            configs.append({"config_name": name, "data_files": [{"split": name, "path": file}]})
    return configs + mteb_configs(root)


# Where `searchtome export mteb DATA --out DATA/mteb` puts MTEB's layout inside a dataset folder,
# so that one Hub repository serves `datasets` users (the configs above) and MTEB's loader (the
# `{book}-corpus` / `{book}-queries` / `{book}-qrels` configs, MTEB's column names).
MTEB_DIR = "mteb"


def mteb_configs(root: Path) -> list[dict[str, Any]]:
    """MTEB's per-book configs for an MTEB export in ``root/mteb``, paths relative to ``root``."""
    summary = root / MTEB_DIR / "searchtome-export.json"
    if not summary.is_file():
        return []
    import json

    written = json.loads(summary.read_text(encoding="utf-8"))
    splits = written.get("splits", SPLITS)
    configs = []
    for book in sorted(written.get("subsets", {})):
        here = f"{MTEB_DIR}/{book}"  # the files dataset/mteb_layout.py writes per book
        configs += [
            {
                "config_name": f"{book}-corpus",
                "data_files": [{"split": "corpus", "path": f"{here}/corpus.parquet"}],
            },
            {
                "config_name": f"{book}-queries",
                "data_files": [{"split": s, "path": f"{here}/queries/{s}.parquet"} for s in splits],
            },
            {
                "config_name": f"{book}-qrels",
                "data_files": [{"split": s, "path": f"{here}/qrels/{s}.parquet"} for s in splits],
            },
        ]
    return configs


def pretty_name(manifest: DatasetManifest, titles: Sequence[str], domains: Sequence[str]) -> str:
    """A name for people: ``SearchTome: The Whole Child: ... (reproduction's release)``."""
    what = titles[0] if len(titles) == 1 else f"{len(titles)} books in {len(domains)} domain(s)"
    imported = " (an independent reproduction's release)" if manifest.imported_from else ""
    blind = manifest.blind  # the public half's record (the private half is no dataset to name)
    held = f", {blind.split} gold held back" if blind is not None and not blind.private else ""
    return f"SearchTome: {what}{imported}{held}"


# A Hub dataset id: ORG/NAME, no scheme, no further path.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def source_datasets(manifest: DatasetManifest) -> list[str]:
    """The Hub's ``source_datasets``: ``extended|ORG/NAME`` when the data extends a dataset on
    the Hub, else ``original``. A release elsewhere (a Git repository's URL) is no Hub id; the
    card's text names it (*Attribution*, *How the data was made*)."""
    source = manifest.imported_from or ""
    if _HUB_ID.fullmatch(source.removeprefix("hf://").removeprefix("datasets/")):
        return [f"extended|{source.removeprefix('hf://').removeprefix('datasets/')}"]
    return ["original"]


def merge_configs(
    theirs: Sequence[Mapping[str, Any]] | None, ours: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Ours added where missing, theirs kept untouched; returns the list and what differed."""
    notes: list[str] = []
    merged: list[dict[str, Any]] = []
    theirs_by_name = {}
    for cfg in theirs or ():
        if not isinstance(cfg, Mapping) or "config_name" not in cfg:
            notes.append(f"kept a configs entry without config_name: {cfg!r}")
            merged.append(dict(cfg) if isinstance(cfg, Mapping) else cfg)  # type: ignore[arg-type]
            continue
        theirs_by_name[cfg["config_name"]] = cfg
    for cfg in ours:
        name = cfg["config_name"]
        if name in theirs_by_name:
            mine = theirs_by_name.pop(name)
            if _norm_files(mine.get("data_files")) != _norm_files(cfg["data_files"]):
                notes.append(
                    f"configs[{name}]: kept your data_files {mine.get('data_files')!r}; "
                    f"the generated ones would be {cfg['data_files']!r}"
                )
            merged.append(dict(mine))
        else:
            merged.append(dict(cfg))
    merged.extend(dict(c) for c in (theirs or ()) if c.get("config_name") in theirs_by_name)
    return merged, notes


def _norm_files(files: Any) -> Any:
    if isinstance(files, str):
        return [{"split": "train", "path": files}]
    if isinstance(files, Mapping):
        return [{"split": "train", "path": files.get("path")}]
    return [dict(f) if isinstance(f, Mapping) else f for f in files or ()]


def merge_metadata(
    theirs: Mapping[str, Any] | None, ours: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Merge two YAML headers (see the module docstring for the rules)."""
    theirs = dict(theirs or {})
    merged: dict[str, Any] = dict(theirs)
    notes: list[str] = []
    for key, value in ours.items():
        if key == "configs":
            merged["configs"], cfg_notes = merge_configs(theirs.get("configs"), value)
            notes.extend(cfg_notes)
        elif key in _OWNED_KEYS:
            if key in theirs and theirs[key] != value:
                notes.append(
                    f"{key}: {theirs[key]!r} replaced by {value!r} (derived from the data)"
                )
            merged[key] = value
        elif key in _LIST_KEYS:
            old = theirs.get(key)
            old_list = [old] if isinstance(old, str) else list(old or [])
            new = value if isinstance(value, list) else [value]
            merged[key] = old_list + [v for v in new if v not in old_list]
        elif key not in theirs:
            merged[key] = value
    return merged, notes


def hand_written(ds: Dataset) -> int:
    """Questions written by hand (``model_generated: false``), in the splits this folder holds.

    Counted from the rows, not the manifest: a blind release's public half keeps no
    ``hand_written_queries`` record, though its train and dev rows keep the flag.
    """
    return sum(1 for s in SPLITS for q in ds.queries(s) if not q.model_generated)


def annotation_creators(ds: Dataset) -> list[str]:
    """Who made the labels (the gold leaf of each question).

    Every generated question's gold is the ToC leaf of the paragraph it was generated from: a
    label made by the pipeline, ``machine-generated``. The reproduction's release adds a few
    questions written by hand by people whose expertise nobody recorded: ``other``, not
    ``expert-generated``; the card's text says which.
    """
    return ["machine-generated", "other"] if hand_written(ds) else ["machine-generated"]


# The text: the books' own (found); the questions: written by an LLM.
LANGUAGE_CREATORS = ["found", "machine-generated"]


def card_metadata(
    ds: Dataset, configs: list[dict[str, Any]], *, mteb: bool, pretty: str | None = None
) -> dict[str, Any]:
    """The YAML header of a card over ``ds`` with ``configs``; the ``mteb`` tag only where
    ``mteb`` says MTEB's loader can read the layout (its ``{book}-corpus`` configs)."""
    licenses = sorted({hf_license(ds.books[b].book.license) for b in ds.book_ids()}) or ["other"]
    total = sum(len(ds.queries(s)) for s in SPLITS)
    titles = [ds.books[b].book.title for b in ds.book_ids()]
    domains = sorted({ds.domain(b) for b in ds.book_ids()})
    tags = ["searchtome", "long-document-retrieval", "table-of-contents"]
    return {
        "pretty_name": pretty
        or ds.manifest.pretty_name
        or pretty_name(ds.manifest, titles, domains),
        "license": licenses[0] if len(licenses) == 1 else licenses,
        "language": ["en"],
        "multilinguality": ["monolingual"],
        "language_creators": list(LANGUAGE_CREATORS),
        "annotations_creators": annotation_creators(ds),
        # Built from the books' PDFs: "original"; extending a Hub dataset: "extended|ORG/NAME".
        "source_datasets": source_datasets(ds.manifest),
        "task_categories": ["text-retrieval"],
        "task_ids": ["document-retrieval"],
        "tags": [*tags, "mteb"] if mteb else tags,
        "size_categories": [size_category(total)],
        "configs": configs,
    }


def generated_metadata(data_dir: PathLike) -> dict[str, Any]:
    """Our YAML header for ``data_dir`` (tagged ``mteb`` when it holds an MTEB export)."""
    configs = configs_for(data_dir)
    return card_metadata(load(data_dir), configs, mteb=bool(mteb_configs(Path(data_dir))))
