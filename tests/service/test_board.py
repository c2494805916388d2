"""The service's numbers are the project's: same aggregates as the static leaderboard's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from searchtome.dataset.blind import with_private
from searchtome.dataset.loader import load
from searchtome.leaderboard.scoring import score_runs
from searchtome.service.board import Run, Scopes, leaderboard
from searchtome.service.checks import pack_scores, unpack_scores, validate
from searchtome.service.home import ServerSettings, private_queries
from searchtome.submissions import Limits
from tests.service.helpers import blind_release, meta_json, submission


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("board")
    public, private = blind_release(root)
    return root, public, private


def test_aggregates_and_tests_match_the_leaderboard_package(release) -> None:
    root, public, private = release
    full = with_private(load(public), private)
    settings = ServerSettings(split="test", permutations=500, bootstrap=200, secret="00" * 32)
    runs, subs = [], []
    for name, right in (("a", 1.0), ("b", 0.6), ("c", 0.3)):
        folder = submission(root / name, private, name, right=right)
        meta, preds = (
            (folder / "meta.json").read_bytes(),
            (folder / "predictions.jsonl").read_bytes(),
        )
        report, error = validate(meta, "predictions.jsonl", preds, full, "test", Limits())
        assert error is None and report.submission is not None
        values = unpack_scores(pack_scores(report, full, "test"))
        runs.append(Run(name, "team", name, 0.0, False, values, {}))
        subs.append(report.submission)
    board = leaderboard(runs, Scopes.of(load(public), settings), settings, revealed=False)
    reference = score_runs(subs, data=full, split="test")
    rows = {r["system"]: r for r in board["public"]["rows"]}
    assert [r["system"] for r in board["public"]["rows"]] == ["a", "b", "c"]
    for name in ("a", "b", "c"):
        expected = reference.aggregate(name)
        for measure, value in rows[name]["aggregate"].items():
            assert value == pytest.approx(expected[measure], abs=1e-12), (name, measure)
    assert rows["b"]["delta_to_top"]["R@1"]["diff"] == pytest.approx(
        reference.aggregate("b")["R@1"] - reference.aggregate("a")["R@1"]
    )


def test_the_private_part_is_secret_exact_and_reproducible() -> None:
    ids = [f"q-{i:04d}" for i in range(1000)]
    one = private_queries(ids, "ab" * 32, 0.3)
    assert len(one) == 300 and one == private_queries(list(reversed(ids)), "ab" * 32, 0.3)
    other = private_queries(ids, "cd" * 32, 0.3)
    assert 0.15 < len(one & other) / 300 < 0.45  # another secret, another (independent) draw
    assert private_queries(ids, "ab" * 32, 0.0) == set()


def test_nothing_per_query_in_the_board(release) -> None:
    _root, public, _private = release
    settings = ServerSettings(
        split="test", permutations=100, bootstrap=50, secret="11" * 32, private_fraction=0.5
    )
    scopes = Scopes.of(load(public), settings)
    values = {m: np.ones(len(scopes.query_ids)) for m in ("R@1", "R@3", "nDCG@3")}
    values |= {
        m: np.zeros(len(scopes.query_ids))
        for m in ("NonLeaf@1", "NonLeaf@3", "Invalid@1", "Invalid@3")
    }
    values["answered"] = np.ones(len(scopes.query_ids), dtype=bool)
    values["query_ids"] = np.asarray(scopes.query_ids)
    runs = [Run("k", "t", "s", 0.0, True, values, {})]
    text = json.dumps(leaderboard(runs, scopes, settings, revealed=True))
    assert not any(q in text for q in scopes.query_ids)


def test_a_board_reusing_earlier_tests_equals_one_computed_afresh(release) -> None:
    from searchtome.service.board import TestMemo

    root, public, private = release
    full = with_private(load(public), private)
    settings = ServerSettings(
        split="test", permutations=300, bootstrap=100, secret="22" * 32, private_fraction=0.4
    )
    scopes = Scopes.of(load(public), settings)
    runs = []
    for i, right in enumerate((0.7, 0.6, 0.3, 0.5, 1.0)):
        folder = submission(root / f"m{i}", private, f"m{i}", right=right)
        meta, preds = (
            (folder / "meta.json").read_bytes(),
            (folder / "predictions.jsonl").read_bytes(),
        )
        report, error = validate(meta, "predictions.jsonl", preds, full, "test", Limits())
        assert error is None
        values = unpack_scores(pack_scores(report, full, "test"))
        runs.append(Run(f"m{i}", f"team{i % 2}", f"m{i}", float(i), i == 4, values, {}))
    memo = TestMemo()
    leaderboard(runs[:2], scopes, settings, revealed=True, memo=memo)
    before = len(memo.raw)
    # one more run below the top: one new test per scope it shows in, the rest reused
    grown = leaderboard(runs[:3], scopes, settings, revealed=True, memo=memo)
    assert len(memo.raw) == before + 1
    assert grown == leaderboard(runs[:3], scopes, settings, revealed=True)
    # a new top run: every run is tested against it again, still the same board
    for n in (4, 5):
        stored = TestMemo(json.loads(json.dumps(memo.kept())))  # as the database keeps it
        again = leaderboard(runs[:n], scopes, settings, revealed=True, memo=stored)
        assert again == leaderboard(runs[:n], scopes, settings, revealed=True)
        memo = stored
    assert again["public"]["rows"][0]["id"] == "m4"


def test_runs_held_compact_give_the_same_board_and_values_bit_for_bit(release) -> None:
    from types import SimpleNamespace

    from searchtome.service.board import compact, runs_from_rows

    root, public, private = release
    full = with_private(load(public), private)
    settings = ServerSettings(
        split="test", permutations=200, bootstrap=100, secret="33" * 32, private_fraction=0.4
    )
    scopes = Scopes.of(load(public), settings)
    rows, plain = [], []
    for i, right in enumerate((0.9, 0.5, 0.2)):
        folder = submission(root / f"c{i}", private, f"c{i}", right=right)
        meta = (folder / "meta.json").read_bytes()
        preds = (folder / "predictions.jsonl").read_bytes()
        report, error = validate(meta, "predictions.jsonl", preds, full, "test", Limits())
        assert error is None
        blob = pack_scores(report, full, "test")
        rows.append(
            SimpleNamespace(
                public_id=f"c{i}", team=f"t{i}", system=f"c{i}", created_at=float(i),
                final=i == 0, scores=blob, meta=json.dumps({"system": f"c{i}"}),
            )
        )  # fmt: skip
        plain.append(Run(f"c{i}", f"t{i}", f"c{i}", float(i), i == 0, unpack_scores(blob), {}))
    held = runs_from_rows(rows)
    assert held[0].values["query_ids"] is held[2].values["query_ids"]  # one array for all
    assert held[0].values["R@1"].dtype == np.uint8
    for run, ref in zip(held, plain, strict=True):
        for name, value in ref.values.items():
            back = np.asarray(run.values[name], dtype=value.dtype)
            assert back.tobytes() == value.tobytes(), (run.key, name)
    assert leaderboard(held, scopes, settings, revealed=True) == leaderboard(
        plain, scopes, settings, revealed=True
    )
    # values a uint8 would change stay as they are: -0.0, NaN, a fraction
    odd = {
        "m": np.asarray([0.0, -0.0, 1.0]),
        "n": np.asarray([1.0, np.nan]),
        "f": np.asarray([0.5]),
    }
    kept = compact(odd, {})
    assert all(kept[k] is odd[k] for k in odd)


def test_two_workers_take_turns_to_refresh_the_board(tmp_path) -> None:
    from searchtome.service import cache
    from searchtome.service.db import make_engine, migrate, sqlite_url

    engine = make_engine(sqlite_url(tmp_path / "turns.db"))
    migrate(engine)
    assert cache._take_turn(engine, "worker-a")
    assert cache._take_turn(engine, "worker-a")  # its own turn again
    assert not cache._take_turn(engine, "worker-b")  # a is refreshing
    with engine.begin() as conn:  # a's turn ran out (it died mid-refresh)
        old = f"worker-a {1.0}"
        conn.execute(cache.flags.update().values(value=old))
    assert cache._take_turn(engine, "worker-b")
    engine.dispose()


def test_busy_workers_share_one_refresh_cadence(release, tmp_path) -> None:
    """While jobs keep coming, a worker skips a refresh when any worker stored the board less
    than BUSY_REFRESH_SECONDS ago: two workers refresh no more often than one; an idle worker
    refreshes at once."""
    from searchtome.service import cache, store
    from searchtome.service.home import open_home
    from searchtome.service.worker import Worker
    from tests.service.helpers import init_home

    _root, public, private = release
    init_home(tmp_path / "srv", public, private)
    first, second = Worker(open_home(tmp_path / "srv")), Worker(open_home(tmp_path / "srv"))
    first.refresh_board(busy=False)
    store.set_flag(first.engine, store.REVEALED, "yes")  # the board's key moves

    def up_to_date() -> bool:
        with second.engine.connect() as conn:
            return cache.stored_key(conn) == cache.current_key(conn)

    assert not up_to_date()
    second.refresh_board(busy=True)  # its own clock says never; the stored board is fresh
    assert not up_to_date()
    second.refresh_board(busy=False)
    assert up_to_date()
    first.engine.dispose()
    second.engine.dispose()


def test_a_refresh_after_a_recorded_change_never_fails_the_change(release, tmp_path) -> None:
    import sqlite3

    from searchtome.service import cache
    from searchtome.service.db import make_engine, migrate, sqlite_url

    _root, public, _private = release
    settings = ServerSettings(split="test", permutations=100, bootstrap=50, secret="33" * 32)
    scopes = Scopes.of(load(public), settings)
    engine = make_engine(sqlite_url(tmp_path / "locked.db"), busy_timeout_ms=100)
    migrate(engine)
    holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert cache.refresh_after_change(engine, scopes, settings) is False  # logged, not raised
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert cache.refresh_after_change(engine, scopes, settings) is True
    with engine.connect() as conn:
        assert cache.stored(conn) is not None
    engine.dispose()


def test_a_kept_run_view_is_never_stale_after_a_reveal_a_release_or_a_rescore(release) -> None:
    from types import SimpleNamespace

    from searchtome.service.app import _shown_view
    from searchtome.service.board import runs_from_rows
    from searchtome.service.phases import Calendar
    from searchtome.service.standings import Context, Entry, run_view

    root, public, private = release
    full = with_private(load(public), private)
    settings = ServerSettings(
        split="test", secret="44" * 32, private_fraction=0.4, public_scores="ladder"
    )
    scopes = Scopes.of(load(public), settings)
    service = SimpleNamespace(views={}, scopes=scopes, settings=settings)
    blobs = []
    for i, right in enumerate((0.3, 0.9, 0.6)):
        folder = submission(root / f"v{i}", private, f"v{i}", right=right)
        meta = (folder / "meta.json").read_bytes()
        preds = (folder / "predictions.jsonl").read_bytes()
        report, error = validate(meta, "predictions.jsonl", preds, full, "test", Limits())
        assert error is None
        blobs.append(pack_scores(report, full, "test"))

    def row(key: str, blob: bytes, scored_at: float) -> SimpleNamespace:
        return SimpleNamespace(
            public_id=key, team="t", system=key, created_at=1.0, final=False,
            scores=blob, meta=json.dumps({"system": key}), scored_at=scored_at,
        )  # fmt: skip

    def check(run: SimpleNamespace, shown: SimpleNamespace, ctx: Context, revealed: bool) -> None:
        fresh = run_view(*runs_from_rows([run, shown]), ctx, scopes, settings, revealed)
        assert _shown_view(service, run, shown, ctx, revealed) == fresh
        assert _shown_view(service, run, shown, ctx, revealed) == fresh  # now from the memo

    def context(shows: str) -> Context:
        return Context(Calendar((), 10.0), None, {"a": Entry(shown="a"), "b": Entry(shown=shows)})

    a, b = row("a", blobs[0], 2.0), row("b", blobs[1], 3.0)
    check(b, a, context("a"), revealed=False)  # b shows a's public scores
    kept = len(service.views)
    check(b, a, context("a"), revealed=True)  # the reveal adds the private scores
    check(b, b, context("b"), revealed=True)  # released again: b shows its own
    check(b, row("a", blobs[2], 4.0), context("a"), revealed=True)  # a rescored
    check(row("b", blobs[2], 5.0), b, context("b"), revealed=True)  # b rescored
    assert len(service.views) == kept + 4


def _eager_scoreboard(runs, scopes, mask):
    """The board as it was built before :class:`Scoped`: every run's float64 copies at once."""
    from searchtome.leaderboard.results import MAIN_MEASURES
    from searchtome.leaderboard.scoring import QueryTable, Scoreboard, SystemScores
    from searchtome.service.checks import STORED_MEASURES

    n = int(mask.sum())
    ids = [q for q, keep in zip(scopes.query_ids, mask, strict=True) if keep]
    table = QueryTable(
        ids, np.asarray([""] * n), scopes.domains[mask], [""] * n,
        np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
    )  # fmt: skip
    systems = [
        SystemScores(
            r.key,
            {m: np.asarray(r.values[m], dtype=np.float64)[mask] for m in STORED_MEASURES},
            np.asarray(r.values["answered"], dtype=bool)[mask],
        )
        for r in runs
    ]
    return Scoreboard(ids, list(MAIN_MEASURES), systems, table)


