"""LoRA fine-tuning of a causal LM on (prompt → leaf identifier) examples (needs the ml extra).

* Examples of one book share the prompt prefix (instruction + title + ToC). A step takes
  ``batch_size`` examples of one book, fed ``pack`` at a time as batch rows that all read the
  same prefix keys/values (:class:`~searchtome.baselines.generative.engine.TreeCache`): the prefix is
  computed once per step, not once per example, and every example attends only to the prefix
  and to itself — the same attention it would get alone. With ``adapt_toc=True`` (the paper's setting) the prefix is part
  of the trained sequence and LoRA adapts how the ToC is read; with ``adapt_toc=False`` its
  key/value states come from the frozen base model, are computed once per book and reused by
  every step (several times cheaper on CPU; inference then uses the same frozen prefix).
* Loss: cross-entropy on the identifier tokens and the closing EOS only, averaged over tokens.
* AdamW, linear warm-up then linear decay, gradient clipping; model selection by dev R@1
  after every ``eval_every`` epochs, early stopping after ``patience`` evaluations without
  improvement; the best adapter is kept.
* Resumable: after every epoch the adapter, optimizer, scheduler and RNG states go to
  ``state.pt`` in the run's work folder (atomically); a rerun continues from there.
* Several processes (``accelerate launch --multi_gpu``, :mod:`.parallel`): each takes every N-th
  batch (padded so that all take the same number of steps) and the LoRA gradients are averaged
  across processes before each optimizer step, which is a one-process run with ``grad_accum``
  × N. Rank 0 alone writes the per-epoch state; every rank resumes from it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import random
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from searchtome.baselines.generative.config import LoraSettings, TrainSettings
from searchtome.baselines.generative.engine import LM, PrefixKV, TreeCache
from searchtome.baselines.generative.lower import Lower, lower_states
from searchtome.baselines.generative.lower import loss_backward as lower_backward
from searchtome.baselines.generative.parallel import distributed, same_everywhere
from searchtome.baselines.generative.trainings import STATE_FILE

from searchtome.errors import SearchTomeError
from searchtome.settings import progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Example:
    """One training pair: a query (or passage) suffix and its identifier tokens + EOS."""

    book_id: str
    suffix: tuple[int, ...]
    target: tuple[int, ...]
    kind: str = "query"


@dataclass
class TrainReport:
    epochs: int = 0
    best_epoch: int = 0
    best_dev_r1: float | None = None
    steps: int = 0
    seconds: float = 0.0
    stopped: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@contextlib.contextmanager
def quiet_peft() -> Iterator[None]:
    """Silence the one FutureWarning peft triggers on every wrap, and nothing else.

    peft reads ``model.is_gradient_checkpointing``, which transformers deprecated in favour of
    ``is_activation_checkpointing``; the warning is about peft's code, not ours or the user's.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning
        )
        yield


def attach_lora(lm: LM, lora: LoraSettings, seed: int) -> None:
    """Wrap the model with a fresh LoRA adapter (initialised from ``seed``)."""
    from peft import LoraConfig, get_peft_model

    names = {n.rsplit(".", 1)[-1] for n, _ in lm.model.named_modules()}
    targets = [t for t in lora.targets if t in names]
    if not targets:
        raise SearchTomeError(
            f"none of the LoRA target modules {list(lora.targets)} exist in {lm.name}; "
            f"set lora_targets to module names of this model"
        )
    extra: dict[str, Any] = {}
    if lora.layers:
        n_layers = int(lm.model.config.get_text_config().num_hidden_layers)
        first = max(n_layers - lora.layers, 0)
        # Frozen lower layers also spare the backward pass through them.
        extra["layers_to_transform"] = list(range(first, n_layers))
    torch.manual_seed(seed)
    config = LoraConfig(
        **extra,
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    with quiet_peft():
        lm.peft = get_peft_model(lm.model, config)
    lm.model = lm.peft.get_base_model()
    lm.model.eval()  # the new LoRA dropout modules start in training mode


def load_adapter(lm: LM, path: Path) -> None:
    from peft import PeftModel

    with quiet_peft():
        lm.peft = PeftModel.from_pretrained(lm.model, str(path))
    lm.model = lm.peft.get_base_model()
    lm.model.eval()


def lora_state(lm: LM) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone().cpu() for k, v in get_peft_model_state_dict(lm.peft).items()}


def set_lora_state(lm: LM, state: Mapping[str, torch.Tensor]) -> None:
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(lm.peft, dict(state))


