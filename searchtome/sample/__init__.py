"""The project's own sample books and their PDF renderer (used by the demo and the tests)."""
