"""Reproducible benchmarks (`./dev bench NAME`): each prints one JSON line and appends its
results table to docs/benchmarks.md. Never part of the test suite."""
