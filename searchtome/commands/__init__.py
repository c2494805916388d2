"""The command layer: argparse parsers and the functions behind each ``searchtome`` subcommand.

The only layer that may import argparse; every module here has ``register(subparsers)``."""
