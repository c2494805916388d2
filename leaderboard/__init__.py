"""Scoring, significance testing and the rendered leaderboard, installed as ``searchtome.leaderboard``."""
