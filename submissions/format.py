"""The submission format: reading and writing ``submissions/<system>/``.

A submission folder holds ``predictions.jsonl`` (or ``predictions.jsonl.gz``) and ``meta.json``.
Each predictions line is ``{"query_id": str, "leaf_ids": [str, ...], "scores": [number, ...]}``:
ranked best first, at most :data:`MAX_IDS` ids, ``scores`` optional and parallel to ``leaf_ids``.
A TREC run file (``qid Q0 docno rank score tag``) is accepted wherever a submission is read; the
format is told from the content (``run_format="trec"`` forces it). See ``searchtome.metrics.measures`` for
the tie rule.

Reading is defensive: file size, decompressed size and line length are capped before anything is
parsed (:class:`Limits`), so a hostile or broken upload cannot exhaust memory. Problems come back
as :class:`Problem` records that print as ``file:line: field: what is wrong``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import math
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write, dumps
from searchtome.metrics.measures import TIE_RULE, count_ties, order_by_score
from searchtome.records import Run, Submission

log = logging.getLogger(__name__)

MAX_IDS = 100
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

# meta.json: field → (JSON type name, description). Types are checked by the validator.
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

Severity = Literal["error", "warning"]
RunFormat = Literal["auto", "jsonl", "trec"]


@dataclass(frozen=True)
class Limits:
    """Caps applied before parsing. Generous for real submissions, fatal for bombs."""

    max_file_bytes: int = 256 << 20  # on disk, compressed or not
    max_decompressed_bytes: int = 1 << 30
    max_line_bytes: int = 1 << 20
    max_meta_bytes: int = 1 << 20


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Problem:
    """One finding about a submission, printed as ``file:line: field: message``.

    ``line`` is 1-based; ``None`` for findings about a whole file (``file: field: message``).
    ``code`` is a stable machine-readable kind, e.g. ``duplicate-query``.
    """

    path: str
    line: int | None
    field: str
    message: str
    code: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "code": self.code,
            "severity": self.severity,
        }


@dataclass
class Predictions:
    """A parsed predictions file: the run, where each query's line is, and what was wrong."""

    path: Path
    format: Literal["jsonl", "trec"]
    run: Run
    line_of: dict[str, int]
    problems: list[Problem] = field(default_factory=list)
    tags: tuple[str, ...] = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


@dataclass
class LoadedSubmission:
    """A submission with every problem found while reading it (nothing raised)."""

    submission: Submission
    predictions: Predictions | None
    meta_path: Path | None
    meta_lines: dict[str, int]
    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


# -- low-level reading ----------------------------------------------------------------------------


def _display(path: Path) -> str:
    return str(path)


