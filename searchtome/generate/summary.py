"""What a build did, for the person who ran it: counts, per-stage outcomes and failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
        if self.failures:
            lines.append(f"  FAILED units {len(self.failures)} (details in {REPORT_FILE}):")
            lines += [f"    {uid}: {why}" for uid, why in self.failures[:10]]
            if len(self.failures) > 10:
                lines.append(f"    ... and {len(self.failures) - 10} more")
        lines.append(f"  time {self.seconds:.1f} s")
        return "\n".join(lines)
