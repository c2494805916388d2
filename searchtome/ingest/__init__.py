"""Ingestion: the book catalog, verified downloads, PDF opening, the ToC tree and section text."""
