"""Batches of due-date charges (one request, up to 1,000 charges)."""
