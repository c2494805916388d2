"""What a model's own files say: its declared prompts and the name meta.json gives it.

A sentence-transformers model declares its query/document prompts in
``config_sentence_transformers.json`` (e5, bge, nomic and the like); :func:`declared_prompts`
reads them the way sentence-transformers assigns them to queries and documents.
:func:`model_record` names a model by name and revision, never by a path of this machine.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from searchtome.errors import SearchTomeError

# Files that make a model: weights, configs, vocabularies (for its identity and revision hash).
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".json", ".txt", ".model"})


# Which of a model's declared prompt names serves each role, in sentence-transformers' order
# (`encode_query` takes "query"; `encode_document` the first of "document", "passage", "corpus").
PROMPT_NAMES: dict[str, tuple[str, ...]] = {
    "query": ("query",),
    "passage": ("document", "passage", "corpus"),
}
ST_CONFIG = "config_sentence_transformers.json"
# A snapshot folder in the Hugging Face cache: models--ORG--NAME/snapshots/REVISION
_HF_SNAPSHOT = re.compile(
    r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[0-9a-f]{40})"
)


def st_config_file(model: str, revision: str | None) -> Path | None:
    """The model's ``config_sentence_transformers.json``: in its folder or the local hub cache."""
    from searchtome.llm.models import resolve

    path = Path(resolve(model))
    if path.is_dir():
        return path / ST_CONFIG if (path / ST_CONFIG).is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, ST_CONFIG, revision=revision)
    except Exception:  # a name the hub would refuse: it has no cached config either
        return None
    return Path(found) if isinstance(found, str) else None


def declared_prompts(model: str, revision: str | None = None) -> dict[str, tuple[str, str]]:
    """``{role: (prompt name, text)}`` for the prompts a sentence-transformers model declares.

    Roles are ``query`` and ``passage``; a role without a prompt of its own gets the
    ``default_prompt_name`` prompt, which sentence-transformers applies to any text; a role with
    neither (or an empty prompt) is absent.
    """
    path = st_config_file(model, revision)
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SearchTomeError(f"{path}: not readable JSON ({exc}); repair or remove it") from None
    prompts = data.get("prompts") or {} if isinstance(data, dict) else None
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise SearchTomeError(f"{path}: 'prompts' must map prompt names to strings")
    default = data.get("default_prompt_name")
    out: dict[str, tuple[str, str]] = {}
    for role, names in PROMPT_NAMES.items():
        name = next((n for n in names if n in prompts), default if default in prompts else None)
        if name is not None and prompts[name]:
            out[role] = (name, prompts[name])
    return out


def model_record(model: str, revision: str | None) -> dict[str, str | None]:
    """The model as meta.json names it: a name and a revision, never a path of this machine.

    A hub id keeps its name and revision; a snapshot in the hub cache is named by its repository
    and commit; any other folder by the hub model it declares (:func:`declared_model`; else its
    own name) and ``local folder NAME, sha256:`` of its weights and configs, so a reader sees both
    what the weights claim to be and that they were not fetched from that hub revision.
    """
    from searchtome.llm.models import resolve

    path = Path(resolve(model))
    if not path.is_dir():
        return {"name": model, "revision": revision}
    found = _HF_SNAPSHOT.search(path.resolve().as_posix())
    if found:
        return {"name": f"{found['org']}/{found['name']}", "revision": found["rev"]}
    digest = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and p.suffix in WEIGHT_SUFFIXES:
            digest.update(p.relative_to(path).as_posix().encode() + b"\0")
            with p.open("rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    digest.update(block)
    folder = path.resolve().name
    name = declared_model(path) or folder
    return {"name": name, "revision": f"{LOCAL_FOLDER}{folder}, sha256:{digest.hexdigest()[:16]}"}


LOCAL_FOLDER = "local folder "  # how a revision says the weights came from a folder, not a hub
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def declared_model(path: Path) -> str | None:
    """The hub model a saved folder says it is: ``config.json``'s ``_name_or_path`` when that is
    a hub id, else the card's ``base_model``; ``None`` when it declares neither."""
    config = path / "config.json"
    try:
        declared = json.loads(config.read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        declared = None
    if isinstance(declared, str) and _HUB_ID.match(declared):
        return declared
    card = path / "README.md"
    text = card.read_text(encoding="utf-8", errors="replace") if card.is_file() else ""
    front = text.split("---", 2)[1] if text.startswith("---") and text.count("---") >= 2 else ""
    found = re.search(
        r"^base_model:[ \t]*(?:\n[ \t]*-[ \t]*)?['\"]?([^\s'\"]+)", front, re.MULTILINE
    )
    return found.group(1) if found and _HUB_ID.match(found.group(1)) else None
