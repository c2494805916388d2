"""The generative-retrieval pipeline behind ``stair`` and ``dsi`` (needs the ml extra).

Per book: ToC → identifiers, token trie and prompt prefix (:mod:`.books`). Then: fine-tune a
LoRA adapter on the training questions of every book (cached by model + data + config + seed),
pick the epoch by dev R@1 (:mod:`.adapters`), and rank each query's leaves with one of three
decoders (:mod:`.predict`):

* ``beam`` — trie-constrained beam search (the paper's mode): ``num_beams`` beams, ranked by
  log-probability; only leaf identifiers can come out.
* ``exact`` — the log-probability of every leaf identifier of the book, computed exactly over
  the cached prefix (all leaves ranked, no beam approximation).
* ``free`` — unconstrained beam search, only to measure hallucination: outputs that are no
  leaf identifier become a non-leaf node id or an invalid id (``common.IdentifierIndex``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchtome.baselines.generative.adapters import training_books, tune_adapter
from searchtome.baselines.generative.books import book_context
from searchtome.baselines.generative.card import read_card
from searchtome.baselines.generative.config import GenRetConfig
from searchtome.baselines.generative.parallel import distributed, from_main, run_sharded, start
from searchtome.baselines.generative.predict import (
    Decoded,
    Predictor,
    append_partial,
    read_partial,
)
from searchtome.baselines.registry import count_parameters

from searchtome.config import config_record
from searchtome.io import stable_hash
from searchtome.limits import MAX_IDS
from searchtome.records import Query, Run

if TYPE_CHECKING:
    from searchtome.baselines.generative.engine import LM
    from searchtome.baselines.registry import RunContext

    from searchtome.dataset.layout import Dataset

log = logging.getLogger(__name__)


def run_generative(
    dataset: Dataset,
    split: str,
    cfg: GenRetConfig,
    ctx: RunContext,
    *,
    system: str,
    with_toc: bool,
    candidates: Mapping[str, Sequence[str]] | None = None,
) -> Run:
    """Rank the leaves for every query of ``split``: prepare the books, train or load an
    adapter, decode (resumably); facts about the run go to the run's report (``ctx.record``).
    ``candidates``: the only leaves each query ranks (by query id; a reranker's first stage)."""
    from searchtome.baselines.generative.train import load_adapter

    from searchtome.threads import require_applied

    lm = _load_model(cfg, ctx.seed)
    queries = dataset.queries(split)
    wanted = sorted({q.book_id for q in queries})
    training = cfg.training
    fine_tune = training.enabled and not training.adapter and training.max_epochs > 0
    train_books = training_books(dataset, cfg) if fine_tune else []
    all_books = sorted(set(wanted) | set(train_books))
    if fine_tune:  # run_info.phases: training timed and measured apart from prediction
        ctx.start_phase("training")
    t0 = time.perf_counter()
    books = {
        b: book_context(lm, dataset, b, cfg, with_toc=with_toc, seed=ctx.seed) for b in all_books
    }
    notes: dict[str, Any] = {
        "models": (cfg.model,),
        "dtype": str(lm.dtype).removeprefix("torch."),  # what dtype=auto resolved to
        "decode": cfg.decode,
        "prompt_prefix_tokens": {b: len(c.prefix_ids) for b, c in books.items()},
    }
    frozen_prefix = False
    adapter_key = None
    if cfg.adapter:
        load_adapter(lm, Path(cfg.adapter))
        card = read_card(Path(cfg.adapter))  # a copy without its card: the adapted prefix
        frozen_prefix = bool(card and card.frozen_prefix)
        notes["adapter"] = cfg.adapter
    elif fine_tune:
        require_applied("training")
        tuned = tune_adapter(
            lm, dataset, books, train_books, cfg, ctx, system=system, with_toc=with_toc
        )
        frozen_prefix, adapter_key = tuned.frozen_prefix, tuned.key
        notes.update(tuned.notes())
    notes["setup_and_train_wall_s"] = round(time.perf_counter() - t0, 1)
    if distributed()[1] > 1:
        notes["processes"] = distributed()[1]

    ctx.start_phase("prediction")
    require_applied("prediction")  # the count training used, whatever ran in between
    t1 = time.perf_counter()
    key = _predictions_key(
        cfg, queries, split, adapter_key, system=system, with_toc=with_toc, train=fine_tune
    )
    if candidates is not None:  # another first stage, other answers: another partial file
        key = stable_hash([key, [candidates[q.query_id] for q in queries]])[:20]
    decoded = _predict(
        lm,
        Predictor(lm, books, cfg, frozen_prefix),
        queries,
        cfg,
        partial=ctx.cache_dir / "predictions" / f"{key}.jsonl",
        desc=f"{system} {split}",
        candidates=candidates,
    )
    notes["predict_seconds"] = round(time.perf_counter() - t1, 1)
    rankings = {q.query_id: tuple(decoded[q.query_id].ids[:MAX_IDS]) for q in queries}
    scores = {q.query_id: tuple(decoded[q.query_id].scores[:MAX_IDS]) for q in queries}
    kinds = [decoded[q.query_id].kinds[:1] for q in queries]
    notes["non_leaf_at_1"] = sum(1 for k in kinds if k == ["non-leaf"])
    notes["invalid_at_1"] = sum(1 for k in kinds if k == ["invalid"])
    notes["empty"] = sum(1 for k in kinds if not k)
    notes["parameters"] = count_parameters(lm.model)  # run_info.parameters, LoRA included
    ctx.record(**notes)
    return Run(name=system, rankings=rankings, scores=scores, meta={"config": config_record(cfg)})


def _load_model(cfg: GenRetConfig, seed: int) -> LM:
    """The base model on its device, torch seeded first (the order keeps runs reproducible)."""
    import torch
    from searchtome.baselines.generative.engine import load_lm

    from searchtome.threads import use_torch_threads

    device = start(cfg.lm.device)  # joins the process group under `accelerate launch`
    use_torch_threads(cfg.lm.threads)  # training and prediction both run with this count
    torch.manual_seed(seed)
    return load_lm(cfg.lm.name, dtype=cfg.lm.dtype, device=device)


def _predictions_key(
    cfg: GenRetConfig,
    queries: Sequence[Query],
    split: str,
    adapter_key: str | None,
    *,
    system: str,
    with_toc: bool,
    train: bool,
) -> str:
    """Names the partial predictions file: a rerun with the same inputs resumes from it."""
    decoding = cfg.decoding
    return stable_hash(
        {
            "adapter": adapter_key or cfg.training.adapter or "base",
            "model": cfg.lm.name,
            "split": split,
            "queries": [q.query_id for q in queries],
            "decode": decoding.mode.value,
            "beams": decoding.num_beams,
            "lp": decoding.length_penalty,
            "out": decoding.max_output_tokens,
            "with_toc": with_toc,
            "train": train,
            "system": system,
            "config": cfg.training_fields(),
        }
    )[:20]


def _predict(
    lm: LM,
    predictor: Predictor,
    queries: Sequence[Query],
    cfg: GenRetConfig,
    *,
    partial: Path,
    desc: str,
    candidates: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Decoded]:
    """Decode every query; finished batches are appended to ``partial``, read back on resume.

    Under several processes rank 0 reads what earlier runs decoded (every rank's partial file)
    and hands it to all; each rank decodes its share of the rest, appends it to its own partial
    file and ends with every answer.
    """
    rank, _ = distributed()
    done = from_main(_read_partials(partial) if rank == 0 else {})
    if done:
        log.info(
            "resuming: %d of %d queries already decoded (%s)", len(done), len(queries), partial
        )
    lm.model.eval()
    mine = partial if rank == 0 else partial.with_name(f"{partial.stem}.rank{rank}.jsonl")
    todo = [q for q in queries if q.query_id not in done]
    new = run_sharded(
        todo,
        lambda part: predictor.run(
            part,
            cfg.decoding,
            desc=desc,
            on_batch=lambda rows: append_partial(mine, rows),
            candidates=candidates,
        ),
    )
    return {**done, **new}


def _read_partials(partial: Path) -> dict[str, Decoded]:
    """What a run (of one or several processes) with these inputs already decoded."""
    done = read_partial(partial)
    for other in sorted(partial.parent.glob(f"{partial.stem}.rank*.jsonl")):
        done.update(read_partial(other))
    return done