@pytest.mark.parametrize("one_row_per_team", [False, True])
def test_scores_read_on_demand_give_the_board_of_eager_copies_bit_for_bit(
    release, monkeypatch, one_row_per_team
) -> None:
    from types import SimpleNamespace

    from searchtome.dataset.blind import load_private_queries
    from searchtome.service import board as board_module
    from searchtome.service.board import Scoped, runs_from_rows

    _root, public, private = release
    full = with_private(load(public), private)
    settings = ServerSettings(
        split="test", permutations=200, bootstrap=100, secret="55" * 32,
        private_fraction=0.4, one_row_per_team=one_row_per_team,
    )  # fmt: skip
    scopes = Scopes.of(load(public), settings)
    queries = load_private_queries(private)
    leaves = sorted({q.leaf_id for q in queries})
    rows = []
    for k in range(6):  # the gold at rank 1, 2, 3 or missing: fractions of nDCG@3 as well
        lines = []
        for i, q in enumerate(queries):
            others = [leaf for leaf in leaves if leaf != q.leaf_id][:3]
            at = (i * (k + 1) + k) % 4
            ranking = [*others[:at], q.leaf_id, *others[at:]] if at < 3 else others
            lines.append(json.dumps({"query_id": q.query_id, "leaf_ids": ranking}) + "\n")
        meta = json.dumps(meta_json(f"e{k}")).encode()
        preds = "".join(lines).encode()
        report, error = validate(meta, "predictions.jsonl", preds, full, "test", Limits())
        assert error is None
        rows.append(
            SimpleNamespace(
                public_id=f"e{k}", team=f"t{k % 3}", system=f"e{k}", created_at=float(k),
                final=k == 4, scores=pack_scores(report, full, "test"), meta=meta.decode(),
            )
        )  # fmt: skip
    runs = runs_from_rows(rows)
    assert any(r.values["nDCG@3"].dtype == np.float64 for r in runs)  # not all held as uint8
    lazy = leaderboard(runs, scopes, settings, revealed=True)
    on_demand = board_module._scoreboard(runs, scopes, ~scopes.private)
    assert all(isinstance(s.per_query, Scoped) for s in on_demand.systems)
    monkeypatch.setattr(board_module, "_scoreboard", _eager_scoreboard)
    eager = leaderboard(runs, scopes, settings, revealed=True)
    assert len(eager["public"]["rows"]) == (3 if one_row_per_team else 6)
    assert "private" in eager
    assert json.dumps(lazy) == json.dumps(eager)
    # each read is a new array with the copy's bits: nothing kept, nothing shared
    copy = _eager_scoreboard(runs, scopes, ~scopes.private).systems[0].per_query
    scoped = on_demand.systems[0].per_query
    assert scoped["nDCG@3"] is not scoped["nDCG@3"]
    assert dict(scoped).keys() == copy.keys()
    assert all(scoped[m].tobytes() == copy[m].tobytes() for m in copy)


