"""``searchtome score RUN --qrels QRELS`` imports what scoring a TREC run needs, and no more.

Start-up is most of a small ``score``: ir_measures (with pytrec_eval), the dataset loader
(parquet, the Hub) and the hashing and temporary-file modules cost it tens of milliseconds of CPU
and are not needed with built-in measures and qrels. The speed itself is measured in
``benchmarks/trec_reading.py``; this test keeps the imports from creeping back.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

NOT_NEEDED = (
    "ir_measures",
    "pytrec_eval",
    "pyarrow",
    "pandas",
    "hashlib",
    "tempfile",
    "searchtome.dataset.loader",
    "searchtome.dataset.layout",
    "searchtome.ingest",
    # meta.json's typed documents and the dataset's record classes (a frozen dataclass costs
    # about 1 ms to define), the JSON-lines parser, and the modules only an error message or
    # another output format needs
    "searchtome.records",
    "searchtome.submissions.meta",
    "searchtome.submissions.runinfo",
    "searchtome.submissions.jsonl",
    "difflib",
    "csv",
)


def _score_modules(tmp_path: Path, *extra: str) -> tuple[str, set[str]]:
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.txt"
    run.write_text("q1 Q0 book/1.1 1 2.0 sys\nq1 Q0 book/1.2 2 1.0 sys\n")
    qrels.write_text("q1 0 book/1.2 1\n")
    code = (
        "import contextlib, io, json, sys\n"
        "from searchtome.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    main(['score', {str(run)!r}, '--qrels', {str(qrels)!r}, '--format', 'json', "
        f"*{list(extra)!r}])\n"
        "print(json.dumps([out.getvalue(), sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    printed, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    return printed, set(modules)


def test_score_with_qrels_leaves_the_heavy_modules_out(tmp_path: Path) -> None:
    printed, modules = _score_modules(tmp_path)
    loaded = sorted(m for m in modules if m.split(".")[0] in NOT_NEEDED or m in NOT_NEEDED)
    assert loaded == []
    # It did score: the run puts the gold leaf second.
    assert json.loads(printed)[0]["aggregate"] == {
        "R@1": 0.0,
        "R@3": 1.0,
        "R@5": 1.0,
        "RR@10": 0.5,
        "nDCG@3": 1 / math.log2(3),
    }


def test_an_ir_measures_name_still_loads_ir_measures(tmp_path: Path) -> None:
    _, modules = _score_modules(tmp_path, "--measures", "AP", "R@1")
    assert "ir_measures" in modules
