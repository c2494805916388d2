"""The validator: every error with its exact message, counts of non-leaf and invalid ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from searchtome.dataset.loader import Dataset
from searchtome.records import Run
from searchtome.submissions import Limits, write_submission
from searchtome.submissions.validate import validate_submission
from tests.fixtures.submission_helpers import (
    all_lines,
    dataset_fixture,  # noqa: F401
    error_messages,
    meta_for,
    perfect_run,
    submission_folder,
)

FIELDS = "allowed: query_id, leaf_ids, scores"


def test_valid_submission_passes(tmp_path: Path, ds: Dataset) -> None:
    folder = write_submission(tmp_path / "sys", perfect_run(ds), meta_for())
    report = validate_submission(folder, ds)
    assert report.ok, report.lines()
    assert report.n_answered == report.n_expected == len(ds.queries("test"))
    assert report.counts.ids == report.n_expected and report.counts.invalid_ids == 0


def test_line_level_errors_have_exact_messages(tmp_path: Path, ds: Dataset) -> None:
    qs = ds.queries("test")
    q0, q1, q2 = qs[0].query_id, qs[1].query_id, qs[2].query_id
    dev_id = ds.queries("dev")[0].query_id
    lines = [
        json.dumps({"query_id": q0, "leaf_ids": [qs[0].leaf_id]}),  # 1 fine
        '{"query_id": "x", ',  # 2 bad JSON
        json.dumps({"query_id": q1}),  # 3 missing leaf_ids
        json.dumps({"query_id": q2, "leaf_ids": ["a/1"], "rank": 1}),  # 4 extra field
        json.dumps({"query_id": 7, "leaf_ids": []}),  # 5 wrong type
        json.dumps({"query_id": q0, "leaf_ids": []}),  # 6 duplicate query
        json.dumps({"query_id": "zzz-not-a-query", "leaf_ids": []}),  # 7 unknown query
        json.dumps({"query_id": dev_id, "leaf_ids": []}),  # 8 query of another split
        json.dumps({"query_id": qs[3].query_id, "leaf_ids": ["a/1", 3, "a/1"]}),  # 9 type + dup
        json.dumps({"query_id": qs[4].query_id, "leaf_ids": "a/1"}),  # 10 not a list
        json.dumps({"query_id": qs[5].query_id, "leaf_ids": ["a/1"], "scores": [1, 2]}),  # 11
        json.dumps({"query_id": qs[6].query_id, "leaf_ids": ["a/1"], "scores": ["high"]}),  # 12
        json.dumps({"query_id": qs[7].query_id, "leaf_ids": [f"a/{i}" for i in range(101)]}),  # 13
        '{"query_id": "q", "query_id": "q", "leaf_ids": []}',  # 14 duplicate key
        '{"query_id": "' + qs[8].query_id + '", "leaf_ids": ["a/1"], "scores": [NaN]}',  # 15
        "[1, 2]",  # 16 not an object
        json.dumps({"query_id": qs[9].query_id, "leaf_ids": ["a/1"], "scores": [True]}),  # 17
    ]
    folder = submission_folder(tmp_path, ds, lines)
    p = f"{folder}/predictions.jsonl"
    try:
        json.loads(lines[1])
    except json.JSONDecodeError as exc:
        bad_json = exc.msg
    report = validate_submission(folder, ds)
    got = error_messages(report)
    expected = [
        f"{p}:2: json: not valid JSON ({bad_json})",
        f"{p}:3: leaf_ids: missing",
        f"{p}:4: rank: unexpected field ({FIELDS})",
        f"{p}:5: query_id: expected a non-empty string, got number",
        f"{p}:6: query_id: duplicate query {q0!r} (first on line 1)",
        f"{p}:7: query_id: unknown query 'zzz-not-a-query' in the test split",
        f"{p}:8: query_id: unknown query {dev_id!r} in the test split; it belongs to the dev split",
        f"{p}:9: leaf_ids[1]: expected a non-empty string, got number",
        f"{p}:9: leaf_ids[2]: duplicate of leaf_ids[0] ('a/1'); each id may appear once per ranking",
        f"{p}:10: leaf_ids: expected a list of strings, got string",
        f"{p}:11: scores: 2 scores for 1 leaf_ids; give one score per id or none",
        f"{p}:12: scores[0]: expected a number, got string",
        f"{p}:13: leaf_ids: 101 ids for query {qs[7].query_id!r}; at most 100 allowed",
        f"{p}:14: json: not valid JSON (duplicate field 'query_id')",
        f"{p}:15: json: not valid JSON (NaN is not allowed in JSON)",
        f"{p}:16: json: expected a JSON object, got list",
        f"{p}:17: scores[0]: expected a number, got boolean",
    ]
    for message in expected:
        assert message in got, f"missing: {message}\ngot:\n" + "\n".join(got)
    missing = [m for m in got if "queries have no line" in m]
    assert len(missing) == 1
    assert missing[0].startswith(f"{p}: query_id: ")
    assert not report.ok


def test_missing_queries_error_and_partial(tmp_path: Path, ds: Dataset) -> None:
    folder = submission_folder(tmp_path, ds, all_lines(ds, skip=2))
    p = f"{folder}/predictions.jsonl"
    n = len(ds.queries("test"))
    first = [q.query_id for q in ds.queries("test")[:2]]
    report = validate_submission(folder, ds)
    assert error_messages(report) == [
        f"{p}: query_id: 2 of {n} test queries have no line (e.g. {first[0]!r}, {first[1]!r}); "
        "a leaderboard entry answers every query (--partial scores missing ones as misses)"
    ]
    partial = validate_submission(folder, ds, partial=True)
    assert partial.ok and partial.missing == first
    assert any("scored as misses (--partial)" in str(w) for w in partial.warnings)


def test_the_ids_per_ranking_cap_is_one_of_the_limits(tmp_path: Path, ds: Dataset) -> None:
    q = ds.queries("test")[0]
    others = [x.leaf_id for x in ds.queries("test") if x.leaf_id != q.leaf_id]
    ranking = list(dict.fromkeys([q.leaf_id, *others]))[:3]
    folder = write_submission(
        tmp_path / "sys", Run("sys", {q.query_id: tuple(ranking)}), meta_for()
    )
    p = folder / "predictions.jsonl"
    capped = error_messages(validate_submission(folder, ds, partial=True, limits=Limits(max_ids=2)))
    assert f"{p}:1: leaf_ids: 3 ids for query {q.query_id!r}; at most 2 allowed" in capped
    assert validate_submission(folder, ds, partial=True).ok


def test_size_limits_and_decompression_bombs(tmp_path: Path, ds: Dataset) -> None:
    folder = submission_folder(tmp_path, ds, all_lines(ds))
    p = folder / "predictions.jsonl"
    size = p.stat().st_size
    report = validate_submission(folder, ds, limits=Limits(max_file_bytes=1000))
    assert error_messages(report) == [
        f"{p}: size: {size:,} bytes exceeds the 1,000-byte limit; compress it "
        "(predictions.jsonl.gz) or cut rankings to 100 ids"
    ]
    # a gzip bomb: a few KB on disk, megabytes decompressed
    p.unlink()
    bomb = folder / "predictions.jsonl.gz"
    with gzip.open(bomb, "wb") as fh:
        fh.write(b"\n" * (4 << 20))
    assert bomb.stat().st_size < 20_000
    report = validate_submission(folder, ds, limits=Limits(max_decompressed_bytes=1 << 20))
    assert error_messages(report) == [
        f"{bomb}: gzip: content exceeds 1,048,576 bytes when decompressed (decompression bomb?)"
    ]
    # an overlong line is skipped without being held in memory; the rest is still checked
    bomb.unlink()
    p.write_text('{"query_id": "' + "x" * 5000 + '"}\n' + "\n".join(all_lines(ds)) + "\n")
    report = validate_submission(folder, ds, limits=Limits(max_line_bytes=1000))
    assert error_messages(report) == [f"{p}:1: line: longer than the 1,000-byte limit"]
    # invalid UTF-8
    p.write_bytes(b'{"query_id": "\xff"}\n' + "\n".join(all_lines(ds)).encode() + b"\n")
    report = validate_submission(folder, ds)
    assert error_messages(report) == [f"{p}:1: encoding: not valid UTF-8 (byte 15)"]


def test_trec_format_errors(tmp_path: Path, ds: Dataset) -> None:
    q = ds.queries("test")[0]
    folder = tmp_path / "trec"
    folder.mkdir()
    lines = [f"{x.query_id} Q0 {x.leaf_id} 1 1.0 t" for x in ds.queries("test")]
    lines += [
        f"{q.query_id} Q0 {q.leaf_id} 2 0.5 t",  # duplicate docno
        f"{q.query_id} Q0 other/1 3",  # 4 fields
        f"{q.query_id} Q0 other/2 third 0.1 t",
        f"{q.query_id} Q0 other/3 4 high t",
    ]
    (folder / "predictions.trec").write_text("\n".join(lines) + "\n")
    (folder / "meta.json").write_text(json.dumps(meta_for("trec")))
    p = folder / "predictions.trec"
    n = len(ds.queries("test"))
    report = validate_submission(folder, ds)
    assert report.format == "trec"
    assert error_messages(report) == [
        f"{p}:{n + 1}: docno: duplicate of line 1 ({q.leaf_id!r} for query {q.query_id!r}); "
        "each id may appear once per ranking",
        f"{p}:{n + 2}: line: expected 6 fields 'qid Q0 docno rank score tag', got 4",
        f"{p}:{n + 3}: rank: 'third' is not an integer",
        f"{p}:{n + 4}: score: 'high' is not a number",
    ]


def test_meta_errors(tmp_path: Path, ds: Dataset) -> None:
    meta = meta_for()
    del meta["license"]
    meta["modles"] = ["x"]
    meta["trained_on"] = "train"
    meta["date"] = "31/01/2025"
    folder = submission_folder(tmp_path, ds, all_lines(ds), meta=meta)
    m = f"{folder}/meta.json"
    lines = (folder / "meta.json").read_text().splitlines()

    def line_of(key: str) -> int:
        return next(i for i, text in enumerate(lines, 1) if text.strip().startswith(f'"{key}"'))

    got = error_messages(validate_submission(folder, ds))
    assert got == [
        f"{m}: license: missing (licence of the predictions and meta data)",
        f"{m}:{line_of('modles')}: modles: unexpected field (did you mean 'models'?); put extra "
        "information under 'notes' or 'config'",
        f"{m}:{line_of('trained_on')}: trained_on: expected a list of strings, got string",
        f"{m}:{line_of('date')}: date: '31/01/2025' is not an ISO 8601 date (YYYY-MM-DD)",
    ]
    (folder / "meta.json").unlink()
    got = error_messages(validate_submission(folder, ds))
    assert got == [f"{m}: file: missing; every submission needs meta.json"]
    (folder / "meta.json").write_text('{\n  "system": "sys",\n}\n')
    got = error_messages(validate_submission(folder, ds))
    assert got[0].startswith(f"{m}:3: json: not valid JSON (")


def test_non_leaf_and_invalid_ids_are_counted_not_errors(tmp_path: Path, ds: Dataset) -> None:
    qs = ds.queries("test")
    alpha = next(q for q in qs if q.book_id == "alpha-bio")
    beta = next(q for q in qs if q.book_id == "beta-law")
    other_leaf = next(x.leaf_id for x in ds.leaves("beta-law"))
    rankings = {q.query_id: (q.leaf_id,) for q in qs}
    # non-leaf at rank 1, a made-up id at rank 2, a leaf of the other book at rank 3
    rankings[alpha.query_id] = ("alpha-bio/1", "alpha-bio/9.9", other_leaf, alpha.leaf_id)
    # invalid at rank 1 (leaf of another book), non-leaf at rank 4 (outside the top 3)
    rankings[beta.query_id] = ("alpha-bio/1.1.1", beta.leaf_id, "beta-law/2.1.3", "beta-law/1")
    folder = write_submission(tmp_path / "sys", Run("sys", rankings), meta_for())
    report = validate_submission(folder, ds)
    assert report.ok, report.lines()
    c = report.counts
    assert (c.non_leaf_ids, c.invalid_ids) == (2, 3)
    assert (c.non_leaf_at_1, c.non_leaf_in_top3) == (1, 1)
    assert (c.invalid_at_1, c.invalid_in_top3) == (1, 2)
    assert "non-leaf ids: 2 of" in report.summary()


def test_warnings_ties_unsorted_and_training_on_test(tmp_path: Path, ds: Dataset) -> None:
    qs = ds.queries("test")
    lines = all_lines(ds)
    lines[0] = json.dumps(
        {"query_id": qs[0].query_id, "leaf_ids": [qs[0].leaf_id, "a/2"], "scores": [1.0, 1.0]}
    )
    lines[1] = json.dumps(
        {"query_id": qs[1].query_id, "leaf_ids": [qs[1].leaf_id, "a/2"], "scores": [0.1, 0.9]}
    )
    folder = submission_folder(tmp_path, ds, lines, meta=meta_for(trained_on=["train", "test"]))
    report = validate_submission(folder, ds)
    assert report.ok
    warnings = [str(w) for w in report.warnings]
    p = f"{folder}/predictions.jsonl"
    assert any(
        w.startswith(
            f"{p}: scores: tied scores in 1 ranking(s); the order of leaf_ids is kept (tie rule:"
        )
        for w in warnings
    )
    assert any(
        w.startswith(f"{p}:2: scores: scores increase down the ranking in 1 line(s)")
        for w in warnings
    )
    assert any("trained_on: lists 'test', the split being scored" in w for w in warnings)


def test_meta_problems_do_not_hide_prediction_problems(tmp_path: Path, ds: Dataset) -> None:
    folder = submission_folder(tmp_path, ds, all_lines(ds)[:1])
    (folder / "meta.json").unlink()
    got = error_messages(validate_submission(folder, ds))
    assert got[0] == f"{folder}/meta.json: file: missing; every submission needs meta.json"
    assert got[1].startswith(
        f"{folder}/predictions.jsonl: query_id: 29 of 30 test queries have no line"
    )
