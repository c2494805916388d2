"""``searchtome.ir_datasets``: ``register(path_or_hub_id)`` (needs ``pip install 'searchtome[ir_datasets]'``).

See :mod:`searchtome.integrations.ir_datasets` and docs/integrations.md.
"""

from searchtome.integrations.ir_datasets import SearchTomeDoc, dataset_name, register

__all__ = ["SearchTomeDoc", "dataset_name", "register"]
