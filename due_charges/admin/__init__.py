"""Back office of due-date charges and their batches."""
