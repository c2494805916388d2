"""Trained retrievers on the tiny synthetic books: the real sentence-transformers trainer.

Fine-tuning runs, is deterministic for a seed and thread count (two trainings in two caches give
identical weights and scores), a cached model is reused, and the cross-encoder rerank keeps the
fusion's candidate set.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip(
    "sentence_transformers", reason="needs the st extra: pip install 'searchtome[st]'"
)

from searchtome.baselines.encoders import Encoder
from searchtome.baselines.finetune import (
    FinetuneConfig,
    FinetuneHybridConfig,
    book_chunks,
    fine_tune,
    mine,
    run_finetune_hybrid,
    training_examples,
    training_key,
)
from searchtome.baselines.registry import RunContext
from searchtome.baselines.rerank import RerankConfig, cross_encoder, rerank_top, run_rerank

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError

# Small enough to train in seconds on one thread: short chunks, one epoch, small batches.
TINY = {"chunk_tokens": 24, "epochs": 1, "batch_size": 8, "threads": 1}
CE = {"ce_batch_size": 8, "ce_negatives": 1, "ce_max_length": 64}


def _weights(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    (path,) = folder.rglob("model.safetensors")
    return load_file(str(path))


@pytest.fixture(scope="module")
def trained(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory):
    ds = load(tiny_dataset)
    config = FinetuneHybridConfig(**TINY)
    # ``a`` trains where $SEARCHTOME_HOME/finetune would be, so runs below reuse it.
    a = fine_tune(ds, config, seed=3, root=tmp_path_factory.mktemp("home") / "finetune")
    b = fine_tune(ds, config, seed=3, root=tmp_path_factory.mktemp("b"))
    return ds, config, a, b


def test_hard_negatives_come_from_other_leaves_of_the_book(tiny_dataset: Path) -> None:
    ds = load(tiny_dataset)
    config = FinetuneConfig(**TINY)
    encoder = Encoder(config.encoder)
    chunks = book_chunks(ds, "alpha-bio", encoder, config)
    q = ds.queries("train", "alpha-bio")[0]
    positive, negatives = mine(chunks, q.text, q.leaf_id, 2)
    gold = chunks.leaf_ids.index(q.leaf_id)
    gold_texts = {t for t, i in zip(chunks.texts, chunks.leaf_of, strict=True) if i == gold}
    assert positive in gold_texts
    assert len(negatives) == 2 and not gold_texts & set(negatives)
    rows = training_examples(ds, encoder, config, 1)
    assert len(rows) == len(ds.queries("train"))
    assert set(rows[0]) == {"anchor", "positive", "negative_1"}


def test_training_is_deterministic_and_reused(trained) -> None:
    ds, config, a, b = trained
    assert not a.reused and not b.reused and a.path.name == b.path.name
    wa, wb = _weights(a.path), _weights(b.path)
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    report = a.report
    assert len(report.dev_r1_per_epoch) == 1 and report.best_epoch == 1
    assert report.parameters > 20_000_000 and report.n_examples == len(ds.queries("train"))
    # Trained weights moved away from the base model.
    base = Encoder(config.encoder).encode_queries(["What is said about lipids?"])
    tuned = config.hybrid(model=str(a.path)).encoder
    moved = Encoder(tuned).encode_queries(["What is said about lipids?"])
    assert np.abs(base - moved).max() > 1e-4
    again = fine_tune(ds, config, seed=3, root=a.path.parent)
    assert again.reused and again.report == report and again.path == a.path
    # The seed is part of the key: another seed never reuses this model.
    rows = training_examples(ds, Encoder(config.encoder), config, config.hard_negatives)
    assert training_key(ds, config, 3, rows) != training_key(ds, config, 4, rows)


def test_fused_run_ranks_every_leaf_of_the_book(trained, tmp_path: Path, monkeypatch) -> None:
    ds, config, a, _ = trained
    monkeypatch.setenv("SEARCHTOME_HOME", str(a.path.parent.parent))
    ctx = RunContext(cache_dir=tmp_path, seed=3)
    run = run_finetune_hybrid(ds, "test", config, ctx)
    for q in ds.queries("test"):
        assert set(run.rankings[q.query_id]) == {x.leaf_id for x in ds.leaves(q.book_id)}
    assert ctx.report.model_reused is True
    assert ctx.report.parameters == a.report.parameters
    assert not (ctx.report.encoder or {})["config"]["model"].startswith("/")


def test_rerank_top_mixes_z_scores() -> None:
    fused = np.array([3.0, 2.0, 1.0])
    ce = np.array([0.0, 0.0, 9.0])
    assert rerank_top(fused, ce, 0.0) == [0, 1, 2]
    assert rerank_top(fused, ce, 1.0) == [2, 0, 1]  # ties keep the fusion's order
    assert rerank_top(fused, np.zeros(3), 1.0) == [0, 1, 2]


def test_rerank_keeps_the_candidate_set(trained, tmp_path: Path, monkeypatch) -> None:
    ds, config, a, _ = trained
    monkeypatch.setenv("SEARCHTOME_HOME", str(a.path.parent.parent))
    fusion = run_finetune_hybrid(ds, "test", config, RunContext(cache_dir=tmp_path, seed=3))
    k = 3
    rcfg = RerankConfig(**TINY, **CE, k=k, weight=1.0)
    ce_root = a.path.parent
    first = cross_encoder(ds, rcfg, seed=3, root=ce_root)
    second = cross_encoder(ds, rcfg, seed=3, root=tmp_path / "ce2")
    wa, wb = _weights(first.path), _weights(second.path)
    assert all(np.array_equal(wa[n], wb[n]) for n in wa)  # deterministic
    assert cross_encoder(ds, rcfg, seed=3, root=ce_root).reused
    ctx = RunContext(cache_dir=tmp_path, seed=3)
    run = run_rerank(ds, "test", rcfg, ctx)
    for q in ds.queries("test"):
        before, after = fusion.rankings[q.query_id], run.rankings[q.query_id]
        assert set(before[:k]) == set(after[:k]) and before[k:] == after[k:]
    assert (ctx.report.parameters or 0) > 2 * 20_000_000
    assert any(run.rankings[q] != fusion.rankings[q] for q in run.rankings)
    # weight 0: the fusion's own order
    plain = run_rerank(ds, "test", RerankConfig(**TINY, **CE, k=k, weight=0.0), ctx)
    assert plain.rankings == fusion.rankings


def test_config_validation() -> None:
    with pytest.raises(SearchTomeError, match="epochs"):
        FinetuneConfig(epochs=0)
    with pytest.raises(SearchTomeError, match="alpha"):
        FinetuneConfig(alpha=1.5)
    with pytest.raises(SearchTomeError, match="k must be"):
        RerankConfig(k=0)


def test_runner_records_parameters_and_no_absolute_path(trained, monkeypatch) -> None:
    from searchtome.baselines.runner import execute

    ds, _, a, _ = trained
    monkeypatch.setenv("SEARCHTOME_HOME", str(a.path.parent.parent))
    overrides = [f"{k}={v}" for k, v in TINY.items()]
    _, meta, info = execute("finetune-hybrid", ds, "test", overrides=overrides, seed=3)
    assert info.parameters == a.report.parameters
    assert info.report.train_seconds == a.report.seconds
    assert meta.trained_on == ("train", "dev")

    def strings(value: object) -> list[str]:
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return [value] if isinstance(value, str) else []

    assert not [s for s in strings(meta) if s.startswith("/")]