_BOARD_IMPORTS = """
import sys
import numpy as np
from searchtome.dataset.loader import load
from searchtome.service.board import Run, Scopes, leaderboard
from searchtome.service.home import ServerSettings

settings = ServerSettings(split="test", permutations=100, bootstrap=50, secret="66" * 32)
scopes = Scopes.of(load(sys.argv[1]), settings)
n = len(scopes.query_ids)
runs = []
for k, share in enumerate((0.9, 0.4)):
    hits = (np.arange(n) < share * n).astype(float)
    values = {m: hits for m in ("R@1", "R@3", "nDCG@3")}
    values |= {m: np.zeros(n) for m in ("NonLeaf@1", "NonLeaf@3", "Invalid@1", "Invalid@3")}
    values |= {"answered": np.ones(n, dtype=bool), "query_ids": np.asarray(scopes.query_ids)}
    runs.append(Run(f"r{k}", f"t{k}", f"r{k}", 0.0, False, values, {}))
rows = leaderboard(runs, scopes, settings, revealed=False)["public"]["rows"]
assert rows[1]["delta_to_top"]["R@1"]["diff"] < 0
print(sorted({m.split(".")[0] for m in sys.modules} & {"scipy", "pandas"}))
"""


def test_a_board_refresh_imports_neither_scipy_nor_pandas(release) -> None:
    """Each would add 60 MiB to every server process that refreshes the board (the McNemar p,
    which the board does not show, imported scipy.stats; pyarrow's dataset layer pandas)."""
    import subprocess
    import sys

    _root, public, _private = release
    done = subprocess.run(
        [sys.executable, "-c", _BOARD_IMPORTS, str(public)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
