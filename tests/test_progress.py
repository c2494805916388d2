"""Progress bars: no time left is shown before a few items (or one batch) are done."""

from __future__ import annotations

import io

import pytest

from searchtome.settings import progress, set_progress


def test_no_eta_before_enough_items_are_done() -> None:
    out = io.StringIO()
    bar = progress(total=100, desc="generate", unit="unit", disable=False, file=out, eta_after=4)
    bar.update(1)
    bar.refresh()
    assert "1/100 [" in out.getvalue() and "<?, ?unit/s]" in out.getvalue().splitlines()[-1]
    bar.update(3)
    bar.refresh()
    last = out.getvalue().split("\r")[-1]
    assert "4/100 [" in last and "<?" not in last  # a time left from here on
    bar.close()


def test_no_progress_silences_bars_of_libraries_imported_before_it(monkeypatch) -> None:
    """tqdm and the Hugging Face libraries read their switches at import; ``--no-progress``
    given to ``main()`` later (a notebook, a test) still turns their bars off."""
    transformers_logging = pytest.importorskip("transformers.utils.logging")
    import huggingface_hub.utils as hub_utils

    for name in ("SEARCHTOME_NO_PROGRESS", "TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(name, raising=False)
    transformers_logging.enable_progress_bar()
    hub_utils.enable_progress_bars()
    try:
        set_progress(False)
        assert not transformers_logging.is_progress_bar_enabled()
        assert hub_utils.are_progress_bars_disabled()
        out = io.StringIO()
        for _ in transformers_logging.tqdm(range(3), desc="converting", file=out):
            pass
        assert out.getvalue() == ""
    finally:
        set_progress(None)
        transformers_logging.enable_progress_bar()
        hub_utils.enable_progress_bars()
