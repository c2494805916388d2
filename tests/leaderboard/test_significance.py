"""Randomization tests, bootstrap intervals, corrections and the comparison report."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from searchtome.errors import SearchTomeError
from searchtome.leaderboard.significance import (
    CompareOptions,
    benjamini_hochberg,
    compare,
    holm,
)


def _brute_force_p(d: np.ndarray) -> float:
    """Exact two-sided sign-flip p-value by enumerating all 2**n sign vectors."""
    observed = abs(d.mean())
    hits = sum(
        abs(np.mean(np.asarray(signs) * d)) >= observed - 1e-12
        for signs in itertools.product((1.0, -1.0), repeat=d.size)
    )
    return hits / 2**d.size


@pytest.mark.parametrize("seed", range(5))
def test_exact_p_equals_enumeration_and_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 11
    x = rng.integers(0, 2, n).astype(float)  # R@1-like: many exact ties in the null distribution
    y = np.round(rng.random(n), 2)
    report = compare(
        {"a": {"m": x}, "b": {"m": y}}, options=CompareOptions(permutations=10_000, bootstrap=0)
    )
    assert report.settings.exact and report.settings.sign_vectors == 2**n
    p = report.tests[0].p
    assert p == pytest.approx(_brute_force_p(x - y), abs=1e-15)
    ref = stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        permutation_type="samples",
        n_resamples=10_000,
        alternative="two-sided",
    )
    assert p == pytest.approx(ref.pvalue, abs=1e-12)


def test_monte_carlo_p_is_close_to_the_exact_one() -> None:
    rng = np.random.default_rng(3)
    n = 18
    x = rng.random(n)
    y = x + rng.normal(0.08, 0.25, n)
    exact = _brute_force_p(x - y)
    b = 50_000
    report = compare(
        {"a": {"m": x}, "b": {"m": y}}, options=CompareOptions(permutations=b, bootstrap=0, seed=11)
    )
    assert not report.settings.exact
    sigma = math.sqrt(exact * (1 - exact) / b)
    assert abs(report.tests[0].p - exact) < 5 * sigma + 1 / b


def test_p_value_formula_never_zero_and_one_for_identical_systems() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(500)
    far = compare(
        {"a": {"m": x}, "b": {"m": x + 1}}, options=CompareOptions(permutations=999, bootstrap=0)
    )
    assert far.tests[0].p == 1 / 1000  # (0 + 1) / (B + 1)
    same = compare(
        {"a": {"m": x}, "b": {"m": x.copy()}}, options=CompareOptions(permutations=999, bootstrap=0)
    )
    assert same.tests[0].p == 1.0


def _systems(n: int = 3000, k: int = 5, seed: int = 1):
    rng = np.random.default_rng(seed)
    systems = {}
    for i in range(k):
        hit = (rng.random(n) < 0.5 + 0.02 * i).astype(float)
        systems[f"s{i}"] = {"R@1": hit, "nDCG@3": np.clip(hit + rng.random(n) * 0.3, 0, 1)}
    groups = [f"d{j % 4}" for j in range(n)]
    return systems, groups


def test_p_values_are_deterministic_bit_for_bit() -> None:
    systems, groups = _systems()
    first = compare(
        systems, groups=groups, options=CompareOptions(permutations=2000, bootstrap=500, seed=5)
    )
    second = compare(
        systems, groups=groups, options=CompareOptions(permutations=2000, bootstrap=500, seed=5)
    )
    assert [t.p for t in first.tests] == [t.p for t in second.tests]
    assert [t.ci_low for t in first.tests] == [t.ci_low for t in second.tests]
    assert first.to_json() == second.to_json()
    other = compare(
        systems, groups=groups, options=CompareOptions(permutations=2000, bootstrap=500, seed=6)
    )
    assert [t.p for t in first.tests] != [t.p for t in other.tests]


def test_per_domain_p_values_equal_a_test_on_that_domain_alone() -> None:
    rng = np.random.default_rng(4)
    n = 12
    a, b = rng.random(n), rng.random(n)
    groups = ["x"] * 5 + ["y"] * 7
    report = compare(
        {"a": {"m": a}, "b": {"m": b}},
        groups=groups,
        options=CompareOptions(permutations=2**n, bootstrap=0),
    )
    assert report.settings.exact
    for name, idx in (("x", slice(0, 5)), ("y", slice(5, 12))):
        t = report.test("a", "b", "m", name)
        assert t.p == pytest.approx(_brute_force_p(a[idx] - b[idx]), abs=1e-12)
        assert t.diff == pytest.approx(a[idx].mean() - b[idx].mean())
    overall = report.test("a", "b", "m")
    macro = np.mean([a[:5].mean() - b[:5].mean(), a[5:].mean() - b[5:].mean()])
    assert overall.diff == pytest.approx(macro)
    assert report.n_queries == {"overall": 12, "x": 5, "y": 7}


def test_bootstrap_interval_brackets_the_difference() -> None:
    systems, groups = _systems(n=2000, k=2)
    report = compare(
        systems, groups=groups, options=CompareOptions(permutations=500, bootstrap=4000, seed=0)
    )
    labels = np.asarray(groups)
    for t in report.tests:
        assert t.ci_low <= t.diff <= t.ci_high
        d = systems[t.a][t.measure] - systems[t.b][t.measure]
        if t.scope == "overall":  # macro mean: each domain's mean weighs 1/4
            var = sum(d[labels == g].var() / (labels == g).sum() for g in set(groups)) / 16
        else:
            part = d[labels == t.scope]
            var = part.var() / part.size
        normal_width = 2 * 1.96 * math.sqrt(var)
        assert t.ci_high - t.ci_low == pytest.approx(normal_width, rel=0.15)
    # an interval that excludes 0 goes with a small p-value and vice versa, for a clear effect
    rng = np.random.default_rng(0)
    x = rng.random(800)
    clear = compare(
        {"a": {"m": x + 0.1}, "b": {"m": x}},
        options=CompareOptions(permutations=500, bootstrap=1000),
    )
    t = clear.tests[0]
    assert t.ci_low > 0 and t.p < 0.01 and t.diff == pytest.approx(0.1)


def test_holm_and_bh_against_hand_computed_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> running max .02 .03 .06 .06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted .005*4/1=.02, .01*4/2=.02, .03*4/3=.04, .04*4/4=.04 -> running min from the top
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    rng = np.random.default_rng(0)
    many = rng.random(40) ** 3
    assert benjamini_hochberg(many) == pytest.approx(stats.false_discovery_control(many))
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_families_control_and_corrections() -> None:
    systems, groups = _systems(n=1000, k=4)
    report = compare(
        systems, groups=groups, control="s3", options=CompareOptions(permutations=500, bootstrap=0)
    )
    assert {(t.a, t.b) for t in report.tests} == {("s3", "s0"), ("s3", "s1"), ("s3", "s2")}
    # per measure: 3 overall tests; per-domain: 3 pairs x 4 domains
    assert report.settings.families == {
        "R@1/overall": 3,
        "nDCG@3/overall": 3,
        "R@1/per-domain": 12,
        "nDCG@3/per-domain": 12,
    }
    fam = [t for t in report.tests if t.family == "R@1/overall"]
    assert [t.p_adjusted for t in fam] == pytest.approx(list(holm([t.p for t in fam])))
    bh = compare(
        systems,
        groups=groups,
        options=CompareOptions(permutations=500, bootstrap=0, correction="bh", family="all"),
    )
    assert bh.settings.families == {"all": 6 * 2 * 5}
    assert [t.p_adjusted for t in bh.tests] == pytest.approx(
        list(benjamini_hochberg([t.p for t in bh.tests]))
    )
    with pytest.raises(SearchTomeError, match="did you mean 's1'"):
        compare(systems, control="s11", options=CompareOptions(permutations=10))


def test_report_renders_markdown_latex_json() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(400)
    systems = {
        "STAIR & co_1": {"R@1": x + 0.2, "nDCG@3": x + 0.2},
        "dsi|v2": {"R@1": x, "nDCG@3": x + 0.01 * rng.random(400)},
    }
    report = compare(systems, options=CompareOptions(permutations=999, bootstrap=200))
    md = report.to_markdown()
    assert "| a | STAIR &amp; co\\_1 |" in md and "dsi\\|v2" in md
    assert "<sup>b</sup>" in md  # a beats b
    assert "Holm–Bonferroni" in md and "B = 999 sign flips" in md
    assert "a superscript lists the letters of the systems whose value it beats" in md
    tex = report.to_latex()
    assert r"STAIR \& co\_1" in tex and r"\begin{tabular}" in tex and "$^{b}$" in tex
    data = json.loads(report.to_json())
    assert data["systems"] == list(systems)
    assert {t["measure"] for t in data["tests"]} == {"R@1", "nDCG@3"}
    assert data["settings"]["pvalue"] == "(c + 1) / (B + 1)"
    assert report.render("json") == report.to_json()
    with pytest.raises(SearchTomeError):
        report.render("html")


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(SearchTomeError, match="at least two systems"):
        compare({"a": {"m": [1.0]}})
    with pytest.raises(SearchTomeError, match="2 values for 3 queries"):
        compare({"a": {"m": [1.0, 0.0, 1.0]}, "b": {"m": [1.0, 0.0]}})
    with pytest.raises(SearchTomeError, match="NaN"):
        compare({"a": {"m": [1.0, np.nan]}, "b": {"m": [1.0, 0.0]}})


def test_exact_integer_path_and_float_path_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Few-valued columns are counted with bit operations, others with a ±1 matrix: same signs,
    so the two paths must give identical counts, hence identical p-values."""
    import searchtome.leaderboard.significance as sig

    rng = np.random.default_rng(8)
    n = 700
    ranks = rng.integers(1, 6, size=(3, n))
    systems = {
        f"s{i}": {
            "R@1": (ranks[i] == 1).astype(float),
            "nDCG@3": np.where(ranks[i] <= 3, 1 / np.log2(ranks[i] + 1), 0.0),
        }
        for i in range(3)
    }
    groups = [f"d{j % 3}" for j in range(n)]
    bits = compare(
        systems, groups=groups, options=CompareOptions(permutations=3000, bootstrap=0, seed=2)
    )
    with monkeypatch.context() as m:  # numpy < 2.0 has no bitwise_count: the table popcount
        m.delattr(np, "bitwise_count", raising=False)
        table = compare(
            systems, groups=groups, options=CompareOptions(permutations=3000, bootstrap=0, seed=2)
        )
    assert [t.p for t in bits.tests] == [t.p for t in table.tests]
    monkeypatch.setattr(sig, "MAX_LEVELS", -1)  # every column takes the float path
    floats = compare(
        systems, groups=groups, options=CompareOptions(permutations=3000, bootstrap=0, seed=2)
    )
    assert [t.p for t in bits.tests] == [t.p for t in floats.tests]
    assert [t.diff for t in bits.tests] == pytest.approx([t.diff for t in floats.tests], abs=1e-12)
    # and the float path is exact under enumeration too
    x, y = rng.random(10), rng.random(10)
    report = compare(
        {"a": {"m": x}, "b": {"m": y}}, options=CompareOptions(permutations=2**10, bootstrap=0)
    )
    assert report.tests[0].p == pytest.approx(_brute_force_p(x - y), abs=1e-12)


