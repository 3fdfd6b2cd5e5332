"""Deterministic draws from the fleet's seed that do not depend on generation order: which
team owns a namespace, which namespaces hold Gateway API objects, where a route's backend
lives. (Draws that may depend on order come from the cluster's `random.Random`.)
"""

from __future__ import annotations


def mix64(*parts: int) -> int:
    """A cheap deterministic hash of integers (splitmix64 steps)."""
    x = 0x9E3779B97F4A7C15
    for p in parts:
        x = (x ^ (p + 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 31)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 29)


def unit(*parts: int) -> float:
    """A draw in [0, 1) from `parts`."""
    return mix64(*parts) / 2.0**64
