"""The dataset card: generated content, merging with a user's card, and datasets.load_dataset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from searchtome.dataset.card import BEGIN, END, build_card, write_card
from searchtome.dataset.card_header import hf_license, size_category
from searchtome.dataset.layout import verify_manifest, write_manifest
from searchtome.dataset.loader import load
from searchtome.io import read_json
from searchtome.records import SPLITS
from tests.conftest import PEER


@pytest.fixture
def data(tiny_dataset: Path, tmp_path: Path) -> Path:
    out = tmp_path / "data"
    shutil.copytree(tiny_dataset, out)
    return out


def _header(card: str) -> dict:
    _, head, _ = card.split("---\n", 2)
    return yaml.safe_load(head)


@pytest.fixture
def offline_datasets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return tmp_path / "hf-datasets-cache"


def test_load_dataset_configs_work_unchanged(data: Path, offline_datasets: Path) -> None:
    from datasets import load_dataset

    write_card(data)
    ds = load(data)
    kw = {"cache_dir": str(offline_datasets)}
    corpus = load_dataset(str(data), "corpus", split="corpus", **kw)
    assert corpus.num_rows == len(ds.leaves())
    assert corpus[0]["leaf_id"] == ds.leaves()[0].leaf_id
    queries = load_dataset(str(data), "queries", **kw)
    assert {s: queries[s].num_rows for s in queries} == {s: len(ds.queries(s)) for s in SPLITS}
    qrels = load_dataset(str(data), "default", split="test", **kw)
    assert qrels.column_names == ["query-id", "corpus-id", "score"]
    assert {r["query-id"]: r["corpus-id"] for r in qrels} == {
        q.query_id: q.leaf_id for q in ds.queries("test")
    }
    assert set(load_dataset(str(data), **kw)) == set(SPLITS)  # no name → "default" (qrels)
    books = load_dataset(str(data), "books", split="books", **kw)
    assert books["book_id"] == ["alpha-bio", "beta-law"]
    toc = load_dataset(str(data), "toc", split="toc", **kw)
    assert toc.num_rows == sum(len(ds.toc(b)) for b in ds.book_ids())
    assert not all(toc["is_leaf"])
    for name in ("paragraphs", "units"):
        assert load_dataset(str(data), name, split=name, **kw).num_rows > 0


def test_generated_content(data: Path) -> None:
    card = write_card(data).read_text()
    meta = _header(card)
    assert meta["license"] == ["cc-by-4.0", "cc-by-nc-sa-4.0"]
    assert meta["task_categories"] == ["text-retrieval"]
    assert meta["annotations_creators"] == ["machine-generated"]
    assert meta["source_datasets"] == ["original"] and meta["size_categories"] == ["n<1K"]
    # the viewer's order: what is retrieved and what is asked before the qrels joining them
    assert [c["config_name"] for c in meta["configs"]] == [
        "corpus",
        "queries",
        "default",
        "books",
        "toc",
        "paragraphs",
        "units",
    ]
    ds = load(data)
    # Books table with licence and restrictions; counts per domain and split.
    assert "| `beta-law` | Beta Law | Law | CC BY-NC-SA 4.0 | no-llm-training |" in card
    law = [ln for ln in card.splitlines() if ln.startswith("| Law |")]
    law_counts = [len(ds.queries(s, "beta-law")) for s in SPLITS]
    assert law == [
        f"| Law | 1 | {len(ds.leaves('beta-law'))} | " + " | ".join(map(str, law_counts)) + " |"
    ]
    assert "non-commercial" in card
    assert "eprint        = {2609.03874}" in card and "@misc{kumar2026stair," in card
    assert card.count("{") == card.count("}")
    assert "R@1" in card and "nDCG@3" in card and "searchtome score" in card
    # The manifest now also covers the card.
    assert verify_manifest(data) == []
    assert "README.md" in read_json(data / "manifest.json")["files"]


def test_generation_procedure_from_manifest(data: Path) -> None:
    info = {
        k: v for k, v in read_json(data / "manifest.json").items() if k not in ("files", "format")
    }
    info["generation"] = {
        "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "endpoint_kind": "local transformers serve",
        "prompt_version": "questions-v1",
        "seed": 13,
        "filters": {"duplicate": 4, "too_short": 1},
    }
    info["split_rule"] = "grouped by generation unit"
    write_manifest(data, info)
    card = write_card(data).read_text()
    assert "| prompt_version | questions-v1 |" in card
    assert "| endpoint_kind | local transformers serve |" in card
    assert "| seed | 13 |" in card
    assert '"duplicate": 4' in card
    assert "| rule | grouped by generation unit |" in card
    assert "Demo-quality questions" in card


USER_CARD = """---
license: mit
pretty_name: My SearchTome build
tags:
- my-tag
configs:
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus.parquet
  sample_by: paragraph
