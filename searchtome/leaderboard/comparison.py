"""The comparison report: pairwise test results and their markdown, LaTeX and JSON forms.

:func:`searchtome.leaderboard.significance.compare` fills it; this module only holds and prints.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.leaderboard.text import finite, floor_text, fmt_p, latex_escape, md_escape

OVERALL = "overall"  # the scope of the tests over all queries (the others are domains)


@dataclass(frozen=True)
class PairTest:
    scope: str
    measure: str
    a: str
    b: str
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p: float
    p_adjusted: float
    significant: bool
    family: str
    p_at_floor: bool = False  # p is 1/(B+1): no sign vector was as extreme; the true p is lower
    mcnemar_p: float | None = None  # exact McNemar p for 0/1 measures (R@k), else None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


MCNEMAR_TEXT = (
    "exact McNemar p (binomial test on the discordant queries, pooled over the scope's queries) "
    "for 0/1 measures such as R@k"
)


@dataclass(frozen=True)
class ComparisonSettings:
    """How a comparison was computed, as its report and ``settings`` in JSON give it."""

    permutations: int  # B, the random sign vectors asked for
    sign_vectors: int  # those used: 2**n when every one was enumerated
    exact: bool  # every sign vector enumerated: p = c / 2**n
    bootstrap: int
    ci_level: float
    seed: int
    correction: str  # holm, bh or none
    correction_name: str  # "Holm–Bonferroni"
    alpha: float
    family: str  # measure or all
    family_description: str
    families: dict[str, int]  # family → its number of tests
    statistic: str
    control: str | None
    pvalue: str  # the p-value's formula
    p_floor: float | None = None  # the smallest p the sign flips can give; None when exact
    mcnemar: str = ""  # what the McNemar p beside each test is ("": none, older reports)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_SUPERSCRIPT_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _letter(i: int) -> str:
    letters = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        letters = _SUPERSCRIPT_LETTERS[r] + letters
    return letters


@dataclass
class ComparisonReport:
    """Means, pairwise tests and intervals; renders to markdown, LaTeX and JSON.

    In the summary table each system has a letter; a cell's superscript lists the letters of the
    systems it beats significantly on that measure and scope (adjusted p < alpha).
    """

    systems: list[str]
    measures: list[str]
    scopes: list[str]
    means: dict[str, dict[str, dict[str, float]]]  # scope → system → measure → mean
    n_queries: dict[str, int]
    tests: list[PairTest]
    settings: ComparisonSettings

    def test(self, a: str, b: str, measure: str, scope: str = OVERALL) -> PairTest:
        for t in self.tests:
            if t.measure == measure and t.scope == scope and {t.a, t.b} == {a, b}:
                return t
        raise KeyError((a, b, measure, scope))

    def wins(self, scope: str, measure: str) -> dict[str, list[str]]:
        """System → systems it beats significantly."""
        out: dict[str, list[str]] = {s: [] for s in self.systems}
        for t in self.tests:
            if t.scope != scope or t.measure != measure or not t.significant:
                continue
            if t.diff > 0:
                out[t.a].append(t.b)
            elif t.diff < 0:
                out[t.b].append(t.a)
        return out

    def letters(self) -> dict[str, str]:
        return {s: _letter(i) for i, s in enumerate(self.systems)}

    # -- rendering --
    def _settings_line(self) -> str:
        s = self.settings
        kind = "exact enumeration" if s.exact else f"B = {s.permutations:,} sign flips"
        return (
            f"Paired randomization test (two-sided, {kind}, seed {s.seed}); "
            f"{s.correction_name} correction per family ({s.family_description}); "
            f"alpha = {s.alpha}; {int(s.ci_level * 100)}% paired-bootstrap intervals "
            f"({s.bootstrap:,} resamples); statistic: {s.statistic}."
        )

    def p_text(self, t: PairTest) -> str:
        """The randomization p, ``< 1e-4`` where it is at its floor 1/(B+1)."""
        return floor_text(self.settings.permutations) if t.p_at_floor else fmt_p(t.p)

    def _legend(self) -> str:
        alpha = self.settings.alpha
        return (
            "Each system has a letter; a superscript lists the letters of the systems whose "
            f"value it beats significantly on that measure and scope (adjusted p < {alpha}); in "
            "the pairwise tests, * marks a significant difference. A p shown as "
            f"{floor_text(self.settings.permutations)} is at its floor 1/(B+1): no sign flip "
            "was as extreme; the exact McNemar p (0/1 measures such as R@k) says how far below."
        )

    def to_markdown(self, scale: float = 100.0, digits: int = 1) -> str:
        letters = self.letters()
        names = ", ".join(md_escape(s) for s in self.systems)
        lines = [f"## Significance: {names}", "", self._settings_line(), ""]
        lines += [self._legend(), ""]
        for scope in self.scopes:
            lines.append(f"### {md_escape(scope)} ({self.n_queries[scope]:,} queries)")
            lines.append("")
            lines.append("| | System | " + " | ".join(self.measures) + " |")
            lines.append("|---|---|" + "---:|" * len(self.measures))
            wins = {m: self.wins(scope, m) for m in self.measures}
            for system in self.systems:
                cells = []
                for m in self.measures:
                    value = f"{self.means[scope][system][m] * scale:.{digits}f}"
                    beaten = "".join(letters[x] for x in self.systems if x in wins[m][system])
                    cells.append(f"{value}<sup>{beaten}</sup>" if beaten else value)
                lines.append(
                    f"| {letters[system]} | {md_escape(system)} | " + " | ".join(cells) + " |"
                )
            lines.append("")
        lines.append("### Pairwise tests")
        lines.append("")
        lines.append("| Scope | Measure | A | B | A − B | 95% CI | p | McNemar p | p adj. | |")
        lines.append("|---|---|---|---|---:|---|---:|---:|---:|---|")
        for t in self.tests:
            ci = (
                f"[{t.ci_low * scale:+.{digits + 1}f}, {t.ci_high * scale:+.{digits + 1}f}]"
                if not math.isnan(t.ci_low)
                else "–"
            )
            lines.append(
                f"| {md_escape(t.scope)} | {md_escape(t.measure)} | {md_escape(t.a)} | {md_escape(t.b)} | "
                f"{t.diff * scale:+.{digits + 1}f} | {ci} | {self.p_text(t)} | "
                f"{'–' if t.mcnemar_p is None else fmt_p(t.mcnemar_p)} | {fmt_p(t.p_adjusted)} | "
                f"{'*' if t.significant else ''} |"
            )
        lines.append("")
        return "\n".join(lines)

    def to_latex(self, scale: float = 100.0, digits: int = 1, scope: str = OVERALL) -> str:
        letters = self.letters()
        wins = {m: self.wins(scope, m) for m in self.measures}
        cols = "ll" + "r" * len(self.measures)
        out = [
            "% " + self._settings_line(),
            r"\begin{table}[t]",
            r"\centering",
            rf"\begin{{tabular}}{{{cols}}}",
            r"\toprule",
            " & System & " + " & ".join(latex_escape(m) for m in self.measures) + r" \\",
            r"\midrule",
        ]
        for system in self.systems:
            cells = []
            best = {m: max(self.means[scope][s][m] for s in self.systems) for m in self.measures}
            for m in self.measures:
                value = self.means[scope][system][m]
                text = f"{value * scale:.{digits}f}"
                if value == best[m]:
                    text = rf"\textbf{{{text}}}"
                beaten = "".join(letters[x] for x in self.systems if x in wins[m][system])
                cells.append(f"{text}$^{{{beaten}}}$" if beaten else text)
            out.append(
                f"{letters[system]} & {latex_escape(system)} & " + " & ".join(cells) + r" \\"
            )
        out += [
            r"\bottomrule",
            r"\end{tabular}",
            rf"\caption{{{latex_escape(scope)}: {self.n_queries[scope]:,} queries. Superscripts "
            rf"mark systems beaten significantly ({latex_escape(self.settings.correction_name)}"
            rf"-corrected paired randomization test, $\alpha={self.settings.alpha}$).}}",
            r"\end{table}",
        ]
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "systems": list(self.systems),
            "measures": list(self.measures),
            "scopes": list(self.scopes),
            "n_queries": dict(self.n_queries),
            "means": self.means,
            "tests": [t.to_dict() for t in self.tests],
            "settings": self.settings.to_dict(),
        }

    def to_json(self) -> str:
        from searchtome.io import dumps

        return dumps(finite(self.to_dict()))

    def render(self, fmt: str = "markdown") -> str:
        if fmt == "markdown":
            return self.to_markdown()
        if fmt == "latex":
            return self.to_latex()
        if fmt == "json":
            return self.to_json()
        raise SearchTomeError(f"unknown report format {fmt!r}; use markdown, latex or json")

    def __str__(self) -> str:
        return self.to_markdown()
