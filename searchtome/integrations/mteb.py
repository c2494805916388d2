"""SearchTome as an MTEB 2.x retrieval task: ``SearchTomeRetrieval.from_folder(path)``.

One MTEB subset per book, because SearchTome ranks a query against its own book's leaves only;
MTEB's score for the task is then per book, and :func:`predictions_to_run` turns the
predictions MTEB saves (``prediction_folder=``) into a TREC run that ``searchtome score`` reads.
The data comes straight from a SearchTome dataset folder or ``hf://`` id (no export needed);
the corpus rows are ``id``/``title``/``text`` (the leaf's own ToC title and its section text),
the same rows ``searchtome export mteb`` writes for the Hub.

    import mteb
    from sentence_transformers import SentenceTransformer
    from searchtome.mteb import SearchTomeRetrieval

    task = SearchTomeRetrieval.from_folder("data/whole-child")
    results = mteb.evaluate(SentenceTransformer("all-MiniLM-L6-v2"), task)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

try:
    from datasets import Dataset as HFDataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata
except ImportError as exc:  # the error a user sees names the extra to install
    raise ImportError(
        f"searchtome.mteb needs MTEB 2.x ({exc}); install it with: pip install 'searchtome[mteb]'"
    ) from exc

from searchtome.dataset.loader import Dataset, open_dataset
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike
from searchtome.metrics.ties import run_from_scores
from searchtome.records import SPLITS, Run

PAPER_URL = "https://arxiv.org/abs/2609.03874"
# The paper reports Recall@1; MTEB still computes nDCG@10, MRR, MAP and the rest.
MAIN_SCORE = "recall_at_1"
# SearchTome domains -> MTEB's TaskDomain vocabulary (Education has no entry of its own).
_DOMAINS = {
    "Finance": "Financial",
    "Law": "Legal",
    "Medicine": "Medical",
    "Natural Sciences": "Academic",
    "Social Sciences": "Academic",
    "Education": "Academic",
}


def task_metadata(
    ds: Dataset,
    splits: Sequence[str] = ("test",),
    *,
    name: str | None = None,
    main_score: str = MAIN_SCORE,
) -> TaskMetadata:
    """MTEB metadata from the dataset's manifest and books: one subset (``eng-Latn``) per book."""
    from searchtome.dataset.card import BIBTEX
    from searchtome.dataset.card_header import hf_license

    manifest = ds.manifest
    licences = sorted({hf_license(info.book.license) for info in ds.books.values()})
    domains = sorted(
        {"Non-fiction", "Written"} | {_DOMAINS.get(ds.domain(b), "Academic") for b in ds.books}
    )
    corpus_hash = manifest.get("files", {}).get("corpus.parquet", {}).get("sha256")
    generation = manifest.get("generation", {})
    return TaskMetadata(
        name=name or manifest.get("name") or "SearchTomeRetrieval",
        description=manifest.get("description")
        or "SearchTome: rank the leaf entries of a book's table of contents for a question.",
        reference=PAPER_URL,
        dataset={
            "path": str(ds.root),
            "revision": corpus_hash or manifest.get("searchtome_version") or "local",
        },
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=list(splits),
        eval_langs={b: ["eng-Latn"] for b in ds.book_ids()},
        main_score=main_score,
        domains=domains,
        task_subtypes=["Question answering"],
        license=licences[0] if len(licences) == 1 else "not specified",
        annotations_creators="LM-generated" if generation.get("model") else "derived",
        dialect=[],
        sample_creation="found",
        bibtex_citation=BIBTEX,
    )


def split_data(ds: Dataset, book_id: str, split: str) -> dict[str, Any]:
    """MTEB's ``RetrievalSplitData`` for one book and split: string columns only."""
    leaves = ds.leaves(book_id)
    queries = ds.queries(split, book_id)
    return {
        "corpus": HFDataset.from_dict(
            {
                "id": [x.leaf_id for x in leaves],
                "title": [x.title for x in leaves],
                "text": [x.text for x in leaves],
            }
        ),
        "queries": HFDataset.from_dict(
            {"id": [q.query_id for q in queries], "text": [q.text for q in queries]}
        ),
        "relevant_docs": {q.query_id: {q.leaf_id: 1} for q in queries},
        "top_ranked": None,
    }


class SearchTomeRetrieval(AbsTaskRetrieval):
    """An MTEB retrieval task over a SearchTome dataset; build it with :meth:`from_folder`.

    MTEB keeps a task's metadata on its class (an instance's own metadata means "filtered" to
    MTEB, which drops it when unloading), so each dataset gets a subclass of its own.
    """

    searchtome: ClassVar[Dataset]

    def __init__(self, **kwargs: Any) -> None:
        if "metadata" not in type(self).__dict__:
            raise SearchTomeError(
                "SearchTomeRetrieval needs a dataset: use SearchTomeRetrieval.from_folder(PATH)"
            )
        super().__init__(**kwargs)

    @classmethod
    def from_folder(
        cls,
        source: PathLike | Dataset,
        splits: Sequence[str] = ("test",),
        *,
        books: Sequence[str] | None = None,
        name: str | None = None,
        main_score: str = MAIN_SCORE,
        **kwargs: Any,
    ) -> SearchTomeRetrieval:
        """The task for a dataset folder, ``hf://ORG/NAME[@REV]`` or a bare ``ORG/NAME``.

        ``splits`` are the splits MTEB evaluates (test by default); ``books`` limits the subsets.
        """
        from searchtome.errors import unknown_name

        ds = open_dataset(source)
        for split in splits:
            if split not in SPLITS:
                raise unknown_name("split", split, SPLITS)
        for book in books or ():
            if book not in ds.books:
                raise unknown_name("book", book, ds.book_ids())
        metadata = task_metadata(ds, splits, name=name, main_score=main_score)
        task_class = type(cls.__name__, (cls,), {"metadata": metadata, "searchtome": ds})
        task = task_class(**kwargs)
        if books:
            task.hf_subsets = sorted(set(books))
        return task

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """Build every (book, split) in memory from the SearchTome dataset (no Hub round trip)."""
        if self.data_loaded:
            return
        ds = self.searchtome
        self.dataset = {
            book: {split: split_data(ds, book, split) for split in self.eval_splits}
            for book in self.hf_subsets
        }
        self.data_loaded = True


def predictions_to_run(
    path: PathLike, split: str = "test", *, depth: int = 100, name: str | None = None
) -> Run:
    """The run in an MTEB predictions file (``{task}_predictions.json``), every subset merged.

    Each query keeps its ``depth`` best leaves (a submission holds at most 100), ordered by
    score, ties by id descending: the order pytrec_eval, and so MTEB, scores.
    """
    path = Path(path)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SearchTomeError(f"{path}: not a readable MTEB predictions file ({exc})") from exc
    merged: dict[str, dict[str, float]] = {}
    for subset, by_split in saved.items():
        if subset != "mteb_model_meta" and split in by_split:
            merged.update(by_split[split])
    if not merged:
        raise SearchTomeError(f"{path}: no predictions for split {split!r}")
    if name is None:
        model = str(saved.get("mteb_model_meta", {}).get("model_name") or "")
        # MTEB's placeholder for a model without a name on the Hub
        name = "mteb" if model.startswith("no_model_name") or not model else model
    return run_from_scores(merged, name=name.replace("/", "__"), depth=depth)
