"""The submission format as data: file names, predictions fields, ``meta.json`` fields, the id cap.

A submission folder holds one predictions file and ``meta.json``. Each JSON predictions line is
``{"query_id": str, "leaf_ids": [str, ...], "scores": [number, ...]}``: ranked best first, at
most :data:`MAX_IDS` ids, ``scores`` optional and parallel to ``leaf_ids``. A TREC run file
(``qid Q0 docno rank score tag``) is accepted wherever a submission is read.
"""

from __future__ import annotations

from typing import Literal

# The id cap, defined once in the base layer (baselines and metrics read it too).
from searchtome.limits import MAX_IDS as MAX_IDS

META_FILE = "meta.json"
PREDICTION_FILES: tuple[str, ...] = (
    "predictions.jsonl",
    "predictions.jsonl.gz",
    "predictions.trec",
    "predictions.trec.gz",
    "predictions.run",
    "predictions.txt",
)
LINE_FIELDS: tuple[str, ...] = ("query_id", "leaf_ids", "scores")
REQUIRED_LINE_FIELDS: tuple[str, ...] = ("query_id", "leaf_ids")

# meta.json: field → (JSON type name, description). Types are checked by ``meta.check_meta``.
META_REQUIRED: dict[str, tuple[str, str]] = {
    "system": ("string", "system name (the submission folder's name)"),
    "description": ("string", "one or two sentences on what the system does"),
    "models": ("list of strings", "model(s) used, with versions or hub revisions ([] for none)"),
    "trained_on": ("list of strings", "dataset splits the system was trained or tuned on"),
    "hardware": ("string", "hardware the predictions were produced on"),
    "date": ("string", "ISO 8601 date the predictions were produced, e.g. 2025-01-31"),
    "dataset_revision": ("string", "dataset version or revision the predictions are for"),
    "license": ("string", "licence of the predictions and meta data"),
    "command": ("string", "the command that produced the predictions"),
}
META_OPTIONAL: dict[str, tuple[str, str]] = {
    "url": ("string", "paper or code URL"),
    "config": ("object", "the configuration that produced the predictions"),
    "versions": ("object", "package versions, e.g. {'searchtome': '0.1.0'}"),
    "seed": ("integer or null", "random seed"),
    "split": ("string", "the split predicted (default test)"),
    "notes": ("string", "anything else a reader should know"),
    "run_info": (
        "object",
        "machine-readable record of the run: wall time, peak memory, dataset manifest hash, "
        "config overrides, baseline facts",
    ),
}
META_FIELDS = {**META_REQUIRED, **META_OPTIONAL}
# Characters allowed in the text every leaderboard shows: one limit for the validator, the
# static board and the service (whatever its database), so a name fits any table and page.
TEXT_LIMITS: dict[str, int] = {"system": 100, "description": 1000}

RunFormat = Literal["auto", "jsonl", "trec"]
