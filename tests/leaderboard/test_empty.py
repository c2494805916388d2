"""Empty rankings are counted: answered, yet nothing in them (issue 22: 94 of 189 zero-shot
rankings were empty and the table said "Answered 189/189")."""

from __future__ import annotations

import io
from pathlib import Path

from searchtome.cli import main
from searchtome.dataset.loader import load
from searchtome.leaderboard import LeaderboardOptions, build_leaderboard
from searchtome.leaderboard.markdown import main_table
from searchtome.leaderboard.terminal import print_main_table
from searchtome.records import Run
from searchtome.submissions import make_meta, write_submission

from .test_html import _rows
from .test_leaderboard import system_runs


def test_empty_rate_in_every_output(tmp_path: Path, tiny_dataset: Path, capsys) -> None:
    ds = load(tiny_dataset)
    oracle = system_runs(ds)["oracle"]
    law = {q.query_id for q in ds.queries("test") if ds.domain(q.book_id) == "Law"}
    # Empty on every Law query: half the domains, so a macro rate of 50% whatever their sizes.
    rankings = {q: (() if q in law else ids) for q, ids in oracle.rankings.items()}
    root = tmp_path / "subs"
    for name, run in (("oracle", oracle), ("shy", Run("shy", rankings))):
        meta = make_meta(name, description="d", command="c", dataset_revision="tiny")
        write_submission(root / name, run, meta)
    result = build_leaderboard(
        ds, root, tmp_path / "lb", LeaderboardOptions(permutations=50, bootstrap=0)
    )
    shy = next(e for e in result.entries if e.system == "shy")
    assert (shy.n_empty, shy.empty) == (len(law), 0.5)
    row = next(r for r in main_table(result).splitlines() if "| shy |" in r)
    assert row.split(" | ")[5:8] == ["0.00", "0.00", "50.00"]  # Non-leaf, Invalid, Empty
    cells = _rows((tmp_path / "lb" / "index.html").read_text(), "main-table")[1]
    assert cells[8] == (
        f' data-v="0.5" title="{len(law)} of 30 rankings empty"',
        "50.00",
    )
    out = io.StringIO()
    print_main_table(result, out)
    assert "Empty" in out.getvalue().splitlines()[1]
    assert main(["score", str(root / "shy"), "--data", str(tiny_dataset)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shy"))
    assert row.split()[:3] == ["shy", "30/30", str(len(law))]