- config_name: notes
  data_files: notes.csv
---

# My build

Intro written by me, before any generated text.
"""


def test_merge_keeps_user_text_and_configs(data: Path, caplog: pytest.LogCaptureFixture) -> None:
    (data / "README.md").write_text(USER_CARD)
    first = write_card(data).read_text()
    meta = _header(first)
    names = [c["config_name"] for c in meta["configs"]]
    assert names.count("corpus") == 1 and "notes" in names and "queries" in names
    corpus_cfg = next(c for c in meta["configs"] if c["config_name"] == "corpus")
    assert corpus_cfg["sample_by"] == "paragraph", "the user's own config entry is kept"
    assert {"config_name": "notes", "data_files": "notes.csv"} in meta["configs"]
    assert meta["pretty_name"] == "My build" or meta["pretty_name"] == "My SearchTome build"
    assert meta["tags"][0] == "my-tag" and "searchtome" in meta["tags"]
    assert meta["license"] != "mit" and "license: 'mit' replaced" in caplog.text
    assert "Intro written by me, before any generated text." in first
    assert first.index("Intro written by me") < first.index(BEGIN)

    # Text added after the block survives, the block is replaced (not duplicated), reruns are
    # stable.
    with_tail = first + "\n## My own section\n\nStays.\n"
    (data / "README.md").write_text(with_tail)
    second = write_card(data).read_text()
    assert second.count(BEGIN) == 1 and second.count(END) == 1
    assert second.endswith("## My own section\n\nStays.\n")
    assert write_card(data).read_text() == second


def test_merge_replaces_an_edited_block(data: Path) -> None:
    write_card(data)
    card = (data / "README.md").read_text()
    tampered = card.replace("## Task", "## Task (edited inside the block)")
    text, _ = build_card(data, existing=tampered)
    assert "edited inside the block" not in text
    assert text == card


def test_card_is_deterministic(tiny_dataset: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(tiny_dataset, a)
    shutil.copytree(tiny_dataset, b)
    assert write_card(a).read_bytes() == write_card(b).read_bytes()
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("CC BY-NC-SA 4.0", "cc-by-nc-sa-4.0"),
        ("CC-BY-4.0", "cc-by-4.0"),
        ("Creative Commons Attribution 4.0 International", "cc-by-4.0"),
        ("Creative Commons Attribution-NonCommercial-ShareAlike 4.0", "cc-by-nc-sa-4.0"),
        ("CC BY-NC-ND 3.0", "cc-by-nc-nd-3.0"),
        ("CC0", "cc0-1.0"),
        ("CC BY-SA", "other"),
        ("MIT", "mit"),
        ("CC BY-XYZ 4.0", "other"),
        ("CC BY 4.0", "cc-by-4.0"),
        ("cc-by-sa-4.0", "cc-by-sa-4.0"),
        ("All rights reserved", "other"),
        ("", "other"),
    ],
)
def test_hf_license(name: str, expected: str) -> None:
    assert hf_license(name) == expected


def test_size_category() -> None:
    assert size_category(999) == "n<1K"
    assert size_category(3214) == "1K<n<10K"
    assert size_category(10_000) == "10K<n<100K"


def test_card_names_the_data_says_where_it_came_from_and_what_it_cannot_tell(
    data: Path,
) -> None:
    card = write_card(data).read_text()
    meta = _header(card)
    ds = load(data)
    assert meta["pretty_name"] == "SearchTome: 2 books in 2 domain(s)"
    assert meta["pretty_name"] != ds.manifest.name
    assert "## Limitations and biases" in card
    assert "**The questions are LLM-generated**" in card and "**One leaf per question.**" in card
    # an imported release says what it was converted from, and the earlier default name goes
    manifest = read_json(data / "manifest.json")
    manifest["source"] = {"repository": "https://github.com/someone/release", "license": "x"}
    write_manifest(data, {k: v for k, v in manifest.items() if k not in ("files", "format")})
    old = (data / "README.md").read_text().replace(meta["pretty_name"], ds.manifest.name)
    (data / "README.md").write_text(old)
    meta = _header(write_card(data).read_text())
    # a release outside the Hub is no `extended|<hub id>`: the card's text names its URL
    assert meta["source_datasets"] == ["original"]
    assert meta["pretty_name"].endswith("(an independent reproduction's release)")
    assert (
        "converted from an independent reproduction's release (https://github.com/someone"
        in (data / "README.md").read_text()
    )


def test_one_folder_serves_datasets_and_mtebs_loader(data: Path, offline_datasets: Path) -> None:
    pytest.importorskip("mteb", reason="needs the mteb extra: pip install 'searchtome[mteb]'")
    from datasets import load_dataset
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    from searchtome.dataset.mteb_layout import export_mteb

    export_mteb(data, data / "mteb")
    card = write_card(data).read_text()
    names = [c["config_name"] for c in _header(card)["configs"]]
    assert names[:3] == ["corpus", "queries", "default"] and "beta-law-corpus" in names
    assert "MTEB's loader reads this repository with one subset per book" in card
    kw = {"cache_dir": str(offline_datasets)}
    ours = load_dataset(str(data), "corpus", split="corpus", **kw)
    theirs = load_dataset(str(data), "beta-law-corpus", split="corpus", **kw)
    assert theirs.column_names == ["id", "title", "text"]
    assert theirs["id"] == [i for i in ours["leaf_id"] if i.startswith("beta-law/")]
    loaded = RetrievalDatasetLoader(
        hf_repo=str(data), revision=None, split="test", config="beta-law"
    ).load()
    ds = load(data)
    assert loaded["relevant_docs"] == {
        q.query_id: {q.leaf_id: 1} for q in ds.queries("test", "beta-law")
    }


def test_a_blind_card_describes_only_its_folder(data: Path, tmp_path: Path) -> None:
    from searchtome.dataset.blind import make_blind

    result = make_blind(data, tmp_path / "public", tmp_path / "private", "test")
    card = (result.public / "README.md").read_text()
    meta = _header(card)
    names = [c["config_name"] for c in meta["configs"]]
    assert "units" not in names and not (result.public / "units.parquet").exists()
    default = next(c for c in meta["configs"] if c["config_name"] == "default")
    assert [f["split"] for f in default["data_files"]] == ["train", "dev"]  # no test gold
    assert "`units`" not in card and "Question generation:" not in card
    assert "Blind release: the test split's gold is not in this folder" in card
    assert "test split: `query_id`, `book_id`, `domain`, `text` only" in card
    assert "--split test" not in card and 'split="dev")' in card
    assert meta["pretty_name"].endswith("test gold held back")


def test_source_datasets_as_the_hub_expects() -> None:
    from searchtome.dataset.card_header import source_datasets
    from searchtome.dataset.manifest import DatasetManifest, Source

    def of(imported: str | None) -> list[str]:
        source = Source(kind="release", repository=imported) if imported else None
        return source_datasets(DatasetManifest(source=source))

    assert of(None) == ["original"]
    assert of("https://github.com/someone/release") == ["original"]
    assert of("someone/release") == ["extended|someone/release"]
    assert of("hf://datasets/someone/release") == ["extended|someone/release"]


def _cards(data: Path, tmp_path: Path) -> dict[str, str]:
    """Every card kind of ``data``: the dataset's, the blind public half's, the MTEB export's."""
    from searchtome.dataset.blind import make_blind
    from searchtome.dataset.mteb_layout import export_mteb

    blind = make_blind(data, tmp_path / "public", tmp_path / "private", "test")
    export_mteb(data, tmp_path / "mteb")
    return {
        "dataset": write_card(data).read_text(),
        "blind public": (blind.public / "README.md").read_text(),
        "export mteb": (tmp_path / "mteb" / "README.md").read_text(),
    }