def test_chunk_sizes_change_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs and indicators are processed in chunks to bound memory; p-values and intervals
    must be bit-identical whatever the chunk sizes (12 systems: 66 pairs, 60+ indicators)."""
    from searchtome.leaderboard import significance

    rng = np.random.default_rng(3)
    n = 300
    per_query = {
        f"s{i}": {
            "R@1": (rng.random(n) < 0.3 + 0.04 * i).astype(float),
            "nDCG@3": rng.choice([0.0, 0.5, 0.63, 1.0], n),
        }
        for i in range(12)
    }
    groups = [f"d{i % 3}" for i in range(n)]

    def run() -> list[tuple[float, float, float]]:
        report = compare(
            per_query,
            groups=groups,
            options=CompareOptions(permutations=700, bootstrap=300, seed=5),
        )
        return [(t.p, t.ci_low, t.ci_high) for t in report.tests]

    whole = run()
    monkeypatch.setattr(significance, "PAIR_CHUNK", 7)
    assert run() == whole


def test_a_p_at_its_floor_is_shown_as_such_with_the_exact_mcnemar_p_beside_it() -> None:
    import math

    from searchtome.leaderboard.significance import mcnemar
    from searchtome.leaderboard.text import floor_text

    rng = np.random.default_rng(3)
    n = 2000
    strong = (rng.random(n) < 0.8).astype(float)
    weak = strong * (rng.random(n) < 0.5)  # loses half of strong's hits, never wins one
    close = strong.copy()
    close[:3] = 1 - close[:3]
    report = compare({"strong": {"R@1": strong, "nDCG@3": strong * 0.7},
         "weak": {"R@1": weak, "nDCG@3": weak * 0.7},
         "close": {"R@1": close, "nDCG@3": close * 0.7}}, control="strong", options=CompareOptions(permutations=999, bootstrap=0))  # fmt: skip
    far = report.test("strong", "weak", "R@1")
    assert far.p == 1 / 1000 and far.p_at_floor
    wins = int((strong > weak).sum())
    assert far.mcnemar_p == pytest.approx(2 * 0.5**wins) and far.mcnemar_p < 1e-100
    assert report.test("strong", "weak", "nDCG@3").mcnemar_p is None  # not 0/1
    near = report.test("strong", "close", "R@1")
    assert not near.p_at_floor and near.mcnemar_p == pytest.approx(1.0)
    md = report.to_markdown()
    row = next(line for line in md.splitlines() if "| R@1 | strong | weak |" in line)
    assert "| < 1e-3 | " in row and f"| {far.mcnemar_p:.1e} |" in row
    assert json.loads(report.to_json())["tests"][0]["mcnemar_p"] is not None
    assert (floor_text(10_000), floor_text(2_000), floor_text(999)) == (
        "< 1e-4",
        "< 5e-4",
        "< 1e-3",
    )
    # McNemar equals the exact binomial by hand (scipy's binomtest on the discordant pairs).
    a = np.array([1, 1, 1, 0, 1, 0, 1, 1.0])
    b = np.array([0, 0, 1, 0, 0, 1, 0, 1.0])
    k, m = 1, 5  # a wins 4, b wins 1
    by_hand = min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2**m)
    assert mcnemar(a, b) == pytest.approx(by_hand)


def test_bootstrap_bounds_are_rounded_to_the_documented_precision() -> None:
    from searchtome.leaderboard.significance import CI_DECIMALS

    rng = np.random.default_rng(5)
    n = 300
    per_query = {s: {"nDCG@3": rng.random(n) / 3} for s in ("a", "b", "c")}  # irrational-ish
    report = compare(
        per_query,
        groups=["x", "y", "z"] * 100,
        options=CompareOptions(permutations=99, bootstrap=200),
    )
    assert CI_DECIMALS == 6
    for t in report.tests:
        for bound in (t.ci_low, t.ci_high):
            assert bound == round(bound, CI_DECIMALS)
    # A perturbation below the precision (what another CPU's summation order does) changes
    # no bound: the scores moved by 1e-15 give the same report.
    nudged = {s: {"nDCG@3": v["nDCG@3"] + 1e-15} for s, v in per_query.items()}
    again = compare(
        nudged, groups=["x", "y", "z"] * 100, options=CompareOptions(permutations=99, bootstrap=200)
    )
    assert [(t.ci_low, t.ci_high) for t in again.tests] == [
        (t.ci_low, t.ci_high) for t in report.tests
    ]


def test_without_mcnemar_every_other_figure_is_the_same() -> None:
    rng = np.random.default_rng(5)
    per_query = {
        s: {"R@1": (rng.random(300) < q).astype(float), "nDCG@3": rng.random(300) * q}
        for s, q in (("a", 0.7), ("b", 0.5), ("c", 0.4))
    }
    groups = ["x" if i % 3 else "y" for i in range(300)]
    options = CompareOptions(permutations=500, bootstrap=200)
    full = compare(per_query, groups=groups, control="a", options=options)
    lean = compare(per_query, groups=groups, control="a", options=replace(options, mcnemar=False))
    assert any(t.mcnemar_p is not None for t in full.tests)
    assert all(t.mcnemar_p is None for t in lean.tests)
    assert lean.settings.mcnemar == "" and full.settings.mcnemar
    for a, b in zip(full.tests, lean.tests, strict=True):
        assert {**a.__dict__, "mcnemar_p": None} == b.__dict__
