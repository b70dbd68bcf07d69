"""Experiment configs: loading, checks, the typed experiment and the sweep it expands to."""
