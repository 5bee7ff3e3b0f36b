"""Chaos soak (issue #13): ``python -m tests.soak``; see ``__main__``."""
