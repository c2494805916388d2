"""``rerank``: a cross-encoder trained from the offline MiniLM reorders the fusion's top k leaves.

Candidates are the top ``k`` leaves of ``finetune-hybrid`` (the fine-tuned MiniLM fused with
chunk-level BM25; the same chunks, scores and leaf rule through :mod:`navtree`). Each candidate
leaf is represented by its best chunk under that fusion; the cross-encoder scores the pair
(question, chunk). Inside the top k, the new score is ``weight * z(cross-encoder) +
(1 - weight) * z(fusion)`` (z-scores over the k candidates of the question; ties keep the
fusion's order); the leaves below rank k keep the fusion's order. So the candidate set and
everything outside the top k are the fusion's (tests/baselines/test_finetune.py).

Training (sentence-transformers' ``CrossEncoder`` and ``CrossEncoderTrainer``, binary cross-
entropy): the base weights are the offline MiniLM's (its BERT body; the one-logit head starts
from the seed); each **train** question gives one positive pair (the gold leaf's best BM25 chunk)
and ``ce_negatives`` negatives (BM25's top chunks of other leaves), the same miner as
``finetune``. The model is cached under ``$SEARCHTOME_HOME/finetune/ce-<key>/``, keyed like the
bi-encoder. Scores are memoised in the process, so ``searchtome tune rerank --grid weight=...``
scores each pair once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from searchtome.baselines.encoders import Encoder
from searchtome.baselines.finetune import (
    DEV_SPLIT,
    REPORT_FILE,
    TRAIN_SPLIT,
    FinetuneHybridConfig,
    Tuned,
    describe,
    fine_tune,
    read_report,
    training_examples,
    write_report,
)
from searchtome.baselines.navtree import best_chunks, book_index, fused_chunk_scores, normalise
from searchtome.baselines.registry import RunContext, register

from searchtome.errors import SearchTomeError
from searchtome.io import stable_hash
from searchtome.limits import MAX_IDS
from searchtome.records import Run
from searchtome.submissions.runinfo import TrainingReport

log = logging.getLogger(__name__)

# (model folder, question, passage) → cross-encoder logit, for every run of this process.
_SCORES: dict[tuple[str, str, str], float] = {}


@dataclass(frozen=True)
class RerankConfig(FinetuneHybridConfig):
    k: int = 10
    # The cross-encoder's share of the score inside the top k (1.0: its score alone).
    weight: float = 0.5
    ce_epochs: int = 1
    ce_batch_size: int = 16
    ce_learning_rate: float = 2e-5
    ce_negatives: int = 1  # one BM25 negative per question: the CPU budget here
    ce_max_length: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.k <= MAX_IDS or not 0.0 <= self.weight <= 1.0:
            raise SearchTomeError(f"k must be between 1 and {MAX_IDS} and weight between 0 and 1")
        for name in ("ce_epochs", "ce_batch_size", "ce_negatives", "ce_max_length"):
            if getattr(self, name) < 1:
                raise SearchTomeError(f"{name} must be at least 1, not {getattr(self, name)}")

    def ce_settings(self) -> dict[str, Any]:
        keys = ("ce_epochs", "ce_batch_size", "ce_learning_rate", "ce_negatives", "ce_max_length")
        return {k: getattr(self, k) for k in keys} | self.training_settings()


def cross_encoder(dataset: Any, config: RerankConfig, seed: int, root: Path | None = None) -> Tuned:
    """The trained cross-encoder for ``(dataset, config, seed)``: cached, or trained now."""
    import importlib.metadata as md

    from searchtome.settings import cache_dir

    encoder = Encoder(config.encoder)
    rows = training_examples(dataset, encoder, config, config.ce_negatives)
    versions = {p: md.version(p) for p in ("torch", "transformers", "sentence-transformers")}
    key = stable_hash(["ce", encoder.fingerprint, config.ce_settings(), seed, versions, rows])
    path = (root or cache_dir("finetune")) / f"ce-{key[:24]}"
    if (path / REPORT_FILE).is_file():
        return Tuned(path, read_report(path), reused=True)
    pairs = [
        {"query": r["anchor"], "passage": r[col], "label": float(col == "positive")}
        for r in rows
        for col in ["positive"] + [f"negative_{i + 1}" for i in range(config.ce_negatives)]
    ]
    return Tuned(path, train_cross_encoder(config, seed, pairs, path), reused=False)


def train_cross_encoder(
    config: RerankConfig, seed: int, pairs: list[dict[str, Any]], path: Path
) -> TrainingReport:
    import tempfile

    from searchtome.io import staged_dir
    from searchtome.llm.models import resolve
    from searchtome.settings import hf_offline_env
    from searchtome.threads import torch_threads

    hf_offline_env()
    import torch
    from datasets import Dataset as HFDataset
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    start = time.perf_counter()
    with torch_threads(config.threads) as threads:
        torch.manual_seed(seed)  # the fresh one-logit head
        base = resolve(config.encoder.model)
        model = CrossEncoder(base, num_labels=1, max_length=config.ce_max_length, device="cpu")
        with staged_dir(path) as tmp:
            with tempfile.TemporaryDirectory(prefix="searchtome-ce-") as work:
                args = CrossEncoderTrainingArguments(
                    output_dir=work,
                    num_train_epochs=config.ce_epochs,
                    per_device_train_batch_size=config.ce_batch_size,
                    learning_rate=config.ce_learning_rate,
                    warmup_steps=config.warmup_ratio,  # a float below 1 is a ratio
                    seed=seed,
                    data_seed=seed,
                    save_strategy="no",
                    report_to=[],
                    use_cpu=True,
                    dataloader_num_workers=0,
                    disable_tqdm=True,
                )
                data = HFDataset.from_list(pairs)
                loss = BinaryCrossEntropyLoss(model)
                CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=loss).train()
            model.save(str(tmp))
            report = TrainingReport(
                seconds=round(time.perf_counter() - start, 1),
                threads=threads,
                n_pairs=len(pairs),
                loss="BinaryCrossEntropyLoss (1 positive, BM25 hard negatives per question)",
                parameters=sum(p.numel() for p in model.model.parameters()),
                seed=seed,
            )
            write_report(tmp, report)
    return report


def ce_scores(path: Path, pairs: list[tuple[str, str]], threads: int) -> np.ndarray:
    """Cross-encoder logits for ``pairs``, each pair scored once per process."""
    todo = list(dict.fromkeys(p for p in pairs if (str(path), *p) not in _SCORES))
    if todo:
        from searchtome.settings import hf_offline_env
        from searchtome.threads import torch_threads

        hf_offline_env()
        import torch
        from sentence_transformers.cross_encoder import CrossEncoder

        with torch_threads(threads):
            model = CrossEncoder(str(path), device="cpu")
            logits = model.predict(todo, batch_size=32, activation_fn=torch.nn.Identity())
        for p, s in zip(todo, np.asarray(logits, dtype=np.float64).ravel(), strict=True):
            _SCORES[(str(path), *p)] = float(s)
    return np.asarray([_SCORES[(str(path), *p)] for p in pairs], dtype=np.float64)


def rerank_top(fused: np.ndarray, ce: np.ndarray, weight: float) -> list[int]:
    """The order of k candidates (given best first) by ``weight*z(ce) + (1-weight)*z(fused)``."""
    mixed = weight * normalise(ce, "zscore") + (1 - weight) * normalise(fused, "zscore")
    return [int(i) for i in np.lexsort((np.arange(len(mixed)), -mixed))]


@register(
    "rerank",
    summary="finetune-hybrid's top k leaves reordered by a cross-encoder trained from MiniLM on "
    "the train questions (z-scored and mixed with the fusion's score)",
    config=RerankConfig,
    needs=("ml", "st"),
    trains_on=(TRAIN_SPLIT, DEV_SPLIT),
    doc="trained.md",
)
def run_rerank(dataset: Any, split: str, config: RerankConfig, ctx: RunContext) -> Run:
    tuned = fine_tune(dataset, config, ctx.seed)
    ce = cross_encoder(dataset, config, ctx.seed)
    start = time.perf_counter()
    hybrid = config.hybrid(model=str(tuned.path))
    nav, encoder = hybrid.navtree(), Encoder(hybrid.encoder)
    books = [b for b in dataset.book_ids() if dataset.queries(split, b)]
    queries = [q for b in books for q in dataset.queries(split, b)]
    qvec = encoder.encode_queries([q.text for q in queries])
    row_of = {q.query_id: i for i, q in enumerate(queries)}
    candidates = []  # (query, leaf ids, fusion order, its top k's fused scores and pairs)
    for book_id in books:
        index = book_index(dataset, book_id, nav, encoder, toc=False)
        for q in dataset.queries(split, book_id):
            chunk_s = fused_chunk_scores(index, q.text, qvec[row_of[q.query_id]], nav)
            ranked = best_chunks(index, chunk_s, config.depth)
            top = ranked[: config.k]
            fused = np.asarray([chunk_s[c] for _, c in top])
            pairs = [(q.text, index.chunk_texts[c]) for _, c in top]
            candidates.append((q, index.leaf_ids, [i for i, _ in ranked], fused, pairs))
    # One pass of the cross-encoder over every pair of the split (full batches, one load).
    all_pairs = [p for *_, pairs in candidates for p in pairs]
    logits = iter(ce_scores(ce.path, all_pairs, config.encoder.threads))
    rankings: dict[str, tuple[str, ...]] = {}
    for q, leaf_ids, ranked, fused, pairs in candidates:
        order = rerank_top(fused, np.asarray([next(logits) for _ in pairs]), config.weight)
        leaves = [ranked[i] for i in order] + ranked[len(pairs) :]
        rankings[q.query_id] = tuple(leaf_ids[i] for i in leaves)
    ctx.record(encoder=encoder.describe())
    describe(ctx, tuned, time.perf_counter() - start)
    ctx.record(
        cross_encoder=ce.notes(),
        train_seconds=round(sum(t.training.seconds or 0.0 for t in (tuned, ce)), 1),
        parameters=sum(t.training.parameters or 0 for t in (tuned, ce)),
        models=(
            *(ctx.report.models or ()),
            "cross-encoder from all-MiniLM-L6-v2 trained on train: " + ce.shown_path,
        ),
        dtype="float32",
        description=(
            f"rerank: finetune-hybrid's top {config.k} leaves reordered by a MiniLM "
            f"cross-encoder trained on the train questions (weight {config.weight} on its "
            "z-scored logit)"
        ),
    )
    return Run(name="rerank", rankings=rankings)
