"""The submission format and its validator, installed as ``searchtome.submissions``.

The folders next to this file (``submissions/<system>/``) are the submitted runs themselves.
"""
