"""Every measure name a user may type either works or is one line: ir_measures, trec_eval, counts."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pytest

from searchtome.dataset.loader import load
from tests.fixtures.hostile_cli import cli, folder_with, refused


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path) -> Path:
    ds = load(tiny_dataset)
    leaves = [leaf.leaf_id for leaf in ds.leaves()]
    rows = [
        {
            "query_id": q.query_id,
            "leaf_ids": [*[x for x in leaves if x != q.leaf_id][:2], q.leaf_id],
        }
        for q in ds.queries("test")
    ]
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return folder_with(tmp_path_factory.mktemp("names"), "sys", body)


def _aggregate(
    capsys: pytest.CaptureFixture[str], submission: Path, data: Path, *measures: str
) -> dict:
    result = cli(
        capsys, "score", submission, "--data", data, "--format", "json", "--measures", *measures
    )
    assert result.rc == 0, result.text
    (system,) = json.loads(result.out)
    return system["aggregate"]


@pytest.mark.parametrize(
    ("measure", "name", "value"),
    [
        ("NumQ", "NumQ", 30),
        ("NumRet", "NumRet", 90),
        ("NumRel", "NumRel", 30),
        ("NumRelRet", "NumRet(rel=1)", 30),
        ("num_q", "NumQ", 30),
        ("num_ret", "NumRet", 90),
    ],
)
def test_count_measures_are_sums(
    measure: str,
    name: str,
    value: int,
    submission: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _aggregate(capsys, submission, tiny_dataset, measure)[name] == value
    table = cli(capsys, "score", submission, "--data", tiny_dataset, "--measures", measure)
    row = table.line_with("sys ")
    assert f" {value} " in row, row  # a count, not a percentage (3000.0)
    assert f"{name}: counts summed over queries" in table.out


@pytest.mark.parametrize(
    ("trec_eval", "ours"),
    [
        ("map", "AP"),
        ("ndcg_cut_10", "nDCG@10"),
        ("ndcg_cut.10", "nDCG@10"),
        ("recip_rank", "RR"),
        ("P.5", "P@5"),
        ("P_5", "P@5"),
        ("map_cut_10", "AP@10"),
        ("recall.3", "R@3"),
        ("success.1", "Success@1"),
        ("bpref", "Bpref"),
    ],
)
def test_trec_eval_names_are_accepted_as_their_measure(
    trec_eval: str,
    ours: str,
    submission: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    via_trec = _aggregate(capsys, submission, tiny_dataset, trec_eval)
    direct = _aggregate(capsys, submission, tiny_dataset, ours)
    assert ours in via_trec
    assert via_trec[ours] == direct[ours]


@pytest.mark.parametrize(
    ("measure", "needle"),
    [
        ("gm_map", "a trec_eval measure that ir_measures does not compute"),
        ("alpha_nDCG@10", "ir_measures cannot compute it with the providers installed"),
        ("NRBP", "ir_measures cannot compute it with the providers installed"),
        ("SDCG", "ir_measures needs its 'cutoff' parameter given"),
        ("BPM(T=1)", "ir_measures needs its"),
        ("hits@3", "'hits' is ambiguous"),
        ("Accuracy", "not computed here"),
        ("ndcgg@3", "did you mean"),
        ("AP(", "unknown measure"),
    ],
)
def test_measures_that_cannot_be_computed_are_one_line(
    measure: str,
    needle: str,
    submission: Path,
    tiny_dataset: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = cli(capsys, "score", submission, "--data", tiny_dataset, "--measures", measure)
    assert refused(result, needle).startswith(
        ("searchtome: error: measure", "searchtome: error: unknown measure")
    )


@pytest.mark.parametrize("name", sorted(ir_measures.measures.registry))
def test_every_ir_measures_name_works_or_is_one_line(
    name: str, submission: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, "score", submission, "--data", tiny_dataset, "--measures", name)
    if result.rc != 0:
        line = refused(result, "searchtome: error: measure")
        assert line == result.err.strip()
