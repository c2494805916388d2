"""What ``searchtome build`` accepts: :class:`BuildOptions`, whose field defaults are the only
place a build default is written (the command's help texts are generated from them).

Fields left ``None`` take the endpoint's default from :data:`LOCAL_DEFAULTS` or
:data:`REMOTE_DEFAULTS`. Options are filled in by :func:`searchtome.config.make_config`:
defaults < a dataset's recorded settings (``--settings-from``) < explicit flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.generate.questions import (
    DEFAULT_N_QUESTIONS,
    DEFAULT_PROMPT,
    FEWSHOT_PROMPT,
    FilterConfig,
)
from searchtome.generate.splits import DEFAULT_RATIOS, WHOLE_CHILD_RATIOS
from searchtome.generate.units import DEFAULT_DROP_BELOW, DEFAULT_MIN_CHARS
from searchtome.limits import DEFAULT_SEED

# Defaults that differ for --endpoint local: a 135M model on a CPU needs a worked example,
# tolerant parsing, few parallel requests and a short reply budget.
# The local server batches concurrent requests (searchtome.llm.server), so it is fed as many
# as it batches. SmolLM2 rarely stops by itself (it repeats its last question), so the token
# budget, not the question count, sets the cost of a unit. Its question count and split ratios
# are the ones the demo's dataset was built with, so the demo stays as it is.
LOCAL_DEFAULTS: dict[str, Any] = {
    "prompt": FEWSHOT_PROMPT,
    "strictness": "lenient",
    "concurrency": 16,
    "max_tokens": 160,
    "questions_per_unit": DEFAULT_N_QUESTIONS,
    "split_ratios": WHOLE_CHILD_RATIOS,
    # Seconds per batch a request may wait behind (searchtome.generate.endpoint.local_timeout):
    # a reply is only sent once its whole batch is decoded, which a loaded CPU stretches.
    "timeout": 120.0,
}
# A capable model (the paper's Mixtral) is asked for more questions about longer units ("auto":
# on The Whole Child's units that asks 3,262 questions, the paper kept 3,190), and the splits
# take the paper's shares over its 18 books; docs/build.md shows the arithmetic.
REMOTE_DEFAULTS: dict[str, Any] = {
    "prompt": DEFAULT_PROMPT,
    "strictness": "json",
    "concurrency": 16,
    "max_tokens": 512,
    "questions_per_unit": "auto",
    "split_ratios": DEFAULT_RATIOS,
    "timeout": 120.0,
}


@dataclass(frozen=True)
class BuildOptions:
    """Everything ``searchtome build`` accepts; ``None`` means "the endpoint's default"."""

    out: Path
    catalog: Path | None = None
    books: tuple[str, ...] | None = None
    source_dir: Path | None = None
    pdf_dir: Path | None = None
    # URLs (several: replicas of one model; a comma-separated text works too), "local" or "cache"
    endpoint: str | tuple[str, ...] | None = None
    api_key: str | None = None
    model: str | None = None
    seed: int = DEFAULT_SEED
    split_seed: int | None = None
    questions_per_unit: int | str | None = None
    concurrency: int | None = None
    prompt: str | None = None
    strictness: str | None = None
    repair: bool = True
    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop: tuple[str, ...] = ()
    sampling_extra: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None  # seconds per request; None: the endpoint's default
    max_attempts: int = 6
    # Above this share of failed units the build writes nothing and fails with a summary:
    # a dataset missing most of its questions is a broken endpoint, not a result.
    max_failed_units: float = 0.5
    cache: Path | None = None
    unit_min_chars: int = DEFAULT_MIN_CHARS
    unit_drop_below: int = DEFAULT_DROP_BELOW
    filters: FilterConfig = field(default_factory=FilterConfig)
    split_rule: str = "by-unit"
    split_ratios: dict[str, float] | None = None
    leaves_in_train: bool = True
    infer_toc: bool = False
    name: str | None = None
    description: str | None = None
    card: bool = True
