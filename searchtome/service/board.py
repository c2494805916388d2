"""The service's leaderboard, from the stored per-query values of every scored run.

Nothing is re-implemented: each scope (the public part of the test queries; after ``server
reveal`` also the private part) is a :class:`~searchtome.leaderboard.scoring.Scoreboard`
restricted to its queries, so the aggregates are the leaderboard's macro means over domains, and
every run is tested against the top one with :func:`~searchtome.leaderboard.significance.compare`
(paired randomization test, Holm-corrected, bootstrap CI of the difference), as the static page
does. Only aggregates leave this module: no per-query value, no query id.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from searchtome.dataset.loader import Dataset
from searchtome.errors import SearchTomeError
from searchtome.leaderboard.comparison import OVERALL
from searchtome.leaderboard.ranking import rank_key
from searchtome.leaderboard.results import MAIN_MEASURES
from searchtome.leaderboard.scoring import QueryTable, Scoreboard, SystemScores
from searchtome.leaderboard.significance import CompareOptions, compare, holm
from searchtome.service.checks import STORED_MEASURES, unpack_scores
from searchtome.service.home import ServerSettings, private_queries
from searchtome.service.shown import visible
from searchtome.submissions.meta import RunMeta, parse_run_meta


@dataclass(frozen=True)
class Run:
    key: str
    team: str
    system: str
    created_at: float
    final: bool
    values: dict[str, np.ndarray]
    meta: dict[str, Any]
    baseline: bool = False  # the organisers' baseline: shown, marked, outside the ranks


@dataclass(frozen=True)
class Scopes:
    """The sorted test query ids, their domains and the mask of the private ones."""

    query_ids: list[str]
    domains: np.ndarray
    private: np.ndarray  # bool

    @classmethod
    def of(cls, public: Dataset, settings: ServerSettings) -> Scopes:
        queries = sorted(public.queries(settings.split), key=lambda q: q.query_id)
        ids = [q.query_id for q in queries]
        secret = private_queries(ids, settings.secret, settings.private_fraction)
        return cls(
            ids,
            np.asarray([public.domain(q.book_id) for q in queries]),
            np.asarray([q in secret for q in ids], dtype=bool),
        )


def runs_from_rows(rows: Sequence[Any], anonymous: bool = False) -> list[Run]:
    """Runs of stored rows; ``anonymous``: participants shown as ``team <id>`` (baselines keep
    their names: they are the organisers')."""
    out = []
    shared: dict[bytes, np.ndarray] = {}
    for r in rows:
        values = compact(unpack_scores(r.scores), shared)
        shown = shown_meta(parse_run_meta(json.loads(r.meta)))
        system = visible(r.system)
        baseline = bool(getattr(r, "baseline", False))
        team = anonymous_name(r.team_id) if anonymous and not baseline else r.team
        created, final = r.created_at, bool(r.final)
        out.append(Run(r.public_id, team, system, created, final, values, shown, baseline))
    return out


def anonymous_name(team_id: int) -> str:
    """A team's name on an anonymous board: its number, stable for the competition's life."""
    return f"team {team_id}"


def compact(
    values: dict[str, np.ndarray], shared: dict[bytes, np.ndarray]
) -> dict[str, np.ndarray]:
    """A run's stored values held small, read back bit for bit: a board holds every run's at
    once (a thousand runs took 260 MiB as unpacked). The query ids, the same for every run, are
    one read-only array in ``shared``; a measure whose values are all 0 or 1 is held as uint8."""
    out: dict[str, np.ndarray] = {}
    for name, a in values.items():
        if name == "query_ids":
            a.flags.writeable = False
            out[name] = shared.setdefault(a.tobytes(), a)
        elif a.dtype == np.float64 and _zero_one(a):
            out[name] = a.astype(np.uint8)
        else:
            out[name] = a
    return out


def _zero_one(a: np.ndarray) -> bool:
    """Every value is +0.0 or 1.0 (not -0.0, whose bits differ), so uint8 loses nothing."""
    return bool(np.all((a == 0.0) | (a == 1.0)) and not np.signbit(a).any())


def shown_meta(meta: RunMeta) -> dict[str, Any]:
    """What the board shows of a run's ``meta.json``: the fields of these it gave."""
    shown = {
        "description": meta.description,
        "models": meta.models,
        "url": meta.url,
        "trained_on": meta.trained_on,
    }
    return {k: _visible(v) for k, v in shown.items() if v is not None}


def _visible(value: Any) -> Any:
    if isinstance(value, str):
        return visible(value)
    return [_visible(v) for v in value] if isinstance(value, (list, tuple)) else value


def _scoreboard(runs: Sequence[Run], scopes: Scopes, mask: np.ndarray) -> Scoreboard:
    checked: set[int] = set()  # runs unpacked together share one array of ids (compact)
    for r in runs:
        ids = r.values["query_ids"]
        if id(ids) in checked:
            continue
        checked.add(id(ids))
        if ids.tolist() != scopes.query_ids:
            # Scores stored by a worker that read another release: never rank misaligned values.
            raise SearchTomeError(
                f"run {r.key}: its stored scores are for other test queries than this server's "
                "public half; rescore it or restore the matching release"
            )
    n = int(mask.sum())
    ids = [q for q, keep in zip(scopes.query_ids, mask, strict=True) if keep]
    table = QueryTable(
        ids,
        np.asarray([""] * n),
        scopes.domains[mask],
        [""] * n,
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
    )
    systems = [
        SystemScores(
            r.key,
            Scoped(r.values, mask),
            np.asarray(r.values["answered"], dtype=bool)[mask],
        )
        for r in runs
    ]
    return Scoreboard(ids, list(MAIN_MEASURES), systems, table)


class Scoped(Mapping[str, np.ndarray]):
    """A run's stored measures on one scope's queries, as float64, made on each read.

    A board holds every run at once: float64 copies of all of them took 120 MiB with 1,200
    runs, beside the 34 MiB of the compact values they are read from. Each read makes a new
    array (nothing is kept), the same bits the copies held."""

    def __init__(self, values: Mapping[str, np.ndarray], mask: np.ndarray) -> None:
        self._values = values
        self._mask = mask

    def __getitem__(self, measure: str) -> np.ndarray:
        if measure not in STORED_MEASURES:
            raise KeyError(measure)
        return np.asarray(self._values[measure], dtype=np.float64)[self._mask]

    def __iter__(self) -> Iterator[str]:
        return iter(STORED_MEASURES)

    def __len__(self) -> int:
        return len(STORED_MEASURES)


def _ranked(board: Scoreboard, runs: Sequence[Run]) -> list[Run]:
    def key(r: Run) -> tuple[Any, ...]:
        return (*rank_key(board.aggregate(r.key)), r.created_at, r.key)

    return sorted(runs, key=key)


@dataclass
class TestMemo:
    """Each run's raw test against the top (diff, CI, unadjusted p per measure), reused.

    A run's test depends only on its values, the top's, the scope and the test settings (the
    sign vectors and resamples are drawn from the seed alone, shared by every pair), so a board
    with one new run needs one new test, not one per run; only the Holm correction, which is
    cheap, is redone over all of them. Keys carry digests of both runs' values, so a rescored
    run is tested again.
    """

    raw: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def kept(self) -> dict[str, dict[str, list[float]]]:
        """The entries the last board used: what is worth storing."""
        return {k: v for k, v in self.raw.items() if k in self.used}


def _digest(run: Run) -> str:
    h = hashlib.sha256()
    for m in MAIN_MEASURES:
        h.update(np.ascontiguousarray(run.values[m], dtype=np.float64).tobytes())
    return h.hexdigest()[:20]


def _tests(
    board: Scoreboard, ranked: list[Run], settings: ServerSettings, memo: TestMemo, scope: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """Every run's test against the top run, Holm-corrected per measure as ``compare`` does."""
    top, rest = ranked[0], ranked[1:]
    if not rest:
        return {}
    prefix = f"{scope}:{settings.permutations}:{settings.bootstrap}:{_digest(top)}:"
    keys = {r.key: prefix + _digest(r) for r in rest}
    missing = [r for r in rest if keys[r.key] not in memo.raw]
    if missing:
        systems = {s.system: s.per_query for s in board.systems}
        report = compare(
            # the runs tested only: every run's arrays at once is the memory Scoped saves
            {r.key: {m: systems[r.key][m] for m in MAIN_MEASURES} for r in [top, *missing]},
            measures=list(MAIN_MEASURES),
            groups=board.groups(),
            control=top.key,
            options=CompareOptions(
                permutations=settings.permutations, bootstrap=settings.bootstrap, mcnemar=False
            ),
        )
        for t in report.tests:
            if t.scope == OVERALL:
                memo.raw.setdefault(keys[t.b], {})[t.measure] = [t.diff, t.ci_low, t.ci_high, t.p]
    memo.used.update(keys.values())
    alpha = CompareOptions().alpha
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for m in MAIN_MEASURES:
        adjusted = holm([memo.raw[keys[r.key]][m][3] for r in rest])
        for r, p_adjusted in zip(rest, adjusted, strict=True):
            diff, low, high, _p = memo.raw[keys[r.key]][m]
            # the test's a is the top run: turn top - run into run - top
            out[r.key, m] = {
                "diff": -diff,
                "ci_low": -high,
                "ci_high": -low,
                "p_adjusted": float(p_adjusted),
                "significant": bool(p_adjusted < alpha),
            }
    return out


def _rows(
    board: Scoreboard,
    ranked: list[Run],
    settings: ServerSettings,
    memo: TestMemo,
    scope: str,
) -> list[dict[str, Any]]:
    tests = _tests(board, ranked, settings, memo, scope)
    rows = []
    rank = 0
    for r in ranked:
        delta = {m: tests[r.key, m] for m in MAIN_MEASURES if (r.key, m) in tests}
        rank += 0 if r.baseline else 1  # baselines are shown in place but take no rank
        rows.append(
            {
                "rank": None if r.baseline else rank,
                "baseline": r.baseline,
                "id": r.key,
                "team": r.team,
                "system": r.system,
                "submitted": time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.created_at)),
                "final": r.final,
                "aggregate": board.aggregate(r.key),
                "per_domain": board.per_domain(r.key),
                "delta_to_top": delta,
                "meta": r.meta,
            }
        )
    return rows


