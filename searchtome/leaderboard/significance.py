"""Paired randomization tests, paired-bootstrap intervals and multiple-testing corrections.

The test is Fisher's paired randomization test as Smucker, Allan & Carterette (CIKM 2007)
recommend for IR: under the null hypothesis the two systems' scores on a query are exchangeable,
so each query's difference keeps or flips its sign with probability ½. Two-sided,
``p = (c + 1) / (B + 1)`` where ``c`` counts the B random sign vectors whose statistic is at
least as extreme as the observed one (scipy's ``permutation_test`` convention: a p-value is never
0). When ``2**n <= B`` every sign vector is enumerated and ``p = c / 2**n`` is exact.

Speed comes from linearity: the statistic of a pair is a difference of the two systems' signed
means, so one shared sign matrix ``S`` (B × n) applied once to the score matrix ``X``
(n × systems·measures) serves every pair, measure and domain. The sign matrix is kept as packed
bits: for the few-valued columns of rank-based measures ``S @ X`` reduces to AND + popcount
against per-value indicator bits (exact integers, no floating point); other columns expand the
same bits into ±1 floats and use a matrix product (see :class:`Engine`). Bits are drawn in
fixed-size blocks from one seeded PCG64 stream, so identical inputs and seed give identical
counts — and p-values, bit for bit — whatever the machine or its thread count.

The statistic follows the aggregate the leaderboard reports: with query groups (domains) the
overall statistic is the *macro* mean over groups (the paper's average), each group's is its
plain mean; without groups it is the mean over all queries. Confidence intervals come from a
paired bootstrap of the same statistic, stratified by group so every replicate keeps the domain
sizes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Literal

import numpy as np

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.leaderboard.comparison import (
    MCNEMAR_TEXT,
    OVERALL,
    ComparisonReport,
    ComparisonSettings,
    PairTest,
)

BLOCK = 512  # sign vectors drawn at a time; part of the seeded stream's definition
# A work size that bounds memory, not results: pairs per comparison chunk. Every element is
# computed by the same float64 operation whatever the chunking.
PAIR_CHUNK = 256
# Bootstrap bounds are rounded to this many decimals (fractions: 1e-4 points). Each replicate's
# means come from a BLAS matrix product whose summation order depends on the CPU's vector width,
# so unrounded bounds differed across machines in their last digits (~1e-16). Rounded, they
# agree unless a bound lies within ~1e-16 of a rounding boundary (then it differs by 1e-6).
CI_DECIMALS = 6
# Statistics equal up to summation order compare equal: this share of the largest per-query
# value, far above rounding error (n·eps relative) and far below any real difference.
EQUAL_TOLERANCE = 1e-9
Correction = Literal["holm", "bh", "none"]
Family = Literal["measure", "all"]


# -- exact tests beside the randomization test -------------------------------------------------


def mcnemar(a: np.ndarray, b: np.ndarray) -> float | None:
    """Exact McNemar p (two-sided binomial test on the discordant pairs), or None unless both
    per-query columns are 0/1 (R@k and Success@k with one relevant id per query).

    A randomization p cannot go below 1/(B+1); this one can, so the pages give it beside a p at
    that floor instead of a string of zeros the sign flips cannot resolve.
    """
    from scipy.stats import binomtest

    a, b = np.asarray(a), np.asarray(b)
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        return None
    wins, losses = int(np.sum(a > b)), int(np.sum(a < b))
    if wins + losses == 0:
        return 1.0
    return float(binomtest(wins, wins + losses, 0.5).pvalue)


def at_floor(p: float, permutations: int, exact: bool = False) -> bool:
    """Whether a randomization p is the smallest ``(c + 1) / (B + 1)`` can be (c = 0)."""
    return not exact and p <= 1.0 / (permutations + 1) * (1 + 1e-9)


# -- multiple testing -----------------------------------------------------------------------------


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p-values (family-wise error rate)."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    stepped = (m - np.arange(m)) * p[order]
    adjusted = np.minimum(np.maximum.accumulate(stepped), 1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values (false discovery rate)."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


def adjust(pvalues: Sequence[float], method: Correction = "holm") -> np.ndarray:
    if method == "holm":
        return holm(pvalues)
    if method == "bh":
        return benjamini_hochberg(pvalues)
    if method == "none":
        return np.asarray(pvalues, dtype=np.float64).copy()
    raise SearchTomeError(f"unknown correction {method!r}; use holm, bh or none")


# -- the engine -----------------------------------------------------------------------------------


MAX_LEVELS = 32  # a column with at most this many distinct non-zero values takes the exact path


@dataclass
class _Layout:
    """Queries sorted by group; each group starts on a 64-bit word of the packed sign vectors."""

    order: np.ndarray  # query indices, grouped
    names: list[str]
    bounds: list[tuple[int, int]]  # per group, in grouped query order
    words: list[tuple[int, int]]  # per group, in 64-bit words of the packed sign vectors
    positions: np.ndarray  # bit position of each grouped query
    macro: bool

    @property
    def n_words(self) -> int:
        return self.words[-1][1]

    @classmethod
    def build(cls, n: int, groups: Sequence[str] | None) -> _Layout:
        if groups is None:
            labels = np.zeros(n, dtype=np.int64)
            names: list[str] = []
            order = np.arange(n)
            sizes = [n]
        else:
            text = np.asarray([str(g) for g in groups])
            if text.size != n:
                raise SearchTomeError(f"{text.size} group labels for {n} queries")
            names = sorted(set(text.tolist()))
            labels = np.searchsorted(np.asarray(names), text)
            order = np.argsort(labels, kind="stable")
            sizes = np.bincount(labels, minlength=len(names)).tolist()
        bounds, words, positions = [], [], []
        start = word = 0
        for size in sizes:
            bounds.append((start, start + size))
            n_w = (size + 63) // 64
            words.append((word, word + n_w))
            positions.append(word * 64 + np.arange(size))
            start += size
            word += n_w
        return cls(order, names, bounds, words, np.concatenate(positions), macro=groups is not None)

    def scope_means(self, sums: list[np.ndarray]) -> np.ndarray:
        """Per-group sums (rows × k each) → means per scope: (rows, scopes, k)."""
        means = [s / (hi - lo) for s, (lo, hi) in zip(sums, self.bounds, strict=True)]
        if not self.macro:
            return means[0][:, None, :]
        overall = np.mean(means, axis=0)
        return np.stack([overall, *means], axis=1)


# Little-endian bit order throughout: query at bit position p is bit p % 8 of byte p // 8.
_SIGN_TABLE = 1.0 - 2.0 * np.unpackbits(
    np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little"
).astype(np.float64)
_POPCOUNT8 = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)


def _popcount_sums(words: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Set bits of ``words`` (rows × W, uint64) summed over the word ranges beginning at ``starts``."""
    if hasattr(np, "bitwise_count"):
        counts = np.bitwise_count(words)
        return np.add.reduceat(counts, starts, axis=1, dtype=np.int64)
    counts = _POPCOUNT8[words.view(np.uint8)]  # numpy < 2.0
    return np.add.reduceat(counts, starts * 8, axis=1, dtype=np.int64)


