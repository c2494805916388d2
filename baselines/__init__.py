"""Baseline retrievers for SearchTome, installed as ``searchtome.baselines``.

Each writes a submission (see ``searchtome.submissions``); ``searchtome run NAME`` runs one.
"""
