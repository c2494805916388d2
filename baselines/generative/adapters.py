"""The LoRA adapter of a generative retriever: its training data, cache key, training and reuse.

An adapter is trained on the training questions of every allowed book (and, with ``indexing``,
on passages), with dev R@1 choosing the epoch. It is cached under ``<cache>/adapters/<key>``,
where the key covers everything that shapes it: system, model files, dtype, the training fields
of the config, the examples, the prompt prefixes, the dev sample, the seed and library versions.
Another run with the same key reuses it instead of training again.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchtome.baselines.generative.card import CARD_FILE, AdapterCard, new_card, read_card
from searchtome.baselines.generative.common import model_fingerprint
from searchtome.baselines.generative.config import (
    RESTRICTION,
    DevDecoder,
    GenRetConfig,
    Restricted,
)
from searchtome.baselines.generative.parallel import (
    barrier,
    distributed,
    is_main,
    run_sharded,
    same_everywhere,
)
from searchtome.baselines.generative.predict import Predictor
from searchtome.baselines.generative.trainings import work_dir

from searchtome.errors import SearchTomeError
from searchtome.io import stable_hash
from searchtome.records import Query
from searchtome.submissions.runinfo import TrainingReport

if TYPE_CHECKING:
    from searchtome.baselines.generative.books import BookCtx
    from searchtome.baselines.generative.engine import LM
    from searchtome.baselines.generative.train import Example
    from searchtome.baselines.registry import RunContext

    from searchtome.dataset.layout import Dataset

log = logging.getLogger(__name__)


# -- training data ---------------------------------------------------------------------------------


def training_books(dataset: Dataset, cfg: GenRetConfig) -> list[str]:
    """Books whose training questions may be used; refuses restricted books unless told."""
    books = sorted({q.book_id for q in dataset.queries("train")})
    restricted = [b for b in books if dataset.books[b].book.restricted(RESTRICTION)]
    if restricted and cfg.training.restricted is Restricted.REFUSE:
        raise SearchTomeError(
            f"{dataset.root}: book(s) {', '.join(restricted)} are marked {RESTRICTION!r} in "
            "the catalog; fine-tuning on them is refused. Use --set restricted=exclude to train "
            "without them, or --set restricted=allow if you have the right to"
        )
    if cfg.training.restricted is Restricted.EXCLUDE:
        books = [b for b in books if b not in restricted]
    return books


def dev_sample(dataset: Dataset, books: Sequence[str], n: int, seed: int) -> list[Query]:
    dev = [q for q in dataset.queries("dev") if q.book_id in set(books)]
    if n and len(dev) > n:
        dev = sorted(random.Random(seed).sample(dev, n), key=lambda q: q.query_id)
    return dev


def build_examples(
    lm: LM,
    dataset: Dataset,
    books: dict[str, BookCtx],
    train_books: Sequence[str],
    cfg: GenRetConfig,
) -> list[Any]:
    from searchtome.baselines.generative.train import Example

    budget = cfg.prompt.max_input_tokens
    examples = []
    for q in dataset.queries("train"):
        if q.book_id not in train_books:
            continue
        book = books[q.book_id]
        examples.append(
            Example(
                q.book_id,
                tuple(book.suffix_ids(lm, q.text, book.query_label, budget)),
                book.trie.sequences[q.leaf_id],
            )
        )
    if cfg.training.indexing:
        for book_id in train_books:
            book = books[book_id]
            for para in (p for x in dataset.leaves(book_id) for p in dataset.paragraphs(x.leaf_id)):
                text = lm.tokenizer.decode(lm.encode(para.text)[: cfg.training.index_max_tokens])
                examples.append(
                    Example(
                        book_id,
                        tuple(book.suffix_ids(lm, text, book.passage_label, budget)),
                        book.trie.sequences[para.leaf_id],
                        kind="index",
                    )
                )
    return examples


# -- the cache key ---------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "peft"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


@dataclass(frozen=True)
class TrainingSet:
    """What an adapter is trained on (one book's examples share its prompt prefix) and what
    picks its epoch."""

    books: dict[str, BookCtx]
    train_books: Sequence[str]
    examples: Sequence[Example]
    dev: Sequence[Query]

    def prefixes(self) -> dict[str, list[int]]:
        return {b: self.books[b].prefix_ids for b in self.train_books}


def adapter_key(
    lm: LM, data: TrainingSet, cfg: GenRetConfig, *, system: str, with_toc: bool, seed: int
) -> str:
    """The adapter's cache key: a hash of everything that shapes the trained weights."""
    world = distributed()[1]
    # N processes average N batches per step (grad_accum × N): another training. Keys of
    # one-process runs stay as they were.
    parallel = {"processes": world} if world > 1 else {}
    # dev_decode=beam picks the kept epoch with num_beams beams, so the beam count shapes the
    # adapter too (greedy and exact do not read it). Keys of the other decoders stay as they were.
    search = {"dev_num_beams": cfg.decoding.num_beams} if cfg.dev.decode is DevDecoder.BEAM else {}
    return stable_hash(
        {
            **parallel,
            **search,
            "system": system,
            "with_toc": with_toc,
            "model": model_fingerprint(cfg.lm.name),
            "dtype": str(lm.dtype),
            "config": cfg.training_fields(),
            "examples": [[e.book_id, e.suffix, e.target, e.kind] for e in data.examples],
            "prefixes": data.prefixes(),
            "dev": [[q.query_id, q.leaf_id] for q in data.dev],
            "seed": seed,
            "versions": _versions(),
        }
    )[:20]


# -- train or reuse --------------------------------------------------------------------------------


@dataclass
class TunedAdapter:
    """A trained (or reused) adapter, attached to the model."""

    key: str
    path: Path
    frozen_prefix: bool
    report: dict[str, Any]
    reused: bool

    @property
    def training(self) -> TrainingReport:
        """The training's report, typed: what ``run_info.notes.training`` records."""
        return TrainingReport.from_dict(self.report)

    def notes(self) -> dict[str, Any]:
        """What the run records about the adapter in meta.json (keys in this order)."""
        training = self.training
        notes: dict[str, Any] = {"adapter_reused": True} if self.reused else {}
        notes["adapter"] = str(self.path)
        notes["training"] = training
        notes["train_seconds"] = round(training.seconds or 0.0, 1)
        notes["epochs"] = training.epochs
        notes["best_epoch"] = training.best_epoch
        notes["best_dev_r1"] = training.best_dev_r1
        return notes


def tune_adapter(
    lm: LM,
    dataset: Dataset,
    books: dict[str, BookCtx],
    train_books: Sequence[str],
    cfg: GenRetConfig,
    ctx: RunContext,
    *,
    system: str,
    with_toc: bool,
) -> TunedAdapter:
    """Attach a LoRA adapter and train it, or load the cached one trained with the same key."""
    from searchtome.baselines.generative.train import attach_lora, set_lora_state

    data = TrainingSet(
        books,
        train_books,
        build_examples(lm, dataset, books, train_books, cfg),
        dev_sample(dataset, train_books, cfg.dev.max_queries, ctx.seed),
    )
    # The prompt prefix (ToC for STAIR, instruction for DSI) is read by the frozen base model
    # unless adapt_toc: the same in training, dev selection and prediction.
    frozen_prefix = not cfg.training.adapt_toc
    key = adapter_key(lm, data, cfg, system=system, with_toc=with_toc, seed=ctx.seed)
    final = ctx.cache_dir / "adapters" / key
    attach_lora(lm, cfg.lora, ctx.seed)
    cached = cfg.training.cache_adapters and (final / "adapter_config.json").is_file()
    same_everywhere(cached, f"whether the adapter {final} exists")
    if cached:
        log.info("reusing the trained adapter %s", final)
        set_lora_state(lm, _load_lora_weights(final))
        card = read_card(final)
        report = card.training.to_dict() if card and card.training else {}
        return TunedAdapter(key, final, frozen_prefix, report, reused=True)
    log.info(
        "training %s on %d examples of %d book(s); %d dev queries for selection",
        system,
        len(data.examples),
        len(train_books),
        len(data.dev),
    )
    report = _train(lm, data, cfg, frozen_prefix, final, ctx.seed)
    card = new_card(system, frozen_prefix, ctx.seed, cfg.training_fields(), report)
    _save(lm, final, card)
    return TunedAdapter(key, final, frozen_prefix, report, reused=False)


def _train(
    lm: LM, data: TrainingSet, cfg: GenRetConfig, frozen_prefix: bool, final: Path, seed: int
) -> dict[str, Any]:
    """Train the attached adapter, the epoch chosen by dev R@1; the training report."""
    from searchtome.baselines.generative.train import train

    from searchtome.threads import require_applied

    predictor = Predictor(lm, data.books, cfg, frozen_prefix)
    dev, decoding = data.dev, cfg.dev.decoding(cfg.decoding)

    def evaluate(model: LM) -> float:
        require_applied("dev selection")
        predictor.forget()
        # Each process decodes its share of the dev questions; all see every answer.
        got = run_sharded(dev, lambda part: predictor.run(part, decoding, desc="dev"))
        hits = sum(1 for q in dev if got[q.query_id].ids[:1] == [q.leaf_id])
        return hits / len(dev)

    work = work_dir(final)
    work.mkdir(parents=True, exist_ok=True)
    result = train(
        lm,
        data.examples,
        data.prefixes(),
        cfg.training,
        seed=seed,
        evaluate=evaluate if dev else None,
        work_dir=work,
    )
    report = result.to_dict()
    report["examples"] = len(data.examples)
    report["dev_queries"] = len(dev)
    return report


def _save(lm: LM, final: Path, card: AdapterCard) -> None:
    """Write the adapter and its card atomically, then drop the training state."""
    import shutil

    from searchtome.io import atomic_dir, commit_dir, write_json

    if is_main():  # one writer under `accelerate launch`
        tmp = atomic_dir(final)
        lm.peft.save_pretrained(str(tmp))
        write_json(tmp / CARD_FILE, card.to_dict())
        commit_dir(tmp, final)
        shutil.rmtree(work_dir(final), ignore_errors=True)
    barrier()  # the others read the adapter's folder only once it is complete


# -- reading a saved adapter -----------------------------------------------------------------------


def _load_lora_weights(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    file = path / "adapter_model.safetensors"
    if not file.is_file():
        raise SearchTomeError(f"{path}: no adapter_model.safetensors; delete the folder to retrain")
    return load_file(str(file))
