"""Progress bars: no time left is shown before a few items (or one batch) are done."""

from __future__ import annotations

import io

from searchtome.settings import progress


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
