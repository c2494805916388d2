"""Process-wide settings read from the environment, plus the progress-bar switch.

* ``SEARCHTOME_HOME``: cache root (downloads, models, LLM responses, embeddings).
  Default ``~/.cache/searchtome``.
* ``SEARCHTOME_OFFLINE=1``: never touch the network (downloads fail with a clear message,
  Hugging Face libraries are put in offline mode).
* ``SEARCHTOME_NO_PROGRESS=1`` or ``searchtome --no-progress``: no progress bars anywhere.
* ``SEARCHTOME_HTTP=sdk``: LLM requests through the openai SDK's HTTP stack instead of the lean
  aiohttp one (``searchtome.llm.transport``; default ``aiohttp``).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from searchtome.errors import OfflineError

T = TypeVar("T")
log = logging.getLogger("searchtome")

_TRUE = {"1", "true", "yes", "on"}
_progress_override: bool | None = None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def home() -> Path:
    """The cache root; created on first use."""
    root = Path(os.environ.get("SEARCHTOME_HOME") or Path.home() / ".cache" / "searchtome")
    root = root.expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    """A sub-folder of the cache root, e.g. ``cache_dir("downloads")``."""
    path = home().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def http_stack() -> str:
    """``SEARCHTOME_HTTP`` as given (lower case), ``""`` when unset."""
    return os.environ.get("SEARCHTOME_HTTP", "").strip().lower()


def offline() -> bool:
    return _env_flag("SEARCHTOME_OFFLINE")


def require_online(what: str) -> None:
    """Raise before any network access when offline mode is on."""
    if offline():
        raise OfflineError(
            f"{what} needs the network, but SEARCHTOME_OFFLINE=1 is set; "
            "unset it or supply the file locally"
        )


def hf_offline_env() -> None:
    """Keep Hugging Face libraries off the network when we are offline."""
    if offline():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def set_progress(enabled: bool | None) -> None:
    """Force progress bars on or off for this process (``None``: back to the environment)."""
    global _progress_override
    _progress_override = enabled
    if enabled is False:
        # Child processes and third-party bars (tqdm, huggingface_hub) follow the same switch.
        os.environ["SEARCHTOME_NO_PROGRESS"] = "1"
        os.environ["TQDM_DISABLE"] = "1"
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        _silence_imported_bars()


def _silence_imported_bars() -> None:
    """Libraries already imported read those variables at their import (a test, a notebook,
    ``main()`` called in-process): switch their bars off through their own calls."""
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()


def progress_enabled() -> bool:
    if _progress_override is not None:
        return _progress_override
    return not _env_flag("SEARCHTOME_NO_PROGRESS")


# Items done before a bar shows a time left: one item's time says little about the rest.
ETA_AFTER = 3


def progress(
    iterable: Iterable[T] | None = None, *, eta_after: int = ETA_AFTER, **kwargs: Any
) -> Iterator[T]:
    """A tqdm bar that honours the global switch; bars go to stderr and never to a pipe's stdout.

    The time left and the rate read ``?`` until ``eta_after`` items are done (work that finishes
    in batches, such as concurrent requests, passes its batch size), and are averaged over the
    whole run rather than over the last few items.
    """
    kwargs.setdefault("disable", not progress_enabled())
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("smoothing", 0.0)
    return _bar_class()(iterable, eta_after=eta_after, **kwargs)


@functools.cache
def _bar_class() -> Any:
    from tqdm.auto import tqdm

    class Bar(tqdm):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, eta_after: int = ETA_AFTER, **kwargs: Any) -> None:
            self.eta_after = eta_after
            super().__init__(*args, **kwargs)

        @property
        def format_dict(self) -> dict[str, Any]:
            d = super().format_dict
            if d.get("n", 0) - d.get("initial", 0) < self.eta_after and not d.get("bar_format"):
                d["bar_format"] = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<?, ?{unit}/s]"
            return d

    return Bar


def setup_logging(verbosity: int = 0) -> None:
    """``-v`` → INFO, ``-vv`` → DEBUG; warnings always shown."""
    level = logging.WARNING - 10 * max(0, min(verbosity, 2))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s", "%H:%M:%S")
    )
    root = logging.getLogger("searchtome")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
