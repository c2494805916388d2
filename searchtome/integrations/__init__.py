"""Bridges to the tools researchers evaluate with: MTEB and ir_datasets.

Each module imports its outside package at the top, so it is importable only when that package
is installed (``pip install 'searchtome[mteb]'`` / ``'searchtome[ir_datasets]'``); the public
names are re-exported as ``searchtome.mteb`` and ``searchtome.ir_datasets``.
"""
