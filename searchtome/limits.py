"""Two numbers the benchmark fixes, defined once: the ids a ranking may hold and the seed.

``MAX_IDS`` is the submission format's cap: a ranking names at most this many leaves (the
validator, the writer, the runner and every baseline's ``depth`` read it). ``DEFAULT_SEED`` is
the seed a build's split and a baseline's run use unless told otherwise, so two runs of the same
command give the same dataset and the same rankings.
"""

from __future__ import annotations

MAX_IDS = 100
DEFAULT_SEED = 42
