"""``searchtome.mteb``: the MTEB task (needs ``pip install 'searchtome[mteb]'``).

See :mod:`searchtome.integrations.mteb` and docs/integrations.md.
"""

from searchtome.integrations.mteb import (
    SearchTomeRetrieval,
    predictions_to_run,
    split_data,
    task_metadata,
)

__all__ = ["SearchTomeRetrieval", "predictions_to_run", "split_data", "task_metadata"]
