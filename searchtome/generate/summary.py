"""What a build did, for the person who ran it: counts, per-stage outcomes and failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.records import SPLITS

REPORT_FILE = "build-report.json"


@dataclass
class BuildSummary:
    """The outcome of one build; :meth:`render` is what ``searchtome build`` prints."""

    out: Path
    books: int = 0
    leaves: int = 0
    units: int = 0
    units_dropped: int = 0
    questions: dict[str, int] = field(default_factory=dict)
    generated: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    cached_units: int = 0
    stages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    up_to_date: bool = False
    # book id → counts against the paper's (searchtome.generate.paper.paper_comparison)
    paper: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def transient_failures(self) -> list[tuple[str, str]]:
        """Failures a rerun may fix (the endpoint did not answer), as opposed to unusable replies."""
        return [f for f in self.failures if f[1].startswith("request failed")]

    def render(self) -> str:
        total = sum(self.questions.values())
        split_text = " / ".join(f"{self.questions.get(s, 0):,} {s}" for s in SPLITS)
        lines = [
            f"built {self.out}" + (" (already up to date)" if self.up_to_date else ""),
            f"  books {self.books}, leaves {self.leaves:,}, units {self.units:,}"
            + (f" (+{self.units_dropped} too short, left out)" if self.units_dropped else ""),
            f"  questions {total:,} ({split_text}); {self.generated:,} generated, "
            f"{sum(self.removed.values()):,} removed by filters",
            f"  requests sent {self.requests:,}; units answered from the cache {self.cached_units:,}",
        ]
        if self.removed:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.removed.items()))
            lines.append(f"  removed: {reasons}")
        lines.append("  stages: " + ", ".join(f"{k} {v}" for k, v in self.stages.items()))
        lines += self._paper_lines()
        if self.failures:
            lines.append(f"  FAILED units {len(self.failures)} (details in {REPORT_FILE}):")
            lines += [f"    {uid}: {why}" for uid, why in self.failures[:10]]
            if len(self.failures) > 10:
                lines.append(f"    ... and {len(self.failures) - 10} more")
        lines.append(f"  time {self.seconds:.1f} s")
        return "\n".join(lines)

    def _paper_lines(self) -> list[str]:
        """The block comparing each book with the paper's Table 1 (none without figures)."""
        if not self.paper:
            return []
        lines = ["  against the paper's Table 1 (found/paper, ratio):"]
        for book_id, entry in self.paper.items():
            depth = entry.get("leaf_depth")
            cut = f" at depth {depth}" if depth is not None else ""
            parts = [f"{k} {_ratio(entry[k])}" for k in _PAPER_ORDER]
            lines.append(
                f"    {book_id}: {parts[0]}, {parts[1]}{cut}; {parts[2]} = {', '.join(parts[3:])}"
            )
            if "leaf_problem" in entry:
                lines.append(f"      ! {entry['leaf_problem']}")
        return lines


_PAPER_ORDER = ("pages", "leaves", "questions", "test", "train", "dev")


def _ratio(count: dict[str, Any]) -> str:
    return f"{count['found']:,}/{count['paper']:,} ({count['ratio']:.2f})"