def scope_board(
    runs: Sequence[Run],
    scopes: Scopes,
    mask: np.ndarray,
    settings: ServerSettings,
    memo: TestMemo | None = None,
    scope: str = "public",
) -> dict[str, Any]:
    """One scope's table: ranked rows with aggregates and the tests against the top."""
    out: dict[str, Any] = {"n_queries": int(mask.sum()), "rows": []}
    if not runs or not mask.any():
        return out
    board = _scoreboard(runs, scopes, mask)
    ranked = _ranked(board, runs)
    out["rows"] = _rows(board, ranked, settings, memo or TestMemo(), scope)
    out["domains"] = sorted(set(scopes.domains[mask].tolist()))
    return out


def final_runs(runs: Sequence[Run], scopes: Scopes) -> list[Run]:
    """Each team's marked final runs; a team that marked none competes with its best public run."""
    by_team: dict[str, list[Run]] = {}
    for r in runs:
        by_team.setdefault(r.team, []).append(r)
    chosen: list[Run] = []
    public = ~scopes.private
    for team_runs in by_team.values():
        marked = [r for r in team_runs if r.final]
        if marked:
            chosen += marked
        elif public.any():
            board = _scoreboard(team_runs, scopes, public)
            chosen.append(_ranked(board, team_runs)[0])
        else:
            chosen.append(team_runs[-1])
    return chosen