def _check_cards(data: Path, cards: dict[str, str]) -> None:
    """Each card credits every book (authors, title, source, licence, changes) and keeps the
    Hub's conventions: who wrote what, no `mteb` tag where MTEB cannot load the layout."""
    ds = load(data)
    for kind, card in cards.items():
        meta = _header(card)
        for b in ds.book_ids():
            book = ds.books[b].book
            line = next((x for x in card.splitlines() if x.startswith(f"- `{b}`: *")), "")
            assert book.authors, f"{b}: the test needs a book with authors"
            for needed in (*book.authors, book.title, book.license):
                assert needed in line, f"{kind} card: {b}'s attribution lacks {needed!r}"
            if book.landing_url:
                assert book.landing_url in line
        assert "\nChanges: " in card and "## Personal and sensitive information" in card, kind
        assert "## Example" in card and '"corpus-id": ' in card, kind
        assert meta["language_creators"] == ["found", "machine-generated"], kind
        assert "expert-generated" not in meta["annotations_creators"], kind
        assert meta["source_datasets"][0] == "original" or meta["source_datasets"][0].startswith(
            "extended|"
        )
        assert "://" not in meta["source_datasets"][0], kind
        assert ("mteb" in meta["tags"]) == (kind == "export mteb"), kind
    # the held-back gold never appears as the example, and the blind card says it is held back
    assert "## Example" in cards["blind public"] and "(test)`" not in cards["blind public"]
    assert "gold leaves are held back from this folder" in cards["blind public"]


