"""The scoring service for blind test sets: ``searchtome server ...`` and ``searchtome submit``.

``home`` (the server folder and its settings), ``db`` (tables, versioned schema, engines),
``store`` (teams, quota, the queue's state machine), ``checks`` (validation and per-query scores
with the project's validator and scorer), ``worker`` (the scoring process), ``board`` (the
leaderboard from stored scores, with the leaderboard package's significance tests), ``app`` (the
Starlette application), ``guard`` (slow bodies, body caps, per-team upload slots), ``health``
(``/api/health`` and worker heartbeats), ``supervise`` (``server run`` restarts dead workers),
``refusal`` and ``shown`` (one-line errors, escaped text), ``client`` (``submit``). See
docs/server.md.
"""
