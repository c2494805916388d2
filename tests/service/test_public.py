"""What an upload may reveal: rounding, the count measures, and the Ladder's test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from searchtome.service.public import (
    ScoreMode,
    ladder_improves,
    macro_weights,
    paired_t,
    public_view,
    rounded,
)


def test_rounded_holds_to_the_pages_digits_and_drops_the_count_measures() -> None:
    board = {
        "measures": ["R@1", "NonLeaf@1", "Invalid@3"],
        "public": {
            "rows": [
                {
                    "aggregate": {"R@1": 0.7929465301478953, "NonLeaf@1": 0.01, "Invalid@3": 0.0},
                    "per_domain": {"Law": {"R@1": -1e-12, "Invalid@1": 0.5}},
                    "delta_to_top": {"R@1": {"diff": -0.012345, "p_adjusted": 0.04999}},
                }
            ]
        },
    }
    shown = public_view(board, ScoreMode.ROUNDED)
    row = shown["public"]["rows"][0]
    assert row["aggregate"] == {"R@1": 0.793}
    assert row["per_domain"] == {"Law": {"R@1": 0.0}} and math.copysign(1, 0.0) == 1
    assert str(row["per_domain"]["Law"]["R@1"]) == "0.0"  # never -0.0
    assert row["delta_to_top"]["R@1"] == {"diff": -0.012, "p_adjusted": 0.05}
    assert shown["measures"] == ["R@1"]
    assert public_view(board, ScoreMode.EXACT) is board
    assert rounded([0.12345, "x", 3]) == [0.123, "x", 3]


@pytest.mark.parametrize("n", [15, 100, 879])
def test_one_query_differences_sit_at_one_standard_error(n: int) -> None:
    # t is 1 up to float rounding: a margin of 1 would let them through or not by chance
    rng = np.random.default_rng(n)
    base = (rng.random(n) < 0.7).astype(float)
    weights = macro_weights(np.asarray(["a", "b", "c"] * (n // 3) + ["a"] * (n % 3)))
    for q in range(0, n, max(1, n // 7)):
        if base[q] == 1:
            continue
        probe = base.copy()
        probe[q] = 1.0
        assert paired_t(base, probe, weights) == pytest.approx(1.0)
        assert not ladder_improves(base, probe, weights, margin=2.0)


def test_four_fixed_queries_pass_a_two_standard_error_margin() -> None:
    n = 879
    base = np.zeros(n)
    weights = np.full(n, 1 / n)
    for k, shown in ((1, False), (2, False), (3, False), (4, True)):
        better = base.copy()
        better[:k] = 1.0
        assert paired_t(base, better, weights) == pytest.approx(math.sqrt(k * (n - 1) / (n - k)))
        assert ladder_improves(base, better, weights, margin=2.0) is shown


def test_the_first_run_is_shown_and_no_gain_never_is() -> None:
    new = np.asarray([1.0, 0.0, 1.0])
    weights = np.full(3, 1 / 3)
    assert ladder_improves(None, new, weights, margin=2.0)
    assert not ladder_improves(new, new, weights, margin=2.0)
    assert not ladder_improves(new, new[::-1], weights, margin=0.0)
    assert ladder_improves(np.zeros(3), np.ones(3), weights, margin=2.0)  # a sure gain


def test_macro_weights_give_each_domain_the_same_weight() -> None:
    weights = macro_weights(np.asarray(["a", "a", "a", "b"]))
    assert weights.tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 2])


def test_the_command_line_loads_without_the_server_extra() -> None:
    # sqlalchemy comes with the server extra: building the parser (with the competition's
    # choices) must not import it, or every command would need the extra.
    import subprocess
    import sys

    code = (
        "import sys, searchtome.cli; searchtome.cli.build_parser(); "
        "print(sorted(m for m in ('sqlalchemy', 'starlette') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