def _random_words(n_words: int, b: int, seed_seq: np.random.SeedSequence):
    """Yield packed random sign vectors, blocks of (rows × n_words) uint64; bit 1 = flipped."""
    rng = np.random.Generator(np.random.PCG64(seed_seq))
    done = 0
    while done < b:
        rows = min(BLOCK, b - done)
        raw = rng.integers(0, 256, size=(rows, n_words * 8), dtype=np.uint8)
        yield raw.view("<u8")
        done += rows


def _all_words(layout: _Layout, n: int):
    """Every one of the 2**n sign vectors, packed, in blocks."""
    total = 1 << n
    for start in range(0, total, BLOCK):
        codes = np.arange(start, min(total, start + BLOCK), dtype=np.uint64)
        bits = np.zeros((codes.size, layout.n_words * 64), dtype=np.uint8)
        bits[:, layout.positions] = (codes[:, None] >> np.arange(n, dtype=np.uint64)) & np.uint64(1)
        yield np.packbits(bits, axis=1, bitorder="little").view("<u8")


def _bootstrap_blocks(bounds: list[tuple[int, int]], b: int, seed_seq: np.random.SeedSequence):
    """Yield per-group resampling count matrices (rows × n_g), stratified by group."""
    rng = np.random.Generator(np.random.PCG64(seed_seq))
    done = 0
    while done < b:
        rows = min(BLOCK, b - done)
        blocks = []
        for lo, hi in bounds:
            size = hi - lo
            draws = rng.integers(0, size, size=(rows, size))
            flat = (draws + (np.arange(rows) * size)[:, None]).ravel()
            counts = np.bincount(flat, minlength=rows * size).reshape(rows, size)
            blocks.append(counts.astype(np.float64))
        yield blocks
        done += rows


