"""End to end against kubesim over HTTPS (kubeconfigs with CA data and bearer tokens, loaded by
the kubernetes client): rows match the fleet exactly, requests per sync grow with kinds x pages
and never with namespaces, readers see whole snapshots only, leaf deletions remove rows, a
failing cluster keeps its last good data while others sync, an unchanged re-sync writes no
rows, impersonated detail reads, and the collector's token never reaches Redis or the logs."""

from __future__ import annotations

import argparse
import logging
import math
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from collector import cli
from collector.clusters import ClusterSource
from collector.jobs import Collector, collect_once
from common.errors import Forbidden, NotFound
from common.index import keys, rows, syncstatus
from common.kinds import istio_checks, status
from common.kinds.registry import builtin_registry
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims, topology

ISTIO = {"networking.istio.io", "security.istio.io", "telemetry.istio.io"}
REG = builtin_registry()


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(generate_fleet(clusters=3, namespaces=12, seed=7), tmp_path)


def collector_for(sim: KubeSim, redis_url: str, r: redis.Redis, page_size: int = 500) -> Collector:
    assert sim.kubeconfig_dir is not None
    settings = Settings(
        redis_url=redis_url, clusters_dir=str(sim.kubeconfig_dir), leaf_page_size=page_size
    )
    c = Collector(settings, r, REG, ClusterSource(settings))
    c.reconcile()
    return c


def expected_counts(sim: KubeSim, cluster: str) -> Counter[str]:
    """The oracle: kubesim's own objects, through the status rule table, the Istio ones with the
    cluster's validation findings (checked Istio kinds only)."""
    istio = {k.kind: sim.list(cluster, k.resource) for k in REG if k.group in ISTIO}
    checked = {kind: objs for kind, objs in istio.items() if kind in istio_checks.CHECKED_KINDS}
    # A VirtualService may name a Gateway API Gateway (istioctl analyze accepts it).
    checked["K8sGateway"] = sim.list(cluster, REG.get("K8sGateway").resource)
    findings = istio_checks.validate(
        checked,
        sim.list(cluster, "services"),
        [n["metadata"]["name"] for n in sim.list(cluster, "namespaces")],
    )
    want: Counter[str] = Counter()
    for kind in REG:
        for obj in sim.list(cluster, kind.resource):
            meta = obj["metadata"]
            found = None
            if kind.group in ISTIO and kind.kind in istio_checks.CHECKED_KINDS:
                found = findings[(meta.get("namespace", ""), kind.kind, meta["name"])]
            health = status.evaluate(kind.status_rule, obj, found).status
            suspended = status.is_suspended(kind.status_rule, obj)
            want[keys.counts_field(kind.key, health, suspended)] += 1
    return want


def stored_counts(r: redis.Redis, cluster: str) -> Counter[str]:
    return Counter({k: int(v) for k, v in r.hgetall(keys.counts(cluster)).items()})


