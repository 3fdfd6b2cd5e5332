"""Rollouts across a generated fleet: the chart version each HelmRelease runs, and the commit
each Flux object's revision names.

The same release (namespace, name) runs the same chart version on every cluster, but for the
releases mid-rollout (`ROLLOUT_SHARE` of them): there most clusters already run the new version
and a share of them (5-30 %, drawn per release) still runs the old one, as a fleet upgrading a
chart cluster by cluster does. Likewise a source serves every cluster the same commit, but for
the few just updated (`SOURCE_UPDATE_SHARE`), which some clusters have not fetched yet; a
Kustomization applies its source's. The draws are `seeds.mix64` hashes of the seed, the object
and the cluster: no draw from a cluster's `random.Random`, so no other object changes.
"""

from __future__ import annotations

import zlib

from kubesim.gen.seeds import mix64, unit

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


SOURCE_UPDATE_SHARE = 0.1
"""Flux objects (by namespace, kind, name) whose source just moved to a new commit: the
clusters still on the previous one are `SOURCE_LAG` of them (they have not polled it yet)."""
SOURCE_LAG = 0.15
_SALT_COMMIT, _SALT_UPDATE, _SALT_BEHIND = 104, 105, 106


def commit(seed: int, cluster: int, namespace: str, kind: str, name: str) -> str:
    """The 40-hex commit (artifact digest) a Flux object's revision names on cluster `cluster`:
    the same repository serves every cluster the same commit, but for the few mid-update,
    where some clusters still hold the previous one."""
    h = zlib.crc32(f"{namespace}/{kind}/{name}".encode())
    current = 1
    if unit(seed, h, _SALT_UPDATE) < SOURCE_UPDATE_SHARE:
        current = 0 if unit(seed, h, cluster, _SALT_BEHIND) < SOURCE_LAG else 1
    bits = "".join(f"{mix64(seed, h, current, _SALT_COMMIT, i):016x}" for i in range(3))
    return bits[:40]
