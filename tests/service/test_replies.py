"""The service's replies, read over real HTTP through their types (searchtome.service.replies):
the client's view of every reply, and nothing the app sends left untyped."""

from __future__ import annotations

from typing import Any

import pytest

from searchtome.document import Record
from searchtome.errors import SearchTomeError
from searchtome.service.client import Server as Client
from searchtome.service.client import submit
from searchtome.service.replies import (
    Accepted,
    JobState,
    ServiceBoard,
    SubmissionState,
    read_reply,
)
from tests.service.helpers import (
    Server,
    add_team,
    blind_release,
    board_rows,
    init_home,
    submission,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("replies")
    public, private = blind_release(root)
    home = root / "srv"
    init_home(home, public, private)
    token = add_team(home, "alpha")
    with Server(home) as server:
        yield server, token, private, root


def _leftovers(record: Any) -> list[dict[str, Any]]:
    """The ``extra`` of a record and of every record inside it (all empty: fully typed)."""
    if isinstance(record, Record):
        parts = [getattr(record, f) for f in record.__dataclass_fields__]
        return [dict(record.extra)] + [x for p in parts for x in _leftovers(p)]
    if isinstance(record, dict | tuple | list):
        values = record.values() if isinstance(record, dict) else record
        return [x for v in values for x in _leftovers(v)]
    return []


def test_every_reply_reads_through_its_type(served) -> None:
    server, token, private, root = served
    folder = submission(root / "perfect", private, "perfect")
    accepted = submit(folder, server.url, token)
    assert isinstance(accepted, Accepted) and accepted.state is JobState.QUEUED
    state = submit(
        submission(root / "half", private, "half", right=0.5), server.url, token, wait=True
    )
    assert isinstance(state, SubmissionState) and state.state is JobState.SCORED
    assert state.scores is not None and 0.0 < state.scores["public"].aggregate["R@1"] < 1.0
    client = Client(server.url, token)
    first = client.state(accepted.id)
    own = client.runs()
    assert own.team == "alpha" and {r.id for r in own.runs} == {accepted.id, state.id}
    board_rows(server.url, lambda rows: len(rows) == 2)  # the stored board follows the scores
    board = client.board()
    assert isinstance(board, ServiceBoard) and board.public.rows
    assert {r.system for r in board.public.rows} <= {"perfect", "half"}
    for reply in (accepted, state, first, own, board):
        assert all(extra == {} for extra in _leftovers(reply)), reply


def test_a_refusal_and_a_malformed_reply_are_one_line(served) -> None:
    server, _token, _private, _root = served
    with pytest.raises(SearchTomeError) as err:
        Client(server.url, "not-a-token").state("x")
    assert "refused (401)" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SearchTomeError) as err:
        read_reply(SubmissionState, {"id": "s1", "state": "lost"}, "http://h/api/submissions/s1")
    assert str(err.value).startswith(
        "http://h/api/submissions/s1: reply: state: expected one of queued, scoring, scored, "
        'rejected, failed, got "lost"; '
    )
    with pytest.raises(SearchTomeError, match="reply: format: expected"):
        read_reply(ServiceBoard, {"split": "test"}, "http://h/api/leaderboard")
