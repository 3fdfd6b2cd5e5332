"""What the watch tests share: watcher replicas run in threads, the oracle (the rows a full sync
would store), the rows stored, whether the indexes agree with them, who holds each lease, and
leaf clients of the simulated fleet."""

from __future__ import annotations

import threading
from collections import Counter

import redis

from collector.clusters import ClusterSource
from collector.sync import collect
from collector.watch.replica import WatchReplica
from common.index import graph, keys, rows, syncstatus
from common.kinds.registry import builtin_registry
from common.leaf import registry
from common.leaf.client import LeafClient
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import topology

REG = builtin_registry()
KS = "kustomize.toolkit.fluxcd.io/v1"


def client_for(sim: KubeSim, cluster: str) -> LeafClient:
    return LeafClient(registry.load_dir(str(sim.kubeconfig_dir))[cluster], timeout_s=5)


class Running:
    """A replica running in a thread; `stop()` is a clean shutdown (leases released)."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.r = topology.client(settings.redis_url)
        self.source = ClusterSource(settings)
        self.replica = WatchReplica(settings, self.r, REG, self.source, name)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.replica.run, args=(self.stop_event,))
        self.thread.start()

    def healthy(self, cluster: str) -> bool:
        """The cluster is watched: every stream live (its rows built) and its grants stored."""
        w = self.replica.watches.get(cluster)
        return w is not None and w.healthy() and w.rbac_healthy()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(15)
        self.source.close()
        self.r.close()


def full_sync_members(sim: KubeSim, cluster: str) -> set[str]:
    """The oracle: the rows a full object sync would store for the cluster right now (with
    every row's blockedBy, as common.index.write.store.replace_rows computes it)."""
    config = registry.load_dir(str(sim.kubeconfig_dir))[cluster]
    client = LeafClient(config)
    try:
        return graph.with_blockers(collect(client, REG))
    finally:
        client.close()


def stored(r: redis.Redis, cluster: str) -> set[str]:
    """The stored rows as a full sync builds them (without what the writer records of their
    transitions, `recent`)."""
    return {rows.without_recent(m.decode()) for m in r.zrange(keys.rows(cluster), 0, -1)}


def consistent(r: redis.Redis, cluster: str) -> bool:
    """Indexes, counts and sync totals agree with the rows."""
    members = stored(r, cluster)
    want: Counter[str] = Counter()
    for m in members:
        want[rows.count_field(m)] += 1
    counts = Counter({k.decode(): int(v) for k, v in r.hgetall(keys.counts(cluster)).items()})
    for st in keys.INDEXED_STATUSES:
        # compared as stored() has them: without the writer's record of recent transitions
        index = {
            rows.without_recent(m.decode()) for m in r.zrange(keys.by_status(cluster, st), 0, -1)
        }
        if index != {m for m in members if rows.status_of(m) == st}:
            return False
    suspended = {rows.without_recent(m.decode()) for m in r.zrange(keys.suspended(cluster), 0, -1)}
    if suspended != {m for m in members if rows.suspended_of(m)}:
        return False
    deps = {
        k.decode(): v.decode()
        for key in graph.DEPENDENTS.keys(cluster)
        for k, v in r.hgetall(key).items()
    }
    if deps != graph.dependents(members):
        return False
    s = syncstatus.read_all(r, [cluster])[cluster]
    return counts == want and s.objects == len(members)


def owners(r: redis.Redis, clusters: list[str]) -> dict[str, str]:
    out = {}
    for c in clusters:
        v = r.get(keys.lease(c))
        out[c] = v.decode().split(":")[0] if v else ""
    return out