def _segments_loss(
    lm: LM, batch: Sequence[Example], prefix: PrefixKV, group: int
) -> tuple[torch.Tensor, int]:
    """Summed token cross-entropy of examples after the shared prefix, ``group`` examples per
    batch row (each a separate branch of the row's tree)."""
    from searchtome.baselines.generative.engine import auto_group

    g = auto_group(lm, group, len(batch))
    tokens, parents, keep, labels = [], [], [], []
    for lo in range(0, len(batch), g):
        row_t: list[int] = []
        row_p: list[int] = []
        row_k: list[int] = []
        for ex in batch[lo : lo + g]:
            seg = list(ex.suffix) + list(ex.target[:-1])
            start = len(row_t)
            row_t.extend(seg)
            row_p.extend([-1, *range(start, start + len(seg) - 1)])
            first = start + len(ex.suffix) - 1
            row_k.extend(range(first, first + len(ex.target)))
            labels.extend(ex.target)
        tokens.append(row_t)
        parents.append(row_p)
        keep.append(row_k)
    logits = TreeCache(lm, prefix, rows=len(tokens)).extend(tokens, parents, keep=keep)
    target = torch.tensor(labels, device=logits.device)
    loss = torch.nn.functional.cross_entropy(logits.float(), target, reduction="sum")
    return loss, len(labels)


def batch_loss_backward(
    lm: LM,
    batch: Sequence[Example],
    prefix_ids: Sequence[int],
    frozen_prefix: PrefixKV | None,
    *,
    pack: int,
    group: int = 0,
    scale: float = 1.0,
    lower: Lower | None = None,
) -> tuple[float, int]:
    """Backpropagate the mean token cross-entropy of one book's batch; ``(loss, tokens)``.

    The batch is fed ``pack`` examples per forward pass, ``group`` examples per batch row (see
    :func:`~searchtome.baselines.generative.engine.auto_group`), all rows reading the same prefix. With ``frozen_prefix`` each pack is backpropagated at once;
    otherwise the prefix is computed once with gradients, every pack attends to it, and one
    backward pass runs through the prefix at the end. With ``lower`` (:mod:`.lower`) only the
    adapted layers run, from the states the frozen layers below gave once.
    """
    if lower is not None:
        return lower_backward(lm, lower, batch, frozen_prefix, pack=pack, group=group, scale=scale)
    n_tokens = sum(len(ex.target) for ex in batch)
    packs = [batch[i : i + pack] for i in range(0, len(batch), pack)]
    total = 0.0
    if frozen_prefix is not None:
        for part in packs:
            loss, _ = _segments_loss(lm, part, frozen_prefix, group)
            (loss * (scale / n_tokens)).backward()
            total += float(loss.detach())
        return total / n_tokens, n_tokens
    ids = torch.tensor([list(prefix_ids)], device=lm.device)
    from searchtome.baselines.generative.engine import kv_of, new_cache

    _, cache = lm.forward(ids, cache=new_cache(lm.model.config), keep=ids.new_tensor([0]))
    prefix = PrefixKV(kv_of(cache), len(prefix_ids))
    losses = []
    for part in packs:
        loss, _ = _segments_loss(lm, part, prefix, group)
        losses.append(loss)
    summed = torch.stack(losses).sum()
    (summed * (scale / n_tokens)).backward()
    return float(summed.detach()) / n_tokens, n_tokens


def _batches(
    examples: Sequence[Example], batch_size: int, rng: random.Random
) -> list[list[Example]]:
    by_book: dict[str, list[Example]] = {}
    for ex in examples:
        by_book.setdefault(ex.book_id, []).append(ex)
    batches = []
    for book in sorted(by_book):
        items = list(by_book[book])
        rng.shuffle(items)
        batches.extend(items[i : i + batch_size] for i in range(0, len(items), batch_size))
    rng.shuffle(batches)
    return batches


def average_gradients(params: Sequence[torch.nn.Parameter], world: int) -> None:
    """Replace every gradient by its mean over the ``world`` processes, in one all-reduce.

    A rank whose accumulation window held no batch (the batches do not divide evenly) has no
    gradients; it contributes zeros, so every rank still joins the same collective.
    """
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat /= world
    offset = 0
    for p, g in zip(params, grads, strict=True):
        p.grad = flat[offset : offset + g.numel()].view_as(g).clone()
        offset += g.numel()