def test_every_card_kind_credits_every_book_and_keeps_the_hub_conventions(
    data: Path, tmp_path: Path
) -> None:
    _check_cards(data, _cards(data, tmp_path))


def test_an_earlier_card_s_claims_are_replaced(data: Path) -> None:
    """A card written by an earlier version claimed experts and tagged every folder `mteb`:
    facts about how the data was made are ours, so regenerating replaces them."""
    card = write_card(data).read_text()
    old = card.replace("- machine-generated\nlanguage", "- expert-generated\nlanguage", 1)
    old = old.replace("- table-of-contents\n", "- table-of-contents\n- mteb\n", 1)
    assert "expert-generated" in old and "- mteb" in old
    (data / "README.md").write_text(old)
    meta = _header(write_card(data).read_text())
    assert "expert-generated" not in meta["annotations_creators"]
    assert "mteb" not in meta["tags"]


@pytest.mark.skipif(not (PEER / "data" / "splits").is_dir(), reason="no ../shared/peer/whole-child")
def test_the_whole_child_cards_credit_its_authors(tmp_path: Path) -> None:
    from searchtome.cli import main

    data = tmp_path / "whole-child"
    assert main(["--no-progress", "import", "repro", str(PEER), "--out", str(data)]) == 0
    assert load(data).books["whole-child"].book.authors == ("Deirdre Budzyna", "Doris Buckley")
    cards = _cards(data, tmp_path)
    _check_cards(data, cards)
    for card in cards.values():  # hand-written questions: "other", not experts
        assert _header(card)["annotations_creators"] == ["machine-generated", "other"]
        assert "Deirdre Budzyna and Doris Buckley" in card
