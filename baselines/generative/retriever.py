"""The generative-retrieval pipeline behind ``stair`` and ``dsi`` (needs the ml extra).

Per book: ToC → identifiers, token trie and prompt prefix. Then: fine-tune a LoRA adapter on
the training questions of every book (cached by model + data + config + seed), pick the epoch
by dev R@1, and rank each query's leaves with one of three decoders:

* ``beam`` — trie-constrained beam search (the paper's mode): ``num_beams`` beams, ranked by
  log-probability; only leaf identifiers can come out.
* ``exact`` — the log-probability of every leaf identifier of the book, computed exactly over
  the cached prefix (all leaves ranked, no beam approximation).
* ``free`` — unconstrained beam search, only to measure hallucination: outputs that are no
  leaf identifier become a non-leaf node id or an invalid id (``llm_common.IdentifierIndex``).
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchtome.baselines.generative.common import (
    DSI_INSTRUCTION,
    DSI_SEMANTIC_INSTRUCTION,
    LORA_TARGETS,
    PASSAGE_LABEL,
    QUERY_LABEL,
    STAIR_INSTRUCTION,
    IdentifierIndex,
    PromptTemplate,
    TokenTrie,
    leaf_identifiers,
    semantic_id_strings,
    semantic_ids,
    serialize_toc,
    title_path,
)

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.io import stable_hash
from searchtome.records import Query, Run
from searchtome.settings import progress

if TYPE_CHECKING:
    from searchtome.baselines.generative.engine import LM, PrefixKV
    from searchtome.baselines.registry import RunContext

    from searchtome.dataset.layout import Dataset

log = logging.getLogger(__name__)

DECODERS: tuple[str, ...] = ("beam", "exact", "free")
DEV_DECODERS: tuple[str, ...] = ("greedy", "beam", "exact")
IDENTIFIERS: tuple[str, ...] = ("path", "semantic")
RESTRICTED: tuple[str, ...] = ("refuse", "exclude", "allow")
RESTRICTION = "no-llm-training"

# Fields that do not change the trained adapter (left out of its cache key).
_INFERENCE_ONLY = {
    "device",
    "threads",
    "decode",
    "num_beams",
    "length_penalty",
    "query_batch",
    "cache_adapters",
    "adapter",
    "max_output_tokens",
}


@dataclass(frozen=True)
class GenRetConfig:
    """Settings shared by STAIR and DSI; defaults are the CPU settings (see docs/llm-baselines.md)."""

    model: str = "smollm2"
    dtype: str = "auto"  # float32 on CPU, bfloat16 on GPU
    device: str = "auto"
    threads: int = 0  # torch intra-op threads; 0 = torch's default
    identifiers: str = "path"
    semantic_k: int = 10
    semantic_c: int = 100
    max_input_tokens: int = 14000
    max_output_tokens: int = 64
    # training
    train: bool = True
    adapter: str = ""  # a saved adapter folder to use instead of training
    indexing: bool = False  # add passage → leaf examples (DSI-style indexing)
    index_max_tokens: int = 128
    restricted: str = "refuse"  # books marked no-llm-training: refuse, exclude from training, allow
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_layers: int = 10  # LoRA on the top N layers only (0 = all)
    lora_targets: tuple[str, ...] = LORA_TARGETS
    lr: float = 2e-3
    weight_decay: float = 0.0
    warmup_ratio: float = 0.1
    batch_size: int = 16
    pack: int = 16  # training examples per forward pass (lower it to save memory)
    # Items (training examples, queries) per batch row; each is a branch of the row's token
    # tree over the shared prefix. 0 = auto: all in one row on CPU, one per row on GPU.
    tree_group: int = 0
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    max_epochs: int = 6
    patience: int = 2
    eval_every: int = 1
    adapt_toc: bool = False
    gradient_checkpointing: bool = False
    dev_max_queries: int = 100  # dev queries used for model selection; 0 = all
    dev_decode: str = "greedy"
    # inference
    decode: str = "beam"
    num_beams: int = 3
    length_penalty: float = 0.0
    query_batch: int = 32
    cache_adapters: bool = True

    def __post_init__(self) -> None:
        for name, value, choices in (
            ("decode", self.decode, DECODERS),
            ("dev_decode", self.dev_decode, DEV_DECODERS),
            ("identifiers", self.identifiers, IDENTIFIERS),
            ("restricted", self.restricted, RESTRICTED),
        ):
            if value not in choices:
                raise unknown_name(f"{name} value", value, choices)
        for name in ("batch_size", "pack", "grad_accum", "num_beams", "query_batch", "eval_every"):
            if getattr(self, name) < 1:
                raise SearchTomeError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.max_epochs < 0 or self.patience < 1:
            raise SearchTomeError("max_epochs must be >= 0 and patience >= 1")

    @property
    def free_form(self) -> bool:
        """Unconstrained decoding may write non-leaf or invalid ids (kept for the scorer)."""
        return self.decode == "free"

    def training_fields(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in _INFERENCE_ONLY
        }


@dataclass
class BookCtx:
    """Everything a book needs for prompting and decoding."""

    book_id: str
    title: str
    identifiers: dict[str, str]  # leaf id → identifier string
    index: IdentifierIndex
    prefix_ids: list[int]
    tail_ids: list[int]
    trie: TokenTrie

    def suffix_ids(self, lm: LM, text: str, label: str, budget: int) -> list[int]:
        head = lm.encode(f"{label}: {' '.join(text.split())}")
        room = budget - len(self.prefix_ids) - len(self.tail_ids)
        if room < 8:
            raise SearchTomeError(
                f"book {self.book_id}: the prompt prefix takes {len(self.prefix_ids)} tokens, "
                f"leaving {room} of max_input_tokens={budget} for the query; raise max_input_tokens"
            )
        return head[:room] + self.tail_ids


def _template(with_toc: bool, identifiers: str) -> PromptTemplate:
    if with_toc:
        return PromptTemplate(STAIR_INSTRUCTION, with_toc=True)
    instruction = DSI_SEMANTIC_INSTRUCTION if identifiers == "semantic" else DSI_INSTRUCTION
    return PromptTemplate(instruction, with_toc=False)


def _semantic_identifiers(dataset: Dataset, book_id: str, cfg: GenRetConfig, seed: int) -> dict:
    from searchtome.baselines.encoders import Encoder, EncoderConfig

    leaves = dataset.leaves(book_id)
    texts = [f"{title_path(x.path)}. {x.text}" for x in leaves]
    vectors = Encoder(EncoderConfig()).encode_passages(texts, desc=f"embedding {book_id} leaves")
    ids = semantic_id_strings(semantic_ids(vectors, k=cfg.semantic_k, c=cfg.semantic_c, seed=seed))
    return {x.leaf_id: s for x, s in zip(leaves, ids, strict=True)}


def book_context(
    lm: LM, dataset: Dataset, book_id: str, cfg: GenRetConfig, *, with_toc: bool, seed: int
) -> BookCtx:
    nodes = dataset.toc(book_id)
    if not nodes:
        raise SearchTomeError(f"{dataset.root}: book {book_id!r} has no ToC nodes")
    leaf_ids = {x.leaf_id for x in dataset.leaves(book_id)}
    if cfg.identifiers == "semantic":
        idents = _semantic_identifiers(dataset, book_id, cfg, seed)
        index = IdentifierIndex(book_id, idents)
    else:
        idents = {k: v for k, v in leaf_identifiers(nodes).items() if k in leaf_ids}
        index = IdentifierIndex.for_book(nodes, idents)
    missing = leaf_ids - set(idents)
    if missing:
        raise SearchTomeError(
            f"{dataset.root}: leaves {sorted(missing)[:3]} of {book_id!r} are not ToC leaves"
        )
    title = dataset.books[book_id].book.title
    prefix, pattern = _template(with_toc, cfg.identifiers).split(
        lm.tokenizer, title, serialize_toc(nodes)
    )
    tail = pattern.split("{text}", 1)[1].replace("{{", "{").replace("}}", "}")
    trie = TokenTrie({lid: [*lm.encode(s), lm.eos_id] for lid, s in idents.items()}, lm.eos_id)
    if trie.max_length > cfg.max_output_tokens:
        log.warning(
            "%s: the longest identifier takes %d tokens (> max_output_tokens=%d); constrained "
            "decoding still completes it",
            book_id,
            trie.max_length,
            cfg.max_output_tokens,
        )
    return BookCtx(book_id, title, idents, index, lm.encode(prefix), lm.encode(tail), trie)


# -- restrictions, adapters ------------------------------------------------------------------------


def training_books(dataset: Dataset, cfg: GenRetConfig) -> list[str]:
    """Books whose training questions may be used; refuses restricted books unless told."""
    books = sorted({q.book_id for q in dataset.queries("train")})
    restricted = [b for b in books if dataset.books[b].book.restricted(RESTRICTION)]
    if restricted and cfg.restricted == "refuse":
        raise SearchTomeError(
            f"{dataset.root}: book(s) {', '.join(restricted)} are marked {RESTRICTION!r} in "
            "the catalog; fine-tuning on them is refused. Use --set restricted=exclude to train "
            "without them, or --set restricted=allow if you have the right to"
        )
    if cfg.restricted == "exclude":
        books = [b for b in books if b not in restricted]
    return books


def model_fingerprint(name: str) -> dict[str, Any]:
    from searchtome.llm.models import resolve

    path = Path(resolve(name))
    info: dict[str, Any] = {"name": name}
    if path.is_dir():
        cfg = path / "config.json"
        info["config"] = cfg.read_text(encoding="utf-8") if cfg.is_file() else None
        info["weights"] = sorted(
            (p.name, p.stat().st_size)
            for p in path.iterdir()
            if p.suffix in {".safetensors", ".bin", ".gguf"}
        )
    return info


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "peft"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


# -- decoding --------------------------------------------------------------------------------------


@dataclass
class Decoded:
    ids: list[str]
    scores: list[float]
    kinds: list[str]


def decode_queries(
    lm: LM,
    book: BookCtx,
    prefix: PrefixKV,
    suffixes: Sequence[Sequence[int]],
    *,
    mode: str,
    num_beams: int,
    length_penalty: float,
    max_output_tokens: int,
    group: int = 0,
) -> list[Decoded]:
    from searchtome.baselines.generative.engine import (
        beam_search,
        decode_text,
        rank_from_scores,
        score_trie,
    )

    if mode == "exact":
        out = []
        for suf in suffixes:
            ranked = rank_from_scores(score_trie(lm, prefix, suf, book.trie))
            out.append(
                Decoded([k for k, _ in ranked], [s for _, s in ranked], ["leaf"] * len(ranked))
            )
        return out
    constrained = mode != "free"
    results = beam_search(
        lm,
        prefix,
        suffixes,
        trie=book.trie if constrained else None,
        num_beams=num_beams,
        max_new_tokens=max_output_tokens,
        length_penalty=length_penalty,
        group=group,
    )
    out = []
    for hyps in results:
        dec = Decoded([], [], [])
        for tokens, score in hyps:
            if constrained:
                key = book.trie.lookup(tokens)
                assert key is not None  # beam_search checked it
                item, kind = key, "leaf"
            else:
                item, kind = book.index.match(decode_text(lm, tokens))
            if item in dec.ids:  # two token sequences, one string: keep the better one
                continue
            dec.ids.append(item)
            dec.scores.append(float(score))
            dec.kinds.append(kind)
        out.append(dec)
    return out


class Predictor:
    """Decodes queries book by book, computing each book's prefix cache once."""

    def __init__(self, lm: LM, books: dict[str, BookCtx], cfg: GenRetConfig, frozen_prefix: bool):
        self.lm, self.books, self.cfg, self.frozen_prefix = lm, books, cfg, frozen_prefix
        self._prefix: dict[str, PrefixKV] = {}

    def prefix(self, book_id: str) -> PrefixKV:
        if book_id not in self._prefix:
            ids = self.books[book_id].prefix_ids
            if self.frozen_prefix:
                with self.lm.adapter_disabled():
                    self._prefix[book_id] = self.lm.prefix_cache(ids)
            else:
                self._prefix[book_id] = self.lm.prefix_cache(ids)
        return self._prefix[book_id]

    def forget(self) -> None:
        """Drop cached prefixes (after the adapter changed)."""
        self._prefix.clear()

    def run(
        self,
        queries: Sequence[Query],
        *,
        mode: str,
        num_beams: int,
        desc: str = "decoding",
        done: dict[str, Decoded] | None = None,
        on_batch: Any = None,
    ) -> dict[str, Decoded]:
        cfg = self.cfg
        out: dict[str, Decoded] = dict(done or {})
        todo = [q for q in queries if q.query_id not in out]
        by_book: dict[str, list[Query]] = {}
        for q in todo:
            by_book.setdefault(q.book_id, []).append(q)
        batch = 1 if mode == "exact" else cfg.query_batch
        bar = progress(total=len(todo), desc=desc, unit="query")
        for book_id in sorted(by_book):
            book = self.books[book_id]
            prefix = self.prefix(book_id)
            items = by_book[book_id]
            for lo in range(0, len(items), batch):
                part = items[lo : lo + batch]
                suffixes = [
                    book.suffix_ids(self.lm, q.text, QUERY_LABEL, cfg.max_input_tokens)
                    for q in part
                ]
                decoded = decode_queries(
                    self.lm,
                    book,
                    prefix,
                    suffixes,
                    mode=mode,
                    num_beams=num_beams,
                    length_penalty=cfg.length_penalty,
                    max_output_tokens=cfg.max_output_tokens,
                    group=cfg.tree_group,
                )
                new = {q.query_id: d for q, d in zip(part, decoded, strict=True)}
                out.update(new)
                if on_batch is not None:
                    on_batch(new)
                bar.update(len(part))
        bar.close()
        return out


