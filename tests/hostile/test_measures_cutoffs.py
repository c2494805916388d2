"""Hostile ``--measures``: cut-offs far past any ranking are one line, not gigabytes or a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.dataset.loader import load
from searchtome.metrics.measures import MAX_CUTOFF
from tests.fixtures.hostile_cli import cli, cli_rss, folder_with, refused


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> Path:
    ds = load(tiny_dataset)
    leaves = [leaf.leaf_id for leaf in ds.leaves()]
    rows = [
        {
            "query_id": q.query_id,
            "leaf_ids": [q.leaf_id, *[x for x in leaves if x != q.leaf_id][:5]],
        }
        for q in ds.queries("test")
    ]
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return folder_with(tmp_path_factory.mktemp("cut"), "sys", body)


@pytest.mark.parametrize(
    ("measure", "needle"),
    [
        ("nDCG@300000", "cut-off 300000 is above 1,000"),
        ("R@1000000000", "cut-off 1000000000 is above 1,000"),
        ("P_" + "9" * 5000, "cut-off of 5,000 digits is above 1,000"),
        ("Success@1001", "cut-off 1001 is above 1,000"),
        ("R@0", "the cutoff must be an integer of at least 1"),
        ("AP@1000000000", "cut-off 1000000000.0 is above 1,000"),
        ("Judged@5000", "cut-off 5000.0 is above 1,000"),
        ("R@1e9", "cut-off 1000000000.0 is above 1,000"),
    ],
)
def test_unbounded_cutoffs_are_refused(
    measure: str,
    needle: str,
    submission: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = cli(capsys, "score", submission, "--data", tiny_dataset, "--measures", measure)
    line = refused(result, needle)
    assert line.startswith("searchtome: error: measure ")


def test_the_deepest_cutoff_scores_in_bounded_memory(submission: Path, tiny_dataset: Path) -> None:
    # Arrays stop at the longest ranking (6 ids), whatever k asks for.
    measures = [f"nDCG@{MAX_CUTOFF}", f"R@{MAX_CUTOFF}", f"P@{MAX_CUTOFF}", "RR@1000", "nDCG@6"]
    result = cli_rss(
        "score", submission, "--data", tiny_dataset, "--format", "json", "--measures", *measures
    )
    assert result.rc == 0, result.err
    (system,) = json.loads(result.out)
    agg = system["aggregate"]
    text = json.dumps(agg)
    assert "nDCG@1000" in text
    assert result.peak_mib is not None and result.peak_mib < 400