@dataclass
class _Optimizer:
    """The trainable LoRA parameters, AdamW and the linear warm-up/decay schedule."""

    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: Any

    @classmethod
    def create(cls, lm: LM, settings: TrainSettings, steps_per_epoch: int) -> _Optimizer:
        from transformers import get_linear_schedule_with_warmup

        params = [p for p in lm.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
        total = max(1, steps_per_epoch * settings.max_epochs)
        scheduler = get_linear_schedule_with_warmup(
            optimizer, int(settings.warmup_ratio * total), total
        )
        return cls(params, optimizer, scheduler)

    def step(self, max_grad_norm: float, world: int) -> None:
        """Average the gradients across processes, clip them, step and clear them."""
        if world > 1:
            average_gradients(self.params, world)
        torch.nn.utils.clip_grad_norm_(self.params, max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)


@dataclass
class _Selection:
    """The training report with what model selection carries from epoch to epoch."""

    report: TrainReport = field(default_factory=TrainReport)
    best_state: dict[str, torch.Tensor] | None = None
    bad_evals: int = 0

    def after_epoch(
        self, lm: LM, epoch: int, settings: TrainSettings, evaluate: Callable[[LM], float] | None
    ) -> float | None:
        """Evaluate when due, keep the best adapter state, decide on early stopping; the dev
        R@1 if evaluated."""
        report = self.report
        if evaluate is None:
            self.best_state, report.best_epoch = lora_state(lm), epoch
            return None
        if epoch % settings.eval_every != 0 and epoch != settings.max_epochs:
            return None
        dev = evaluate(lm)
        if report.best_dev_r1 is None or dev > report.best_dev_r1:
            report.best_dev_r1, report.best_epoch = dev, epoch
            self.best_state = lora_state(lm)
            self.bad_evals = 0
        else:
            self.bad_evals += 1
        if self.bad_evals >= settings.patience:
            report.stopped = f"early stop: no dev R@1 gain in {self.bad_evals} evaluations"
        return dev


def _save_state(path: Path, lm: LM, opt: _Optimizer, sel: _Selection) -> None:
    """Everything a rerun needs to continue after this epoch, written atomically."""
    from searchtome.io import atomic_write

    with atomic_write(path, "wb") as fh:
        torch.save(
            {
                "lora": lora_state(lm),
                "optimizer": opt.optimizer.state_dict(),
                "scheduler": opt.scheduler.state_dict(),
                "report": copy.deepcopy(sel.report.to_dict()),
                "best": sel.best_state,
                "bad_evals": sel.bad_evals,
                "torch_rng": torch.get_rng_state(),
            },
            fh,
        )


def _resume(path: Path, lm: LM, opt: _Optimizer) -> _Selection:
    """The state saved after the last finished epoch, restored into ``lm`` and ``opt``."""
    saved = torch.load(path, map_location="cpu", weights_only=False)
    set_lora_state(lm, saved["lora"])
    opt.optimizer.load_state_dict(saved["optimizer"])
    opt.scheduler.load_state_dict(saved["scheduler"])
    sel = _Selection(TrainReport(**saved["report"]), saved["best"], saved["bad_evals"])
    sel.report.resumed_from = sel.report.epochs
    torch.set_rng_state(saved["torch_rng"])
    log.info("resuming training after epoch %d from %s", sel.report.epochs, path)
    return sel


def rank_batches(
    batches: Sequence[list[Example]], rank: int, world: int
) -> list[list[Example] | None]:
    """Every ``world``-th batch from ``rank`` on, padded with ``None`` to the same count on
    every rank: ranks must take the same number of optimizer steps (each one all-reduces), and
    a ``None`` adds no gradient, as a one-process run's short last accumulation window would."""
    mine: list[list[Example] | None] = list(batches[rank::world])
    return mine + [None] * (math.ceil(len(batches) / world) - len(mine))


@dataclass
class _Loop:
    """What every epoch of one training reads: the model, the prompt prefixes (and their
    frozen caches), the settings, the optimiser and the lower layers' states."""

    lm: LM
    prefixes: Mapping[str, Sequence[int]]
    frozen: Mapping[str, PrefixKV]
    settings: TrainSettings
    opt: _Optimizer
    lower: Lower | None
    world: int

    def epoch(
        self, batches: Sequence[list[Example] | None], report: TrainReport, desc: str
    ) -> float:
        """One pass over this process's batches; the mean token loss over all processes."""
        settings, lm = self.settings, self.lm
        total_loss, total_tokens = 0.0, 0
        self.opt.optimizer.zero_grad(set_to_none=True)
        bar = progress(batches, desc=desc, unit="batch", leave=False)
        for i, batch in enumerate(bar, 1):
            if batch is not None:
                book = batch[0].book_id
                loss, n = batch_loss_backward(
                    lm,
                    batch,
                    self.prefixes[book],
                    self.frozen.get(book),
                    pack=settings.pack,
                    group=settings.group,
                    scale=1.0 / settings.grad_accum,
                    lower=self.lower,
                )
                total_loss += loss * n
                total_tokens += n
            if i % settings.grad_accum == 0 or i == len(batches):
                self.opt.step(settings.max_grad_norm, self.world)
                report.steps += 1
        if self.world > 1:  # every rank reports the same figure, the one a single process would
            sums = torch.tensor([total_loss, total_tokens], dtype=torch.float64, device=lm.device)
            torch.distributed.all_reduce(sums)
            total_loss, total_tokens = float(sums[0]), int(sums[1])
        return total_loss / max(total_tokens, 1)


def _frozen_prefixes(
    lm: LM, prefixes: Mapping[str, Sequence[int]], settings: TrainSettings
) -> dict[str, PrefixKV]:
    """The base model's prefix caches, computed once, when LoRA does not read the ToC."""
    if settings.adapt_toc:
        return {}
    with lm.adapter_disabled():
        return {book: lm.prefix_cache(prefixes[book]) for book in sorted(prefixes)}


def _lower_once(
    lm: LM,
    examples: Sequence[Example],
    prefixes: Mapping[str, Sequence[int]],
    settings: TrainSettings,
) -> Lower | None:
    """The frozen layers' states, computed once, where that path applies (:mod:`.lower`)."""
    if not settings.cache_lower_layers or settings.gradient_checkpointing:
        return None
    began = time.perf_counter()
    lower = lower_states(lm, examples, prefixes)
    if lower is not None:
        log.info(
            "layers 0-%d (frozen) computed once for %d book(s): %.0f MiB in %.1f s",
            lower.first - 1,
            len(lower.books),
            lower.nbytes() / 2**20,
            time.perf_counter() - began,
        )
    return lower


def _start(
    lm: LM,
    examples: Sequence[Example],
    prefixes: Mapping[str, Sequence[int]],
    settings: TrainSettings,
) -> _Loop:
    """The optimiser, the caches computed once, and the model set up for training."""
    if lm.peft is None:
        raise SearchTomeError("attach a LoRA adapter before training")
    if not examples:
        raise SearchTomeError("no training examples: the train split of these books is empty")
    world = distributed()[1]
    batches = len(_batches(examples, settings.batch_size, random.Random(0)))
    opt = _Optimizer.create(lm, settings, math.ceil(batches / world / settings.grad_accum))
    if settings.gradient_checkpointing:
        lm.model.gradient_checkpointing_enable()
        lm.model.enable_input_require_grads()
    frozen = _frozen_prefixes(lm, prefixes, settings)
    lower = _lower_once(lm, examples, prefixes, settings)
    return _Loop(lm, prefixes, frozen, settings, opt, lower, world)


def train(
    lm: LM,
    examples: Sequence[Example],
    prefixes: Mapping[str, Sequence[int]],
    settings: TrainSettings,
    *,
    seed: int,
    evaluate: Callable[[LM], float] | None,
    work_dir: Path,
) -> TrainReport:
    """Train the attached LoRA adapter; leaves the best adapter (by ``evaluate``) in place."""
    loop = _start(lm, examples, prefixes, settings)
    rank = distributed()[0]
    state_path = work_dir / STATE_FILE
    sel = _resume(state_path, lm, loop.opt) if state_path.is_file() else _Selection()
    report = sel.report
    # Rank 0 alone writes the state; every rank must have read the same one.
    same_everywhere(report.epochs, f"the epoch to resume after ({state_path})")
    start_epoch = settings.max_epochs + 1 if report.stopped else report.epochs + 1
    began = time.perf_counter() - report.seconds
    for epoch in range(start_epoch, settings.max_epochs + 1):
        lm.model.train()
        batches = _batches(examples, settings.batch_size, random.Random(seed * 100003 + epoch))
        mine = rank_batches(batches, rank, loop.world)
        train_loss = loop.epoch(mine, report, desc=f"epoch {epoch}")
        lm.model.eval()
        row: dict[str, Any] = {
            "epoch": epoch,
            "train_loss": train_loss,
            "lr": loop.opt.scheduler.get_last_lr()[0],
        }
        report.epochs = epoch
        dev = sel.after_epoch(lm, epoch, settings, evaluate)
        if dev is not None:
            row["dev_r1"] = dev
        report.seconds = time.perf_counter() - began
        row["seconds"] = round(report.seconds, 1)
        report.history.append(row)
        log.info("epoch %d: %s", epoch, row)
        if rank == 0:
            _save_state(state_path, lm, loop.opt, sel)
        if report.stopped:
            break
    if not report.stopped:
        report.stopped = f"reached max_epochs={settings.max_epochs}"
    if sel.best_state is not None:
        set_lora_state(lm, sel.best_state)
    lm.model.eval()
    report.seconds = time.perf_counter() - began
    return report