def _read_partial(path: Path) -> dict[str, Decoded]:
    out: dict[str, Decoded] = {}
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: redo that query
                continue
            out[row["q"]] = Decoded(row["ids"], row["scores"], row["kinds"])
    return out


def _append_partial(path: Path, rows: dict[str, Decoded]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for qid, d in rows.items():
            fh.write(json.dumps({"q": qid, "ids": d.ids, "scores": d.scores, "kinds": d.kinds}))
            fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


# -- the pipeline ----------------------------------------------------------------------------------


def _dev_sample(dataset: Dataset, books: Sequence[str], n: int, seed: int) -> list[Query]:
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

    examples = []
    for q in dataset.queries("train"):
        if q.book_id not in train_books:
            continue
        book = books[q.book_id]
        examples.append(
            Example(
                q.book_id,
                tuple(book.suffix_ids(lm, q.text, QUERY_LABEL, cfg.max_input_tokens)),
                book.trie.sequences[q.leaf_id],
            )
        )
    if cfg.indexing:
        for book_id in train_books:
            book = books[book_id]
            for para in (p for x in dataset.leaves(book_id) for p in dataset.paragraphs(x.leaf_id)):
                text = lm.tokenizer.decode(lm.encode(para.text)[: cfg.index_max_tokens])
                examples.append(
                    Example(
                        book_id,
                        tuple(book.suffix_ids(lm, text, PASSAGE_LABEL, cfg.max_input_tokens)),
                        book.trie.sequences[para.leaf_id],
                        kind="index",
                    )
                )
    return examples


def run_generative(
    dataset: Dataset,
    split: str,
    cfg: GenRetConfig,
    ctx: RunContext,
    *,
    system: str,
    with_toc: bool,
) -> Run:
    import torch
    from searchtome.baselines.generative.engine import load_lm
    from searchtome.baselines.generative.train import (
        LoraSettings,
        TrainSettings,
        attach_lora,
        load_adapter,
        train,
    )

    from searchtome.io import atomic_dir, commit_dir, write_json

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = cfg.device
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from accelerate import PartialState

        device = str(PartialState().device)
    torch.manual_seed(ctx.seed)
    lm = load_lm(cfg.model, dtype=cfg.dtype, device=device)
    queries = dataset.queries(split)
    wanted = sorted({q.book_id for q in queries})
    fine_tune = cfg.train and not cfg.adapter and cfg.max_epochs > 0
    train_books = training_books(dataset, cfg) if fine_tune else []
    all_books = sorted(set(wanted) | set(train_books))
    t0 = time.perf_counter()
    books = {
        b: book_context(lm, dataset, b, cfg, with_toc=with_toc, seed=ctx.seed) for b in all_books
    }
    notes: dict[str, Any] = {
        "models": [cfg.model],
        "decode": cfg.decode,
        "prompt_prefix_tokens": {b: len(c.prefix_ids) for b, c in books.items()},
    }
    frozen_prefix = False
    adapter_key = None
    if cfg.adapter:
        load_adapter(lm, Path(cfg.adapter))
        frozen_prefix = _adapter_meta(Path(cfg.adapter)).get("frozen_prefix", False)
        notes["adapter"] = cfg.adapter
    elif fine_tune:
        examples = build_examples(lm, dataset, books, train_books, cfg)
        dev = _dev_sample(dataset, train_books, cfg.dev_max_queries, ctx.seed)
        # The prompt prefix (ToC for STAIR, instruction for DSI) is read by the frozen base model
        # unless adapt_toc: the same in training, dev selection and prediction.
        frozen_prefix = not cfg.adapt_toc
        adapter_key = stable_hash(
            {
                "system": system,
                "with_toc": with_toc,
                "model": model_fingerprint(cfg.model),
                "dtype": str(lm.dtype),
                "config": cfg.training_fields(),
                "examples": [[e.book_id, e.suffix, e.target, e.kind] for e in examples],
                "prefixes": {b: books[b].prefix_ids for b in train_books},
                "dev": [[q.query_id, q.leaf_id] for q in dev],
                "seed": ctx.seed,
                "versions": _versions(),
            }
        )[:20]
        root = ctx.cache_dir / "adapters"
        final = root / adapter_key
        attach_lora(
            lm,
            LoraSettings(
                r=cfg.lora_r,
                alpha=cfg.lora_alpha,
                dropout=cfg.lora_dropout,
                layers=cfg.lora_layers,
                targets=cfg.lora_targets,
            ),
            ctx.seed,
        )
        if cfg.cache_adapters and (final / "adapter_config.json").is_file():
            log.info("reusing the trained adapter %s", final)
            from searchtome.baselines.generative.train import set_lora_state

            set_lora_state(lm, _load_lora_weights(final))
            report = _adapter_meta(final).get("training", {})
            notes["adapter_reused"] = True
        else:
            predictor = Predictor(lm, books, cfg, frozen_prefix)

            def evaluate(model: LM) -> float:
                predictor.forget()
                mode = "beam" if cfg.dev_decode == "greedy" else cfg.dev_decode
                beams = 1 if cfg.dev_decode == "greedy" else cfg.num_beams
                got = predictor.run(dev, mode=mode, num_beams=beams, desc="dev")
                hits = sum(1 for q in dev if got[q.query_id].ids[:1] == [q.leaf_id])
                return hits / len(dev)

            settings = TrainSettings(
                lr=cfg.lr,
                weight_decay=cfg.weight_decay,
                warmup_ratio=cfg.warmup_ratio,
                batch_size=cfg.batch_size,
                pack=cfg.pack,
                group=cfg.tree_group,
                grad_accum=cfg.grad_accum,
                max_grad_norm=cfg.max_grad_norm,
                max_epochs=cfg.max_epochs,
                patience=cfg.patience,
                eval_every=cfg.eval_every,
                adapt_toc=cfg.adapt_toc,
                gradient_checkpointing=cfg.gradient_checkpointing,
            )
            work = root / f".{adapter_key}.work"
            work.mkdir(parents=True, exist_ok=True)
            log.info(
                "training %s on %d examples of %d book(s); %d dev queries for selection",
                system,
                len(examples),
                len(train_books),
                len(dev),
            )
            result = train(
                lm,
                examples,
                {b: books[b].prefix_ids for b in train_books},
                settings,
                seed=ctx.seed,
                evaluate=evaluate if dev else None,
                work_dir=work,
            )
            report = result.to_dict()
            report["examples"] = len(examples)
            report["dev_queries"] = len(dev)
            if _rank() == 0:  # one writer under `accelerate launch`
                tmp = atomic_dir(final)
                lm.peft.save_pretrained(str(tmp))
                write_json(
                    tmp / "searchtome.json",
                    {
                        "system": system,
                        "frozen_prefix": frozen_prefix,
                        "training": report,
                        "config": cfg.training_fields(),
                        "seed": ctx.seed,
                    },
                )
                commit_dir(tmp, final)
                import shutil

                shutil.rmtree(work, ignore_errors=True)
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.barrier()
        notes["adapter"] = str(final)
        notes["training"] = report
        notes["train_seconds"] = round(report.get("seconds", 0.0), 1)
        notes["epochs"] = report.get("epochs")
        notes["best_epoch"] = report.get("best_epoch")
        notes["best_dev_r1"] = report.get("best_dev_r1")
    notes["setup_and_train_wall_s"] = round(time.perf_counter() - t0, 1)

    # Predictions, resumable: finished batches are appended to a partial file.
    t1 = time.perf_counter()
    partial_key = stable_hash(
        {
            "adapter": adapter_key or cfg.adapter or "base",
            "model": cfg.model,
            "split": split,
            "queries": [q.query_id for q in queries],
            "decode": cfg.decode,
            "beams": cfg.num_beams,
            "lp": cfg.length_penalty,
            "out": cfg.max_output_tokens,
            "with_toc": with_toc,
            "train": fine_tune,
            "system": system,
            "config": cfg.training_fields(),
        }
    )[:20]
    partial = ctx.cache_dir / "predictions" / f"{partial_key}.jsonl"
    done = _read_partial(partial)
    if done:
        log.info(
            "resuming: %d of %d queries already decoded (%s)", len(done), len(queries), partial
        )
    predictor = Predictor(lm, books, cfg, frozen_prefix)
    lm.model.eval()
    decoded = predictor.run(
        queries,
        mode=cfg.decode,
        num_beams=cfg.num_beams,
        desc=f"{system} {split}",
        done=done,
        on_batch=(lambda rows: _append_partial(partial, rows)) if _rank() == 0 else None,
    )
    notes["predict_seconds"] = round(time.perf_counter() - t1, 1)
    rankings = {q.query_id: tuple(decoded[q.query_id].ids[:100]) for q in queries}
    scores = {q.query_id: tuple(decoded[q.query_id].scores[:100]) for q in queries}
    kinds = [decoded[q.query_id].kinds[:1] for q in queries]
    notes["non_leaf_at_1"] = sum(1 for k in kinds if k == ["non-leaf"])
    notes["invalid_at_1"] = sum(1 for k in kinds if k == ["invalid"])
    notes["empty"] = sum(1 for k in kinds if not k)
    ctx.notes.update(notes)
    return Run(name=system, rankings=rankings, scores=scores, meta={"config": asdict(cfg)})


def _rank() -> int:
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return int(torch.distributed.get_rank())
    return 0


def _adapter_meta(path: Path) -> dict[str, Any]:
    meta = path / "searchtome.json"
    return json.loads(meta.read_text(encoding="utf-8")) if meta.is_file() else {}


def _load_lora_weights(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    file = path / "adapter_model.safetensors"
    if not file.is_file():
        raise SearchTomeError(f"{path}: no adapter_model.safetensors; delete the folder to retrain")
    return load_file(str(file))