def best_per_team(runs: Sequence[Run], scopes: Scopes) -> list[Run]:
    """Each team's best run on the public part (``server init --one-row-per-team``)."""
    by_team: dict[str, list[Run]] = {}
    for r in runs:
        by_team.setdefault(r.team, []).append(r)
    public = ~scopes.private
    return [_ranked(_scoreboard(rs, scopes, public), rs)[0] for rs in by_team.values()]


def leaderboard(
    runs: Sequence[Run],
    scopes: Scopes,
    settings: ServerSettings,
    revealed: bool,
    memo: TestMemo | None = None,
) -> dict[str, Any]:
    """The ``/api/leaderboard`` object: the public scope, and the private one once revealed.

    ``memo`` holds the tests of an earlier board; those still valid are reused, and it is left
    holding this board's tests (see :class:`TestMemo`)."""
    memo = memo if memo is not None else TestMemo()
    out: dict[str, Any] = {
        "format": "searchtome-service-leaderboard-v1",
        "split": settings.split,
        "measures": list(STORED_MEASURES),
        "aggregate": "macro mean over domains (each domain weighs the same)",
        "test": f"paired randomization test against the top run, {settings.permutations} "
        f"permutations, Holm-corrected; 95% paired-bootstrap CI ({settings.bootstrap} resamples)",
        "private_fraction": settings.private_fraction,
        "revealed": revealed,
        "one_row_per_team": settings.one_row_per_team,
        "public": scope_board(
            best_per_team(runs, scopes) if settings.one_row_per_team else runs,
            scopes,
            ~scopes.private,
            settings,
            memo,
            "public",
        ),
    }
    if revealed and scopes.private.any():
        finals = final_runs(runs, scopes)
        out["private"] = scope_board(finals, scopes, scopes.private, settings, memo, "private")
    return out


def run_scores(run: Run, scopes: Scopes, revealed: bool) -> dict[str, Any]:
    """One run's aggregates alone (``/api/submissions/{id}``): public part; private if revealed."""
    out = {}
    for scope, mask in (("public", ~scopes.private), ("private", scopes.private)):
        if not mask.any() or (scope == "private" and not revealed):
            continue
        board = _scoreboard([run], scopes, mask)
        out[scope] = {"n_queries": int(mask.sum()), "aggregate": board.aggregate(run.key)}
    return out
