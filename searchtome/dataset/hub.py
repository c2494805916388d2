"""``hf://ORG/NAME@REV`` addresses and downloading a published dataset from the Hugging Face Hub.

Loading needs only this module; uploading (``searchtome.dataset.publish``) builds on it. The Hub
address comes from ``HF_ENDPOINT`` at call time, so a private Hub (or a local stand-in) works.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from searchtome.dataset.layout import MANIFEST_FILE, verify_manifest
from searchtome.errors import SearchTomeError

REPO_TYPE = "dataset"
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_hf_source(source: str) -> tuple[str, str | None]:
    """``hf://ORG/NAME@REV`` → ``("ORG/NAME", "REV")`` (revision ``None`` = main)."""
    if not source.startswith("hf://"):
        raise SearchTomeError(f"{source!r} is not an hf://ORG/NAME[@REVISION] address")
    rest = source[len("hf://") :]
    rest = rest.removeprefix("datasets/")
    repo, _, revision = rest.partition("@")
    if not REPO_ID_RE.match(repo) or (revision == "" and "@" in rest):
        raise SearchTomeError(
            f"{source!r} is not an hf://ORG/NAME[@REVISION] address (e.g. hf://searchtome/v1@v1.0)"
        )
    return repo, revision or None


def hub_endpoint() -> str | None:
    """The Hub to talk to: ``HF_ENDPOINT`` if set, else huggingface_hub's default."""
    return os.environ.get("HF_ENDPOINT") or None


def short_error(exc: BaseException) -> str:
    """The first line of an exception's message (Hub errors carry long multi-line bodies)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def download_dataset(source: str) -> Path:
    """Fetch ``hf://ORG/NAME@REV`` into the Hugging Face cache; return the snapshot folder.

    Offline (``SEARCHTOME_OFFLINE=1``) only the cache is used. The snapshot is checked against
    its own ``manifest.json`` before it is returned.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    from searchtome.settings import hf_offline_env, offline

    repo, revision = parse_hf_source(source)
    hf_offline_env()
    try:
        path = Path(
            snapshot_download(
                repo,
                repo_type=REPO_TYPE,
                revision=revision,
                endpoint=hub_endpoint(),
                local_files_only=offline(),
            )
        )
    except LocalEntryNotFoundError:
        raise SearchTomeError(
            f"{source}: not in the local Hugging Face cache and the Hub cannot be reached"
            + (" (SEARCHTOME_OFFLINE=1)" if offline() else "")
            + "; download it once online or pass a local folder"
        ) from None
    except HfHubHTTPError as exc:
        raise SearchTomeError(
            f"{source}: the Hub refused the download ({short_error(exc)})"
        ) from None
    if (path / MANIFEST_FILE).is_file():
        problems = verify_manifest(path)
        if problems:
            raise SearchTomeError(
                f"{source}: downloaded files disagree with manifest.json: {problems[0]}"
            )
    return path