@dataclass
class Engine:
    """Shared-sign randomization counts and bootstrap distributions for many columns at once.

    ``X`` is (queries × columns); ``pairs`` index column pairs (a, b) whose difference is tested.
    Results are per scope: ``overall`` first, then each group in sorted order.

    Each random sign vector is a packed bit string (bit 1 = flip), shared by every column. A
    column with few distinct values (every rank-based measure with one gold: R@k has one
    non-zero value, nDCG@3 three, RR@10 ten) is split into 0/1 indicator bit strings, one per
    value v; its signed sum is ``sum_v v * (m_v - 2 * popcount(signs & indicator_v))`` — exact
    integer counting, no float sign matrix at all. Other columns take the float path: the bits
    are expanded into a ±1 matrix and multiplied with the scores.
    """

    X: np.ndarray
    groups: Sequence[str] | None
    pairs: Sequence[tuple[int, int]]
    permutations: int = 10_000
    bootstrap: int = 2_000
    seed: int = 0
    layout: _Layout = field(init=False)

    def __post_init__(self) -> None:
        self.X = np.asarray(self.X, dtype=np.float64)
        if self.X.ndim != 2:
            raise SearchTomeError("the score matrix must be queries × columns")
        if not np.isfinite(self.X).all():
            raise SearchTomeError("per-query scores contain NaN or infinity")
        self.layout = _Layout.build(self.X.shape[0], self.groups)
        self.Xs = self.X[self.layout.order]
        self.A = np.asarray([a for a, _ in self.pairs], dtype=np.intp)
        self.B = np.asarray([b for _, b in self.pairs], dtype=np.intp)
        seq = np.random.SeedSequence(self.seed)
        self._perm_seq, self._boot_seq = seq.spawn(2)
        self._prepare_columns()

    def _prepare_columns(self) -> None:
        k = self.Xs.shape[1]
        width = self.layout.n_words * 64
        indicators: list[np.ndarray] = []
        values: list[tuple[int, float]] = []  # (column, value) of each indicator
        continuous: list[int] = []
        for j in range(k):
            levels = np.unique(self.Xs[:, j])
            levels = levels[levels != 0.0]
            if levels.size > MAX_LEVELS:
                continuous.append(j)
                continue
            for v in levels:
                bits = np.zeros(width, dtype=np.uint8)
                bits[self.layout.positions[self.Xs[:, j] == v]] = 1
                indicators.append(np.packbits(bits, bitorder="little").view("<u8"))
                values.append((j, float(v)))
        self.continuous = np.asarray(continuous, dtype=np.intp)
        self.indicators = (
            np.stack(indicators)
            if indicators
            else np.zeros((0, self.layout.n_words), dtype=np.uint64)
        )
        self.V = np.zeros((len(values), k))
        for c, (j, v) in enumerate(values):
            self.V[c, j] = v
        self.word_starts = np.asarray([w0 for w0, _ in self.layout.words], dtype=np.intp)
        # ones per indicator and group: (groups, indicators)
        self.M = (
            _popcount_sums(self.indicators, self.word_starts).T.astype(np.float64)
            if len(values)
            else np.zeros((len(self.layout.words), 0))
        )
        if continuous:
            padded = np.zeros((width, len(continuous)))
            padded[self.layout.positions] = self.Xs[:, continuous]
            self.X_cont = padded

    @property
    def scopes(self) -> list[str]:
        return [OVERALL, *self.layout.names]

    def _group_sums(self, words: np.ndarray) -> list[np.ndarray]:
        """Signed sums per group for a block of packed sign vectors: [(rows × columns)] per group."""
        rows = words.shape[0]
        k = self.X.shape[1]
        n_groups = len(self.layout.words)
        counts = np.zeros((n_groups, rows, self.V.shape[0]))
        for c in range(self.V.shape[0]):
            hits = _popcount_sums(words & self.indicators[c], self.word_starts)  # rows × groups
            counts[:, :, c] = hits.T
        sums = []
        for g in range(n_groups):
            # sum_v v * (m_v - 2 k_v): the unflipped total minus twice the flipped part
            base = self.M[g] @ self.V if self.V.shape[0] else np.zeros(k)
            part = (
                base[None, :] - 2.0 * (counts[g] @ self.V)
                if self.V.shape[0]
                else np.zeros((rows, k))
            )
            sums.append(part)
        if self.continuous.size:
            w0, w1 = 0, self.layout.n_words
            raw = words[:, w0:w1].view(np.uint8)
            signs = np.take(_SIGN_TABLE, raw, axis=0).reshape(rows, -1)
            for g, (a, b) in enumerate(self.layout.words):
                lo, hi = a * 64, b * 64
                sums[g][:, self.continuous] = signs[:, lo:hi] @ self.X_cont[lo:hi]
        return sums

    def observed(self) -> np.ndarray:
        """Observed means per scope and column: (scopes, columns) — the all-unflipped vector."""
        zero = np.zeros((1, self.layout.n_words), dtype=np.uint64)
        return self.layout.scope_means(self._group_sums(zero))[0]

    def exact(self) -> bool:
        n = self.X.shape[0]
        return n <= 62 and (1 << n) <= self.permutations

    def pvalues(self) -> tuple[np.ndarray, int]:
        """Two-sided p-values per scope and pair: ((scopes, pairs), number of sign vectors)."""
        obs = self.observed()
        t_obs = np.abs(obs[:, self.A] - obs[:, self.B])
        # Equal statistics must compare equal despite summation order (EQUAL_TOLERANCE).
        scale = max(float(np.abs(self.X).max(initial=0.0)), 1e-300)
        threshold = t_obs - EQUAL_TOLERANCE * scale
        counts = np.zeros_like(t_obs, dtype=np.int64)
        n = self.X.shape[0]
        exact = self.exact()
        blocks = (
            _all_words(self.layout, n)
            if exact
            else _random_words(self.layout.n_words, self.permutations, self._perm_seq)
        )
        for words in blocks:
            means = self.layout.scope_means(self._group_sums(words))
            for lo in range(0, len(self.A), PAIR_CHUNK):
                part = slice(lo, lo + PAIR_CHUNK)
                t = np.abs(means[:, :, self.A[part]] - means[:, :, self.B[part]])
                counts[:, part] += np.count_nonzero(t >= threshold[None, :, part], axis=0)
        if exact:
            total = 1 << n
            return counts / total, total
        return (counts + 1) / (self.permutations + 1), self.permutations

    def intervals(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile paired-bootstrap interval of each pair's difference: (low, high) per scope,
        rounded to :data:`CI_DECIMALS` (the last digits depend on the CPU)."""
        shape = (len(self.scopes), len(self.pairs))
        if self.bootstrap <= 0:
            return np.full(shape, np.nan), np.full(shape, np.nan)
        # The replicates' column means (small), then the pair differences a chunk of pairs at a
        # time: B × scopes × pairs at once is 400 MB for 50 systems.
        means = np.empty((self.bootstrap, len(self.scopes), self.X.shape[1]))
        row = 0
        bounds = self.layout.bounds
        for blocks in _bootstrap_blocks(bounds, self.bootstrap, self._boot_seq):
            sums = [blk @ self.Xs[lo:hi] for blk, (lo, hi) in zip(blocks, bounds, strict=True)]
            block = self.layout.scope_means(sums)
            means[row : row + block.shape[0]] = block
            row += block.shape[0]
        tail = (1.0 - level) / 2.0 * 100.0
        low, high = np.empty(shape), np.empty(shape)
        for lo in range(0, len(self.A), PAIR_CHUNK):
            part = slice(lo, lo + PAIR_CHUNK)
            diffs = means[:, :, self.A[part]] - means[:, :, self.B[part]]
            low[:, part], high[:, part] = np.percentile(diffs, [tail, 100.0 - tail], axis=0)
        return np.round(low, CI_DECIMALS), np.round(high, CI_DECIMALS)


_CORRECTION_NAMES = {"holm": "Holm–Bonferroni", "bh": "Benjamini–Hochberg", "none": "no"}
_FAMILY_TEXT = {
    "measure": "one family per measure and level: all overall pairs of a measure, or all "
    "(pair, domain) tests of a measure",
    "all": "every test in the report is one family",
}


def _score_matrix(
    per_query: Mapping[str, Mapping[str, Sequence[float] | np.ndarray]],
    systems: list[str],
    measures: list[str],
) -> tuple[np.ndarray, dict[tuple[str, str], int]]:
    """Queries × (system, measure) columns, measure-major, and each column's index."""
    for s in systems:
        for m in measures:
            if m not in per_query[s]:
                raise SearchTomeError(f"system {s!r} has no per-query values for {m}")
    n = len(np.asarray(per_query[systems[0]][measures[0]]))
    if n == 0:
        raise SearchTomeError("no queries to compare")
    columns: list[tuple[str, str]] = [(s, m) for m in measures for s in systems]
    col = {key: i for i, key in enumerate(columns)}
    X = np.empty((n, len(columns)))
    for (s, m), i in col.items():
        values = np.asarray(per_query[s][m], dtype=np.float64)
        if values.shape != (n,):
            raise SearchTomeError(f"system {s!r}, {m}: {values.size} values for {n} queries")
        X[:, i] = values
    return X, col


def _family_of(family: Family, scope: str, measure: str) -> str:
    """The family a test is corrected in: all tests, or its measure at its level."""
    if family == "all":
        return "all"
    return f"{measure}/{'overall' if scope == OVERALL else 'per-domain'}"


def _pair_tests(
    engine: Engine,
    scope_rows: Mapping[str, np.ndarray],
    pair_keys: list[tuple[str, str, str]],
    o: CompareOptions,
) -> tuple[list[PairTest], dict[str, list[int]]]:
    """One test per scope and pair, p-values adjusted within each family."""
    pvals, _ = engine.pvalues()
    low, high = engine.intervals(o.ci_level)
    obs = engine.observed()
    exact = engine.exact()
    records: list[dict[str, Any]] = []
    for si, scope in enumerate(engine.scopes):
        rows = scope_rows[scope]
        for pi, (a, b, m) in enumerate(pair_keys):
            ia, ib = engine.pairs[pi]
            p = float(pvals[si, pi])
            records.append(
                {
                    "scope": scope,
                    "measure": m,
                    "a": a,
                    "b": b,
                    "mean_a": float(obs[si, ia]),
                    "mean_b": float(obs[si, ib]),
                    "diff": float(obs[si, ia] - obs[si, ib]),
                    "ci_low": float(low[si, pi]),
                    "ci_high": float(high[si, pi]),
                    "p": p,
                    "family": _family_of(o.family, scope, m),
                    "p_at_floor": at_floor(p, engine.permutations, exact),
                    "mcnemar_p": mcnemar(engine.X[rows, ia], engine.X[rows, ib])
                    if o.mcnemar
                    else None,
                }
            )
    by_family: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_family.setdefault(r["family"], []).append(i)
    for idx in by_family.values():
        adjusted = adjust([records[i]["p"] for i in idx], o.correction)
        for i, value in zip(idx, adjusted, strict=True):
            records[i]["p_adjusted"] = float(value)
            records[i]["significant"] = bool(value < o.alpha)
    return [PairTest(**r) for r in records], by_family


@dataclass(frozen=True)
class CompareOptions:
    """How :func:`compare` tests: the sign flips, the intervals and the correction."""

    permutations: int = 10_000  # random sign vectors per test (all of them when 2**n is fewer)
    bootstrap: int = 2_000  # paired-bootstrap resamples per interval (0: no intervals)
    seed: int = 0
    correction: Correction = "holm"
    alpha: float = 0.05  # significance level of the adjusted p-values
    family: Family = "measure"  # the tests corrected together
    ci_level: float = 0.95
    # the exact McNemar p beside each 0/1 test; it imports scipy.stats (about 60 MiB resident),
    # which the service's board, showing no McNemar p, is spared
    mcnemar: bool = True


def compare(
    per_query: Mapping[str, Mapping[str, Sequence[float] | np.ndarray]],
    *,
    measures: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    control: str | None = None,
    options: CompareOptions | None = None,
) -> ComparisonReport:
    """Test every pair of systems (or each against ``control``) on every measure and scope.

    ``per_query[system][measure]`` are per-query values, all in the same query order;
    ``groups`` gives each query's domain (``None``: no per-domain tests, plain mean overall).
    """
    o = options or CompareOptions()
    systems = list(per_query)
    if len(systems) < 2:
        raise SearchTomeError("comparison needs at least two systems")
    if o.permutations < 1:
        raise SearchTomeError("--permutations must be at least 1")
    measures = list(next(iter(per_query.values())) if measures is None else measures)
    if control is not None and control not in systems:
        raise unknown_name("control system", control, systems)
    X, col = _score_matrix(per_query, systems, measures)
    if control is not None:
        system_pairs = [(control, s) for s in systems if s != control]
    else:
        system_pairs = list(combinations(systems, 2))
    pair_keys = [(a, b, m) for m in measures for a, b in system_pairs]
    pairs = [(col[a, m], col[b, m]) for a, b, m in pair_keys]
    engine = Engine(X, groups, pairs, o.permutations, o.bootstrap, o.seed)
    labels = None if groups is None else np.asarray([str(g) for g in groups])
    scope_rows = {
        scope: np.arange(X.shape[0]) if labels is None or scope == OVERALL else labels == scope
        for scope in engine.scopes
    }
    tests, by_family = _pair_tests(engine, scope_rows, pair_keys, o)
    obs = engine.observed()
    means = {
        scope: {s: {m: float(obs[si, col[s, m]]) for m in measures} for s in systems}
        for si, scope in enumerate(engine.scopes)
    }
    settings = _report_settings(o, engine, by_family, control)
    return ComparisonReport(
        systems, measures, engine.scopes, means, _scope_sizes(engine), tests, settings
    )


def _scope_sizes(engine: Engine) -> dict[str, int]:
    """Queries per scope: all of them overall, each domain's own."""
    n_queries = {OVERALL: engine.X.shape[0]}
    if engine.layout.macro:
        for name, (lo, hi) in zip(engine.layout.names, engine.layout.bounds, strict=True):
            n_queries[name] = hi - lo
    return n_queries


def _report_settings(
    o: CompareOptions, engine: Engine, by_family: Mapping[str, list[int]], control: str | None
) -> ComparisonSettings:
    exact = engine.exact()
    return ComparisonSettings(
        permutations=o.permutations,
        sign_vectors=(1 << engine.X.shape[0]) if exact else o.permutations,
        exact=exact,
        bootstrap=o.bootstrap,
        ci_level=o.ci_level,
        seed=o.seed,
        correction=o.correction,
        correction_name=_CORRECTION_NAMES[o.correction],
        alpha=o.alpha,
        family=o.family,
        family_description=_FAMILY_TEXT[o.family],
        families={k: len(v) for k, v in by_family.items()},
        statistic="macro mean over domains (overall), mean within a domain"
        if engine.layout.macro
        else "mean over queries",
        control=control,
        pvalue="exact: c / 2**n" if exact else "(c + 1) / (B + 1)",
        p_floor=None if exact else 1.0 / (o.permutations + 1),
        mcnemar=MCNEMAR_TEXT if o.mcnemar else "",
    )
