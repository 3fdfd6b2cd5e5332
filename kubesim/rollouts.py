"""Chart rollouts across a generated fleet: the chart version each HelmRelease runs.

The same release (namespace, name) runs the same chart version on every cluster, but for the
releases mid-rollout (`ROLLOUT_SHARE` of them): there most clusters already run the new version
and a share of them (5-30 %, drawn per release) still runs the old one, as a fleet upgrading a
chart cluster by cluster does. The draws are `seeds.unit` hashes of the seed, the release and the
cluster: no draw from a cluster's `random.Random`, so no other object changes.
"""

from __future__ import annotations

import zlib

from kubesim.seeds import unit

ROLLOUT_SHARE = 0.2
"""Releases (namespace, name) whose chart is being rolled out across the fleet."""
LAG_MIN, LAG_MAX = 0.05, 0.3
"""Share of a rollout's clusters still on the old version."""
CHARTS = {"web": ("1.4.2", "1.5.0"), "redis": ("18.6.1", "19.0.0")}
"""Per release name: (old, new) chart version; the settled releases run the old one."""
_SALT_ROLLOUT, _SALT_LAG, _SALT_CLUSTER = 101, 102, 103


def chart_version(seed: int, cluster: int, namespace: str, release: str) -> str:
    """The chart version release `namespace/release` runs on cluster `cluster`."""
    old, new = CHARTS.get(release, CHARTS["web"])
    h = zlib.crc32(f"{namespace}/{release}".encode())
    if unit(seed, h, _SALT_ROLLOUT) >= ROLLOUT_SHARE:
        return old
    lag = LAG_MIN + unit(seed, h, _SALT_LAG) * (LAG_MAX - LAG_MIN)
    return old if unit(seed, h, cluster, _SALT_CLUSTER) < lag else new
