"""The package version, in a base module so that every layer can record it."""

__version__ = "0.1.0"