def iter_lines(
    path: PathLike, limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[int, str | None, Problem | None]]:
    """Yield ``(line number, text, None)`` or ``(line number, None, problem)``.

    Gzip is recognised by its magic bytes, not the file name. Reading stops with a problem when
    the file, its decompressed content or a line exceeds the limits.
    """
    path = Path(path)
    shown = _display(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        yield 0, None, Problem(shown, None, "file", "not found", "missing-file")
        return
    if size > limits.max_file_bytes:
        yield (
            0,
            None,
            Problem(
                shown,
                None,
                "size",
                f"{size:,} bytes exceeds the {limits.max_file_bytes:,}-byte limit; "
                "compress it (predictions.jsonl.gz) or cut rankings to 100 ids",
                "too-large",
            ),
        )
        return
    with open(path, "rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
        total = 0
        lineno = 0
        first = True

        def bomb() -> Problem:
            return Problem(
                shown,
                None,
                "gzip" if compressed else "size",
                f"content exceeds {limits.max_decompressed_bytes:,} bytes "
                + ("when decompressed (decompression bomb?)" if compressed else ""),
                "decompression-bomb" if compressed else "too-large",
            )

        while True:
            try:
                chunk = stream.readline(limits.max_line_bytes + 1)
            except (OSError, EOFError, zlib.error) as exc:
                yield (
                    lineno + 1,
                    None,
                    Problem(shown, lineno + 1, "gzip", f"corrupt compressed data ({exc})", "gzip"),
                )
                return
            if not chunk:
                return
            total += len(chunk)
            if total > limits.max_decompressed_bytes:
                yield lineno + 1, None, bomb()
                return
            lineno += 1
            if len(chunk) > limits.max_line_bytes:
                # Skip the rest of the overlong line without holding it in memory.
                while chunk and not chunk.endswith(b"\n"):
                    try:
                        chunk = stream.readline(1 << 16)
                    except (OSError, EOFError, zlib.error):
                        break
                    total += len(chunk)
                    if total > limits.max_decompressed_bytes:
                        yield lineno, None, bomb()
                        return
                yield (
                    lineno,
                    None,
                    Problem(
                        shown,
                        lineno,
                        "line",
                        f"longer than the {limits.max_line_bytes:,}-byte limit",
                        "line-too-long",
                    ),
                )
                continue
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield (
                    lineno,
                    None,
                    Problem(
                        shown,
                        lineno,
                        "encoding",
                        f"not valid UTF-8 (byte {exc.start + 1})",
                        "encoding",
                    ),
                )
                continue
            if first:
                text = text.removeprefix("\ufeff")
                first = False
            yield lineno, text, None


def detect_format(path: PathLike, limits: Limits = DEFAULT_LIMITS) -> Literal["jsonl", "trec"]:
    """``jsonl`` when the first non-blank line starts with ``{``, ``trec`` when it has 6 fields."""
    for _, text, problem in iter_lines(path, limits):
        if problem is not None:
            break
        assert text is not None
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith("{"):
            return "jsonl"
        if len(stripped.split()) == 6:
            return "trec"
        break
    return "jsonl"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate field {key!r}")
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity and duplicate keys (``ValueError``)."""
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# -- predictions ----------------------------------------------------------------------------------


def _parse_jsonl(path: Path, name: str, limits: Limits) -> Predictions:
    shown = _display(path)
    problems: list[Problem] = []
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    line_of: dict[str, int] = {}
    tie_lines: list[int] = []
    unsorted_lines: list[int] = []

    def err(line: int, fld: str, msg: str, code: str) -> None:
        problems.append(Problem(shown, line, fld, msg, code))

    for lineno, text, problem in iter_lines(path, limits):
        if problem is not None:
            problems.append(problem)
            continue
        assert text is not None
        if not text.strip():
            continue
        try:
            obj = loads_strict(text)
        except ValueError as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            err(lineno, "json", f"not valid JSON ({msg})", "json")
            continue
        if not isinstance(obj, dict):
            err(lineno, "json", f"expected a JSON object, got {_type_name(obj)}", "type")
            continue
        bad = False
        for key in REQUIRED_LINE_FIELDS:
            if key not in obj:
                err(lineno, key, "missing", "missing-field")
                bad = True
        for key in obj:
            if key not in LINE_FIELDS:
                err(
                    lineno,
                    str(key),
                    f"unexpected field (allowed: {', '.join(LINE_FIELDS)})",
                    "extra-field",
                )
                bad = True
        qid = obj.get("query_id")
        if "query_id" in obj and (not isinstance(qid, str) or not qid):
            err(lineno, "query_id", f"expected a non-empty string, got {_type_name(qid)}", "type")
            bad = True
            qid = None
        ids = obj.get("leaf_ids")
        if "leaf_ids" in obj:
            if not isinstance(ids, list):
                err(
                    lineno, "leaf_ids", f"expected a list of strings, got {_type_name(ids)}", "type"
                )
                bad = True
                ids = None
            else:
                first_at: dict[str, int] = {}
                for i, item in enumerate(ids):
                    if not isinstance(item, str) or not item:
                        err(
                            lineno,
                            f"leaf_ids[{i}]",
                            f"expected a non-empty string, got {_type_name(item)}",
                            "type",
                        )
                        bad = True
                    elif item in first_at:
                        err(
                            lineno,
                            f"leaf_ids[{i}]",
                            f"duplicate of leaf_ids[{first_at[item]}] ({item!r}); "
                            "each id may appear once per ranking",
                            "duplicate-id",
                        )
                        bad = True
                    else:
                        first_at[item] = i
        sc = obj.get("scores")
        if "scores" in obj:
            if not isinstance(sc, list):
                err(lineno, "scores", f"expected a list of numbers, got {_type_name(sc)}", "type")
                bad = True
                sc = None
            else:
                for i, value in enumerate(sc):
                    if not _is_number(value):
                        err(
                            lineno,
                            f"scores[{i}]",
                            f"expected a number, got {_type_name(value)}",
                            "type",
                        )
                        bad = True
                    elif not math.isfinite(float(value)):
                        err(lineno, f"scores[{i}]", "not a finite number", "type")
                        bad = True
                if isinstance(ids, list) and len(sc) != len(ids):
                    err(
                        lineno,
                        "scores",
                        f"{len(sc)} scores for {len(ids)} leaf_ids; give one score per id or none",
                        "scores-length",
                    )
                    bad = True
        if isinstance(qid, str) and qid:
            if qid in line_of:
                err(
                    lineno,
                    "query_id",
                    f"duplicate query {qid!r} (first on line {line_of[qid]})",
                    "duplicate-query",
                )
                continue
            line_of[qid] = lineno
        if bad or qid is None:
            continue
        rankings[qid] = tuple(ids)  # type: ignore[arg-type]
        if sc is not None:
            values = tuple(float(v) for v in sc)
            scores[qid] = values
            if count_ties(values):
                tie_lines.append(lineno)
            if any(b > a for a, b in pairwise(values)):
                unsorted_lines.append(lineno)
    if tie_lines:
        problems.append(
            Problem(
                shown,
                tie_lines[0],
                "scores",
                f"tied scores in {len(tie_lines)} ranking(s); the order of leaf_ids is kept "
                f"(tie rule: {TIE_RULE})",
                "tied-scores",
                "warning",
            )
        )
    if unsorted_lines:
        problems.append(
            Problem(
                shown,
                unsorted_lines[0],
                "scores",
                f"scores increase down the ranking in {len(unsorted_lines)} line(s); leaf_ids "
                "must be best first and their order is what is scored",
                "unsorted-scores",
                "warning",
            )
        )
    run = Run(name=name, rankings=rankings, scores=scores or None)
    return Predictions(path, "jsonl", run, line_of, problems)


def _parse_trec(path: Path, name: str | None, limits: Limits) -> Predictions:
    shown = _display(path)
    problems: list[Problem] = []
    per_query: dict[str, list[tuple[str, float, int]]] = {}
    seen: dict[tuple[str, str], int] = {}
    line_of: dict[str, int] = {}
    tags: dict[str, None] = {}

    def err(line: int, fld: str, msg: str, code: str) -> None:
        problems.append(Problem(shown, line, fld, msg, code))

    for lineno, text, problem in iter_lines(path, limits):
        if problem is not None:
            problems.append(problem)
            continue
        assert text is not None
        parts = text.split()
        if not parts:
            continue
        if len(parts) != 6:
            err(
                lineno,
                "line",
                f"expected 6 fields 'qid Q0 docno rank score tag', got {len(parts)}",
                "trec-fields",
            )
            continue
        qid, _, doc, rank_text, score_text, tag = parts
        try:
            rank = int(rank_text)
        except ValueError:
            err(lineno, "rank", f"{rank_text!r} is not an integer", "type")
            continue
        try:
            score = float(score_text)
        except ValueError:
            err(lineno, "score", f"{score_text!r} is not a number", "type")
            continue
        if not math.isfinite(score):
            err(lineno, "score", f"{score_text!r} is not a finite number", "type")
            continue
        if (qid, doc) in seen:
            err(
                lineno,
                "docno",
                f"duplicate of line {seen[qid, doc]} ({doc!r} for query {qid!r}); each id may "
                "appear once per ranking",
                "duplicate-id",
            )
            continue
        seen[qid, doc] = lineno
        line_of.setdefault(qid, lineno)
        tags[tag] = None
        per_query.setdefault(qid, []).append((doc, score, rank))
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] = {}
    tied = 0
    rank_disagrees = 0
    for qid, rows in per_query.items():
        rank_of = {doc: rank for doc, _, rank in rows}
        ordered = order_by_score((doc, score) for doc, score, _ in rows)
        rankings[qid] = tuple(d for d, _ in ordered)
        scores[qid] = tuple(s for _, s in ordered)
        if count_ties(scores[qid]):
            tied += 1
        ranks = [rank_of[d] for d in rankings[qid]]
        if any(b < a for a, b in pairwise(ranks)):
            rank_disagrees += 1
    if tied:
        problems.append(
            Problem(
                shown,
                None,
                "score",
                f"tied scores in {tied} ranking(s); ordered by id descending among equal scores "
                f"(tie rule: {TIE_RULE})",
                "tied-scores",
                "warning",
            )
        )
    if rank_disagrees:
        problems.append(
            Problem(
                shown,
                None,
                "rank",
                f"the rank column disagrees with the score order in {rank_disagrees} ranking(s); "
                "the score order is used, as trec_eval does",
                "rank-order",
                "warning",
            )
        )
    if len(tags) > 1:
        problems.append(
            Problem(
                shown,
                None,
                "tag",
                f"{len(tags)} different run tags ({', '.join(list(tags)[:3])}...); one file "
                "should hold one run",
                "tags",
                "warning",
            )
        )
    run_name = name or (next(iter(tags)) if len(tags) == 1 else path.stem)
    run = Run(name=run_name, rankings=rankings, scores=scores)
    return Predictions(path, "trec", run, line_of, problems, tuple(tags))


def read_predictions(
    path: PathLike,
    run_format: RunFormat = "auto",
    name: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Predictions:
    """Parse a predictions file (JSON lines or TREC, gzip or not) without raising on bad content."""
    path = Path(path)
    if run_format not in ("auto", "jsonl", "trec"):
        raise SearchTomeError(f"unknown run format {run_format!r}; use auto, jsonl or trec")
    fmt = detect_format(path, limits) if run_format == "auto" else run_format
    if fmt == "trec":
        return _parse_trec(path, name, limits)
    return _parse_jsonl(path, name or _default_name(path), limits)


def _default_name(path: Path) -> str:
    if path.name in PREDICTION_FILES:
        return path.parent.name
    return path.name.split(".")[0]


def find_predictions(folder: PathLike) -> Path:
    """The one predictions file inside a submission folder."""
    folder = Path(folder)
    found = [folder / n for n in PREDICTION_FILES if (folder / n).is_file()]
    if not found:
        raise SearchTomeError(
            f"{folder}: no predictions file; expected one of {', '.join(PREDICTION_FILES)}"
        )
    if len(found) > 1:
        raise SearchTomeError(
            f"{folder}: {len(found)} predictions files ({', '.join(p.name for p in found)}); "
            "keep exactly one"
        )
    return found[0]


# -- meta.json ------------------------------------------------------------------------------------


def _key_lines(text: str) -> dict[str, int]:
    """Line of each top-level key of a JSON object (for ``meta.json:LINE: field:`` messages)."""
    lines: dict[str, int] = {}
    depth = 0
    lineno = 1
    i = 0
    n = len(text)
    expecting_key = False
    while i < n:
        ch = text[i]
        if ch == "\n":
            lineno += 1
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            token = text[i : j + 1]
            if depth == 1 and expecting_key:
                with contextlib.suppress(ValueError):
                    lines.setdefault(json.loads(token), lineno)
            lineno += token.count("\n")
            i = j
            expecting_key = False
        elif ch in "{[":
            depth += 1
            expecting_key = ch == "{" and depth == 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 1:
            expecting_key = True
        i += 1
    return lines


_META_CHECKS = {
    "string": lambda v, required: isinstance(v, str) and (not required or bool(v.strip())),
    "list of strings": lambda v, _: (
        isinstance(v, list) and all(isinstance(x, str) and x for x in v)
    ),
    "object": lambda v, _: isinstance(v, dict),
    "integer or null": lambda v, _: v is None or (isinstance(v, int) and not isinstance(v, bool)),
}


def check_meta(meta: Any, shown: str, key_lines: Mapping[str, int] | None = None) -> list[Problem]:
    """Field, type and value checks of a ``meta.json`` object."""
    key_lines = key_lines or {}
    problems: list[Problem] = []
    if not isinstance(meta, dict):
        return [
            Problem(shown, 1, "json", f"expected a JSON object, got {_type_name(meta)}", "type")
        ]

    def err(key: str, msg: str, code: str = "type") -> None:
        problems.append(Problem(shown, key_lines.get(key), key, msg, code))

    for key in META_REQUIRED:
        if key not in meta:
            err(key, f"missing ({META_REQUIRED[key][1]})", "missing-field")
    for key in meta:
        if key not in META_FIELDS:
            import difflib

            close = difflib.get_close_matches(str(key), list(META_FIELDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            err(
                key,
                f"unexpected field{hint}; put extra information under 'notes' or 'config'",
                "extra-field",
            )
    for key, value in meta.items():
        if key not in META_FIELDS:
            continue
        kind = META_FIELDS[key][0]
        if not _META_CHECKS[kind](value, key in META_REQUIRED):
            expected = (
                "a non-empty string"
                if kind == "string"
                else f"an {kind}"
                if kind.startswith(("o", "i"))
                else f"a {kind}"
            )
            err(key, f"expected {expected}, got {_type_name(value)}")
    value = meta.get("date")
    if isinstance(value, str) and value.strip():
        try:
            if len(value) == 10:
                date.fromisoformat(value)
            else:
                datetime.fromisoformat(value)
        except ValueError:
            err("date", f"{value!r} is not an ISO 8601 date (YYYY-MM-DD)")
    system = meta.get("system")
    if isinstance(system, str) and ("/" in system or "\\" in system or system.strip() != system):
        err("system", f"{system!r} must not contain slashes or surrounding spaces")
    return problems


def read_meta(
    path: PathLike, limits: Limits = DEFAULT_LIMITS
) -> tuple[dict[str, Any] | None, dict[str, int], list[Problem]]:
    """Parse and check ``meta.json``: (object or None, line of each key, problems)."""
    path = Path(path)
    shown = _display(path)
    if not path.is_file():
        return (
            None,
            {},
            [
                Problem(
                    shown, None, "file", "missing; every submission needs meta.json", "missing-file"
                )
            ],
        )
    size = path.stat().st_size
    if size > limits.max_meta_bytes:
        return (
            None,
            {},
            [
                Problem(
                    shown,
                    None,
                    "size",
                    f"{size:,} bytes exceeds the {limits.max_meta_bytes:,}-byte limit",
                    "too-large",
                )
            ],
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        return (
            None,
            {},
            [
                Problem(
                    shown, None, "encoding", f"not valid UTF-8 (byte {exc.start + 1})", "encoding"
                )
            ],
        )
    try:
        meta = loads_strict(text)
    except json.JSONDecodeError as exc:
        return None, {}, [Problem(shown, exc.lineno, "json", f"not valid JSON ({exc.msg})", "json")]
    except ValueError as exc:
        return None, {}, [Problem(shown, None, "json", f"not valid JSON ({exc})", "json")]
    lines = _key_lines(text)
    problems = check_meta(meta, shown, lines)
    return (meta if isinstance(meta, dict) else None), lines, problems


# -- whole submissions ----------------------------------------------------------------------------


def load_submission(
    path: PathLike,
    run_format: RunFormat = "auto",
    *,
    limits: Limits = DEFAULT_LIMITS,
    require_meta: bool = True,
) -> LoadedSubmission:
    """Read a submission folder or a bare predictions / TREC run file, collecting every problem."""
    path = Path(path)
    problems: list[Problem] = []
    meta: dict[str, Any] = {}
    meta_lines: dict[str, int] = {}
    meta_path: Path | None = None
    if path.is_dir():
        pred_path = find_predictions(path)
        meta_path = path / META_FILE
        if meta_path.exists() or require_meta:
            parsed, meta_lines, meta_problems = read_meta(meta_path, limits)
            problems.extend(meta_problems)
            meta = parsed or {}
        if not meta_path.exists():
            meta_path = None
        default_name = path.name
    elif path.is_file():
        pred_path = path
        default_name = None
    else:
        raise SearchTomeError(f"{path}: no such submission folder or run file")
    system = (
        meta.get("system") if isinstance(meta.get("system"), str) and meta.get("system") else None
    )
    preds = read_predictions(pred_path, run_format, name=system or default_name, limits=limits)
    problems[:0] = preds.problems
    if system and path.is_dir() and system != path.name:
        problems.append(
            Problem(
                _display(meta_path or path),
                meta_lines.get("system"),
                "system",
                f"{system!r} differs from the folder name {path.name!r}; the meta.json name is used",
                "system-name",
                "warning",
            )
        )
    name = preds.run.name
    run = Run(name=name, rankings=preds.run.rankings, scores=preds.run.scores, meta=dict(meta))
    submission = Submission(system=name, run=run, meta=dict(meta), path=str(path))
    return LoadedSubmission(submission, preds, meta_path, meta_lines, problems)


def read_submission(
    path: PathLike,
    run_format: RunFormat = "auto",
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> Submission:
    """A submission ready to score; raises :class:`SearchTomeError` when it cannot be read.

    Errors that make the run ill-defined (bad JSON, wrong types, duplicate queries or ids,
    oversized files) raise; the first one is in the message. Leaderboard rules (all queries
    present, known ids, complete meta data) are the validator's business, so a bare TREC run or
    a folder without ``meta.json`` reads fine. Warnings are logged.
    """
    loaded = load_submission(path, run_format, limits=limits, require_meta=False)
    fatal = [p for p in loaded.errors if not p.path.endswith(META_FILE)]
    meta_errors = [
        p
        for p in loaded.errors
        if p.path.endswith(META_FILE) and p.code in ("json", "encoding", "too-large")
    ]
    fatal += meta_errors
    if fatal:
        more = (
            f" (and {len(fatal) - 1} more problems; run `searchtome validate`)"
            if len(fatal) > 1
            else ""
        )
        raise SearchTomeError(f"{fatal[0]}{more}")
    for p in loaded.problems:
        if p.severity == "warning":
            log.warning("%s", p)
    return loaded.submission


def write_predictions(path: PathLike, run: Run, max_ids: int | None = MAX_IDS) -> Path:
    """Write ``run`` as predictions JSON lines (``.gz`` compresses), queries sorted by id."""
    path = Path(path)
    rows = []
    for qid in sorted(run.rankings):
        ranking = list(run.rankings[qid])
        if not isinstance(qid, str) or not qid:
            raise SearchTomeError(f"run {run.name}: query id {qid!r} is not a non-empty string")
        if max_ids is not None and len(ranking) > max_ids:
            raise SearchTomeError(
                f"run {run.name}: query {qid!r} has {len(ranking)} ids; a submission holds at most "
                f"{max_ids} (cut the ranking before writing)"
            )
        if len(set(ranking)) != len(ranking):
            raise SearchTomeError(f"run {run.name}: query {qid!r} lists an id twice")
        row: dict[str, Any] = {"query_id": qid, "leaf_ids": ranking}
        if run.scores is not None and qid in run.scores:
            values = [float(s) for s in run.scores[qid]]
            if len(values) != len(ranking):
                raise SearchTomeError(
                    f"run {run.name}: query {qid!r} has {len(values)} scores for {len(ranking)} ids"
                )
            if not all(math.isfinite(v) for v in values):
                raise SearchTomeError(f"run {run.name}: query {qid!r} has a non-finite score")
            row["scores"] = values
        rows.append(row)
    if path.suffix == ".gz":
        with (
            atomic_write(path, "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
        ):
            for row in rows:
                gz.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    else:
        with atomic_write(path) as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_trec(path: PathLike, run: Run, tag: str | None = None) -> Path:
    """Write ``run`` as a TREC run file whose scores reproduce the run's order under any tool.

    Scores are the run's own when they strictly decrease; otherwise rank-derived scores are
    written so that trec_eval cannot reorder tied ids.
    """
    tag = tag or run.name or "run"
    with atomic_write(path) as fh:
        for qid in sorted(run.rankings):
            ranking = run.rankings[qid]
            given = run.scores.get(qid) if run.scores else None
            strictly = given is not None and all(a > b for a, b in pairwise(given))
            for i, doc in enumerate(ranking):
                score = given[i] if strictly and given is not None else float(len(ranking) - i)
                fh.write(f"{qid} Q0 {doc} {i + 1} {score!r} {tag}\n")
    return Path(path)


def make_meta(
    system: str,
    *,
    description: str,
    command: str,
    dataset_revision: str,
    models: list[str] | tuple[str, ...] = (),
    trained_on: list[str] | tuple[str, ...] = (),
    license: str = "CC-BY-4.0",
    hardware: str | None = None,
    date_: str | None = None,
    **optional: Any,
) -> dict[str, Any]:
    """A complete ``meta.json`` object; hardware, date and package versions filled in when omitted.

    ``optional`` takes the :data:`META_OPTIONAL` fields (``url``, ``config``, ``seed``, ...).
    """
    import platform
    import sys

    from searchtome.version import __version__

    meta: dict[str, Any] = {
        "system": system,
        "description": description,
        "command": command,
        "dataset_revision": dataset_revision,
        "models": list(models),
        "trained_on": list(trained_on),
        "license": license,
        "hardware": hardware or f"{platform.machine()} {platform.processor() or ''}".strip(),
        "date": date_ or date.today().isoformat(),
    }
    versions = {"searchtome": __version__, "python": sys.version.split()[0]}
    versions.update(optional.pop("versions", {}) or {})
    meta["versions"] = versions
    meta.update(optional)
    problems = check_meta(meta, META_FILE)
    if problems:
        raise SearchTomeError("; ".join(str(p) for p in problems))
    return meta


def write_submission(
    out_dir: PathLike, run: Run, meta: Mapping[str, Any], *, compress: bool = False
) -> Path:
    """Write ``predictions.jsonl[.gz]`` and ``meta.json`` into ``out_dir``; return the folder.

    ``meta`` is checked first (required fields, types; see :data:`META_REQUIRED`), so a bad
    call writes nothing. Each file is written atomically, predictions first and ``meta.json``
    last; a stale predictions file of the other compression is removed.
    """
    out = Path(out_dir)
    problems = check_meta(dict(meta), f"{out / META_FILE}")
    if problems:
        raise SearchTomeError("; ".join(str(p) for p in problems))
    name = "predictions.jsonl.gz" if compress else "predictions.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    write_predictions(out / name, run)
    for other in PREDICTION_FILES:
        if other != name and (out / other).exists():
            (out / other).unlink()
    with atomic_write(out / META_FILE) as fh:
        fh.write(dumps(dict(meta)))
    log.info("wrote submission %s (%d queries) to %s", meta.get("system"), len(run), out)
    return out