def test_rows_match_the_fleet_exactly(
    sim: KubeSim, r: redis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    outcomes = collect_once(collector_for(sim, redis_url, r))
    assert [o.ok for o in outcomes] == [True, True, True]
    for cluster in sim.clusters:
        want = expected_counts(sim, cluster)
        assert stored_counts(r, cluster) == want
        assert r.zcard(keys.rows(cluster)) == sum(want.values())
        for st in keys.INDEXED_STATUSES:
            n = sum(v for k, v in want.items() if k.endswith("\x00" + st))
            assert r.zcard(keys.by_status(cluster, st)) == n
        s = syncstatus.read_all(r, [cluster])[cluster]
        assert (s.state, s.objects) == ("ok", sum(want.values()))
        assert s.rbac_synced_at is not None and s.rbac_hash
        assert r.hexists(keys.rbac(cluster), "g:fleet-admins")
    assert sum(1 for k in stored_counts(r, "cluster-000") if not k.endswith("healthy")) > 0

    token = sim.collector_token
    for key in r.scan_iter("*"):
        assert all(token not in v for v in stored_values(r, key)), key
    assert all(token not in rec.getMessage() for rec in caplog.records)


def stored_values(r: redis.Redis, key: str) -> list[str]:
    """Every value a key holds, whatever its type (the change feed is a stream)."""
    kind = r.type(key)
    if kind == "zset":
        return list(r.zrange(key, 0, -1))
    if kind == "hash":
        return list(r.hgetall(key).values())
    if kind == "stream":
        return [v for _id, fields in r.xrange(key) for v in fields.values()]
    if kind == "list":
        return list(r.lrange(key, 0, -1))
    if kind == "set":
        return list(r.smembers(key))
    return [r.get(key) or ""]


def test_requests_grow_with_kinds_and_pages_not_namespaces(
    tmp_path: Path, r: redis.Redis, redis_url: str
) -> None:
    with sims.start(generate_fleet(clusters=1, namespaces=500, seed=3), tmp_path) as sim:
        c = collector_for(sim, redis_url, r, page_size=200)
        sim.clear_request_log()
        result = c.sync_objects("cluster-000")
        log = sim.request_log("cluster-000")
        lists = [rec for rec in log if rec.verb == "list"]
        served = {rec.resource for rec in lists}
        pages = sum(
            max(1, math.ceil(len(sim.list("cluster-000", k.resource)) / 200))
            for k in REG
            if k.resource in served
        )
        # The Istio checks read the Services and Namespaces too (not rows): one list each.
        context = sum(
            max(1, math.ceil(len(sim.list("cluster-000", res)) / 200))
            for res in ("services", "namespaces")
        )
        assert {"services", "namespaces"} <= served
        assert len(lists) == pages + context
        discovery = len(log) - len(lists)
        assert discovery <= 1 + len({k.group for k in REG}) * 2
        assert result.requests == len(log)
        assert result.objects > 1500  # ~3 objects in each of 500 namespaces
        assert not any("/namespaces/" in rec.path for rec in log)  # never per namespace


def mutate(sim: KubeSim) -> None:
    """Some status changes, deletions and a new object on cluster-000."""
    objs = sim.list("cluster-000", "Kustomization")
    for obj in objs[:4]:
        m = obj["metadata"]
        sim.set_ready("cluster-000", "Kustomization", m["namespace"], m["name"], False, "", "x")
    for obj in objs[4:7]:
        m = obj["metadata"]
        sim.delete("cluster-000", "Kustomization", m["namespace"], m["name"])
    new = dict(objs[8])
    new["metadata"] = {"name": "brand-new", "namespace": objs[8]["metadata"]["namespace"]}
    sim.apply("cluster-000", new)


def test_reader_polling_during_a_sync_sees_a_whole_snapshot(
    sim: KubeSim, r: redis.Redis, redis_url: str
) -> None:
    c = collector_for(sim, redis_url, r, page_size=50)
    c.sync_objects("cluster-000")
    old = set(r.zrange(keys.rows("cluster-000"), 0, -1))
    mutate(sim)
    seen: list[frozenset[str]] = []
    mixed: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        reader = topology.client(redis_url, decode_responses=True)
        while not stop.is_set():
            with reader.pipeline(transaction=True) as p:
                members, counts = (
                    p.zrange(keys.rows("cluster-000"), 0, -1)
                    .hgetall(keys.counts("cluster-000"))
                    .execute()
                )
            derived = Counter(rows.count_field(m) for m in members)
            if derived != Counter({k: int(v) for k, v in counts.items()}):
                mixed.append("counts disagree with rows")
            seen.append(frozenset(members))
        reader.close()

    t = threading.Thread(target=poll)
    t.start()
    try:
        result = c.sync_objects("cluster-000")
    finally:
        stop.set()
        t.join()
    new = set(r.zrange(keys.rows("cluster-000"), 0, -1))
    plain_old, plain_new = _without_blocked(old), _without_blocked(new)
    # 4 changed + 1 new; 4 changed + 3 deleted; the other rows written only changed blockedBy
    assert (len(plain_new - plain_old), len(plain_old - plain_new)) == (5, 7)
    assert result.added - 5 == result.removed - 7 == len(new - old) - 5 > 0
    assert len(seen) > 1 and not mixed
    assert all(s in (old, new) for s in seen)


def _without_blocked(members: set[str]) -> set[str]:
    return {rows.with_blocked(m, "") for m in members}


def test_leaf_deletions_remove_rows(sim: KubeSim, r: redis.Redis, redis_url: str) -> None:
    c = collector_for(sim, redis_url, r)
    c.sync_objects("cluster-001")
    victim = sim.list("cluster-001", "Kustomization")[3]["metadata"]
    sim.delete("cluster-001", "Kustomization", victim["namespace"], victim["name"])
    c.sync_objects("cluster-001")
    prefix = rows.sort_key(victim["namespace"], "Kustomization", victim["name"])
    assert not r.zrangebylex(keys.rows("cluster-001"), f"[{prefix}", f"({prefix}\xff")
    assert stored_counts(r, "cluster-001") == expected_counts(sim, "cluster-001")


def test_failing_cluster_keeps_last_good_data_while_others_sync(
    sim: KubeSim, r: redis.Redis, redis_url: str
) -> None:
    c = collector_for(sim, redis_url, r)
    collect_once(c)
    before = set(r.zrange(keys.rows("cluster-001"), 0, -1))
    sim.set_fault("cluster-001", down=True)
    mutate(sim)
    args = argparse.Namespace(once=True, cluster=None, parallel=3)
    assert cli.run(args, c.settings) == 1
    syncs = syncstatus.read_all(r, sim.clusters)
    failed = syncs["cluster-001"]
    assert failed.state == "error" and "connection failed" in failed.last_error
    assert failed.stale(c.settings.stale_after_s)
    assert set(r.zrange(keys.rows("cluster-001"), 0, -1)) == before
    assert syncs["cluster-000"].state == "ok" and not syncs["cluster-000"].stale(1e9)
    assert stored_counts(r, "cluster-000") == expected_counts(sim, "cluster-000")


def test_unchanged_resync_writes_no_rows(sim: KubeSim, r: redis.Redis, redis_url: str) -> None:
    c = collector_for(sim, redis_url, r)
    collect_once(c)
    topology.reset_stats(r)
    results = [c.sync_objects(name) for name in sim.clusters]
    assert all(res.ok and res.added == res.removed == 0 for res in results)
    stats = topology.commandstats(r)
    assert not {"zadd", "zrem", "hdel", "incrby"} & set(stats)
    assert stats["hset"] == 2 * len(sim.clusters)  # sync status only


def test_detail_read_with_impersonation(sim: KubeSim, r: redis.Redis, redis_url: str) -> None:
    c = collector_for(sim, redis_url, r)
    client = c.source.client("cluster-000")
    obj = sim.list("cluster-000", "Kustomization")[-1]["metadata"]
    kind = REG.get("Kustomization")
    assert kind is not None
    got = client.get_object(
        kind, kind.api_version(), obj["namespace"], obj["name"], "admin-0", ["fleet-admins"]
    )
    assert got["metadata"]["name"] == obj["name"]
    with pytest.raises(Forbidden):
        client.get_object(kind, kind.api_version(), obj["namespace"], obj["name"], "nobody", [])
    with pytest.raises(NotFound):
        client.get_object(
            kind, kind.api_version(), obj["namespace"], "no-such", "admin-0", ["fleet-admins"]
        )
    log = sim.request_log("cluster-000")
    assert log[-1].impersonate_user == "admin-0"
    assert log[-1].impersonate_groups == ("fleet-admins",)


def test_showcase_health_cases_read_as_upstream_defines_them(
    tmp_path: Path, r: redis.Redis, redis_url: str
) -> None:
    """A cluster with the showcase run (>= 50 namespaces): the VirtualService bound to the
    Gateway API Gateway `istio-system/public` is not KIA1102, the Kuadrant policy whose
    conditions describe an older generation reads progressing, and Kuadrant's "waiting for the
    following components to sync" reads progressing, all through the real collector."""
    sim = sims.start(generate_fleet(clusters=1, namespaces=50, seed=7), tmp_path)
    try:
        c = collector_for(sim, redis_url, r)
        assert [o.ok for o in collect_once(c)] == [True]
        cluster = sim.clusters[0]
        assert stored_counts(r, cluster) == expected_counts(sim, cluster)
        stored = {
            (row["namespace"], row["kind"], row["name"]): row
            for row in (rows.decode(cluster, m) for m in r.zrange(keys.rows(cluster), 0, -1))
        }
        bound = [
            vs
            for vs in sim.list(cluster, REG.get("VirtualService").resource)
            if "istio-system/public" in vs["spec"].get("gateways", [])
        ]
        assert bound
        for vs in bound:
            meta = vs["metadata"]
            row = stored[(meta["namespace"], "VirtualService", meta["name"])]
            assert row["reason"] != "KIA1102" and "KIA1102" not in row["message"], row
        stale = syncing = 0
        for kind in ("AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy"):
            for pol in sim.list(cluster, REG.get(kind).resource):
                meta, conds = pol["metadata"], (pol.get("status") or {}).get("conditions", [])
                row = stored[(meta["namespace"], kind, meta["name"])]
                if any(c.get("observedGeneration", meta["generation"]) < meta["generation"]
                       for c in conds):  # fmt: skip
                    stale += 1
                    assert row["status"] == "progressing", row
                if any("waiting for the following components to sync" in c["message"]
                       for c in conds):  # fmt: skip
                    syncing += 1
                    assert row["status"] == "progressing", row
        assert stale and syncing
    finally:
        sim.stop()
