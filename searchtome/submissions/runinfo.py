"""``run_info`` typed: what a run recorded about itself, part by part.

``run_info`` is open to submitters (any JSON object passes the schema), so reading it never
fails: every part is a lenient :class:`~searchtome.document.Record` (the document kernel), so
a key no part knows is kept in the part's ``extra``, and a value of the wrong type is kept
there too, counted as not recorded, with what is wrong in the part's ``problems`` (a reader
that must not draw from half-read data, like the learning curves, raises on them). A part
written back gives the keys it was read from, so :mod:`~searchtome.submissions.meta` writes a
document read from a committed run byte for byte.

The parts: :class:`RunInfo` (times, memory, dataset, counts, the machine, the model's size),
:class:`Phase` (one phase's time and peak), :class:`DatasetFacts`, :class:`RunReport` (what a
baseline says about its run: ``run_info.notes``), :class:`TrainingReport` with its history of
:class:`Epoch` rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from searchtome.document import FieldError, Mode, Reading, Record, expected, read_record


@dataclass(frozen=True, kw_only=True)
class Part(Record):
    """A part of ``run_info``: read leniently (the content is the submitter's)."""

    MODE: ClassVar[Mode] = Mode.LENIENT


# -- the parts -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Phase(Part):
    """One phase of a run (training, prediction): wall time and the phase's own RSS peak."""

    peak_rss_mib: float | None = None
    wall_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class DatasetFacts(Part):
    """The dataset a run read: where (portable), its name, revision label and manifest hash."""

    path: str | None = None
    name: str | None = None
    revision: str | None = None
    manifest_sha256: str | None = None
    books: tuple[str, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Epoch(Part):
    """One epoch of a training history: the dev R@1 after it (None: not evaluated), ..."""

    epoch: int
    dev_r1: float | None = None
    train_loss: float | None = None
    seconds: float | None = None  # the training's wall time at the epoch's end
    lr: float | None = None


HISTORY_FIELD = "run_info.notes.training"


def _history(value: Any, where: str, how: Reading) -> tuple[Epoch, ...]:
    """A history's rows, checked: objects whose epochs are whole numbers that increase.

    A curve drawn from half-read rows would mislead, so a malformed history is one problem for
    the whole field (the first one found), not rows quietly dropped.
    """
    if not isinstance(value, list):
        raise FieldError(where, expected("a list of epochs", value))
    rows, last = [], 0
    for i, row in enumerate(value):
        at = f"{where}[{i}]"
        epoch = row.get("epoch") if isinstance(row, Mapping) else None
        if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch <= last:
            # epochs count from 1; a table row per epoch needs each once
            bound = f"the previous epoch ({last})" if i else "0"
            raise FieldError(f"{at}.epoch", expected(f"more than {bound}", epoch))
        rows.append(read_record(Epoch, row, at, Mode.STRICT))
        last = rows[-1].epoch
    return tuple(rows)


@dataclass(frozen=True, kw_only=True)
class TrainingReport(Part):
    """What a training recorded: the generative adapter's (a history of epochs) or the encoder
    fine-tuning's (dev R@1 per epoch, the loss, the examples)."""

    history: tuple[Epoch, ...] | None = field(default=None, metadata={"read": _history})
    epochs: int | None = None
    best_epoch: int | None = None
    best_dev_r1: float | None = None
    dev_queries: int | None = None
    dev_r1_per_epoch: tuple[float, ...] | None = None
    examples: int | None = None
    n_examples: int | None = None
    n_pairs: int | None = None  # a cross-encoder's (query, passage) training pairs
    steps: int | None = None
    resumed_from: int | None = None
    seconds: float | None = None
    stopped: str | None = None
    loss: str | None = None
    parameters: int | None = None
    seed: int | None = None
    threads: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunReport(Part):
    """What a baseline says about its run (``run_info.notes``), filled through
    :meth:`~searchtome.baselines.registry.RunContext.record`.

    ``models``, ``description``, ``parameters`` and ``dtype`` are the runner's to lift out: into
    ``meta.json``'s ``models`` and ``description`` and ``run_info``'s ``parameters`` and
    ``dtype``. The rest is written as the notes, in this order (strings also go into
    ``meta.json``'s one-line ``notes``, in this order).
    """

    models: tuple[str, ...] | None = None
    description: str | None = None
    parameters: int | None = None  # the model's parameter count, LoRA layers included
    dtype: str | None = None  # what the model really ran in
    # lexical
    tokenizer: str | None = None
    similarity: str | None = None
    # dense and hybrid
    encoder: Mapping[str, Any] | None = None  # the encoder's config and cache counts
    n_passages: int | None = None
    leaf_score: str | None = None
    n_chunks: int | None = None
    n_internal_nodes: int | None = None
    tree: str | None = None
    reconstruction: str | None = None
    leaf_rule: str | None = None
    # fine-tuned encoders
    model_reused: bool | None = None
    finetuned_model: str | None = None
    cross_encoder: Mapping[str, Any] | None = None
    first_stage: Mapping[str, Any] | None = None  # a reranker's candidate run and its counts
    # generative
    decode: str | None = None
    prompt_prefix_tokens: Mapping[str, Any] | None = None
    adapter_reused: bool | None = None
    adapter: str | None = None
    training: TrainingReport | None = None
    train_seconds: float | None = None
    epochs: int | None = None
    best_epoch: int | None = None
    best_dev_r1: float | None = None
    setup_and_train_wall_s: float | None = None
    processes: int | None = None
    predict_seconds: float | None = None
    non_leaf_at_1: int | None = None
    invalid_at_1: int | None = None
    empty: int | None = None
    # zero-shot
    backend: str | None = None
    endpoint: str | None = None  # the OpenAI-compatible server's host
    replies_cached: int | None = None
    replies_generated: int | None = None
    rank1_leaf: int | None = None
    rank1_non_leaf: int | None = field(default=None, metadata={"key": "rank1_non-leaf"})
    rank1_invalid: int | None = None
    rank1_empty: int | None = None

    def texts(self) -> list[tuple[str, str]]:
        """(key, text) of every string note, in order (the lifted fields not): ``meta.json``'s
        one-line ``notes``."""
        lifted = ("description", "dtype")
        return [(k, v) for k, v in self.to_dict().items() if isinstance(v, str) and k not in lifted]


@dataclass(frozen=True, kw_only=True)
class RunInfo(Part):
    """``run_info``: the machine-readable record of a run (see ``docs/submissions.md``)."""

    # Written even when unknown (null): the runner always records them.
    NULLS: ClassVar[frozenset[str]] = frozenset(
        {"dtype", "training_wall_s", "prediction_wall_s", "system_type", "parameters"}
    )
    system: str | None = None
    baseline: str | None = None
    split: str | None = None
    seed: int | None = None
    wall_time_s: float | None = None
    peak_rss_mib: float | None = None
    peak_gpu_mib: float | None = None
    memory_note: str | None = None
    phases: Mapping[str, Phase] | None = None
    training_wall_s: float | None = None
    prediction_wall_s: float | None = None
    dataset: DatasetFacts | None = None
    n_queries: int | None = None
    depth: int | None = None
    overrides: Mapping[str, Any] | None = None
    threads: Mapping[str, Any] | None = None
    machine: Mapping[str, Any] | None = None
    dtype: str | None = None
    system_type: str | None = None
    parameters: float | None = None  # a count (a submitter may write 7.2e9)
    notes: RunReport | None = None

    @property
    def report(self) -> RunReport:
        """The baseline's notes (an empty report when the run recorded none)."""
        return self.notes if self.notes is not None else RunReport()

    def phase(self, name: str) -> Phase:
        """Phase ``name``'s record (an empty one when not recorded)."""
        return (self.phases or {}).get(name) or Phase()
