"""Events flow into rows and grants: kubesim mutations (status change, create, delete) reach the
rows, status indexes, counts and sync status; a deleted RoleBinding stops granting; the stored
state always equals what a full sync would store; the sync status stays fresh."""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis

from collector import sync
from collector.sync import Work
from common.index import keys, rows, syncstatus
from common.rbac.authorizer import UserInfo
from common.rbac.grants import AccessResolver, grants_generation
from kubesim.server import KubeSim
from tests.support.held_lists import HeldAfterBindings
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import (
    REG,
    Running,
    client_for,
    consistent,
    full_sync_members,
    stored,
)


def test_watch_builds_the_index_then_follows_changes(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    run = start_replica("a")
    for c in sim.clusters:
        wait_for(lambda c=c: run.healthy(c), what=f"{c} watched")
        wait_for(lambda c=c: stored(rb, c) == full_sync_members(sim, c), what=f"{c} listed")
        wait_for(lambda c=c: syncstatus.read_all(rb, [c])[c].state == "ok", what="sync status ok")
    c = sim.clusters[0]
    ns = "app-0001"
    sim.set_ready(c, "Kustomization", ns, "apps", False, reason="BuildFailed", message="boom")
    wait_for(
        lambda: rows.status_of(row_of(rb, c, ns, "Kustomization", "apps") or "") == "unhealthy"
    )
    unhealthy = {m.decode() for m in rb.zrange(keys.by_status(c, "unhealthy"), 0, -1)}
    assert row_of(rb, c, ns, "Kustomization", "apps") in unhealthy

    vs = sim.list(c, "VirtualService")[0]
    vs_ns, vs_name = vs["metadata"]["namespace"], vs["metadata"]["name"]
    sim.delete(c, "VirtualService", vs_ns, vs_name)
    new = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw-new", "namespace": ns},
        "spec": {},
    }
    sim.apply(c, new)
    wait_for(lambda: row_of(rb, c, vs_ns, "VirtualService", vs_name) is None, what="row deleted")
    wait_for(lambda: row_of(rb, c, ns, "Gateway", "gw-new") is not None, what="row added")
    assert stored(rb, c) == full_sync_members(sim, c)
    assert consistent(rb, c)
    assert syncstatus.read_all(rb, [c])[c].state == "ok"
    assert run.replica.watches[c].stats["events"] >= 3


def test_heartbeat_keeps_the_cluster_fresh(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    run = start_replica("a")
    c = sim.clusters[1]
    wait_for(lambda: syncstatus.read_all(rb, [c])[c].last_success is not None, what="first success")
    first = syncstatus.read_all(rb, [c])[c]
    assert first.rbac_synced_at is not None and run.healthy(c)
    wait_for(
        lambda: (syncstatus.read_all(rb, [c])[c].last_success or 0) > (first.last_success or 0),
        what="last_success refreshed by the next tick",
    )
    s = syncstatus.read_all(rb, [c])[c]
    assert (s.rbac_synced_at or 0) > (first.rbac_synced_at or 0)


def test_deleted_rolebinding_stops_granting(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    run = start_replica("a")
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what="watched")
    binding = sim.list(c, "RoleBinding")
    team_view = next(b for b in binding if b["metadata"]["name"] == "team-view")
    ns = team_view["metadata"]["namespace"]
    group = next(s["name"] for s in team_view["subjects"] if s["kind"] == "Group")
    user = UserInfo("dev", (group,))
    resolver = AccessResolver(rb, REG)
    wait_for(lambda: ns in resolver.resolve(user, [c])[c].namespaces, what="granted")
    compiles = run.replica.watches[c].rbac.compiles
    sim.delete(c, "RoleBinding", ns, "team-view")
    wait_for(lambda: ns not in resolver.resolve(user, [c])[c].namespaces, what="revoked")
    assert run.replica.watches[c].rbac.compiles == compiles + 1  # one debounced recompile


def test_a_full_rbac_sync_listed_before_a_revocation_does_not_give_the_access_back(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    """The scheduled RBAC sync lists a watched cluster's RoleBindings, the leaf deletes one,
    the watcher stores the revoked grants, then the sync stores what it listed: without the
    grants generation (common.rbac.grants.store_grants) that older snapshot gave the access
    back until the next sync (seconds to a minute; the twentieth L soak's 60 s revocation)."""
    run = start_replica("a")
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what="watched")
    team_view = next(b for b in sim.list(c, "RoleBinding") if b["metadata"]["name"] == "team-view")
    ns = team_view["metadata"]["namespace"]
    group = next(s["name"] for s in team_view["subjects"] if s["kind"] == "Group")
    user = UserInfo("dev", (group,))
    resolver = AccessResolver(rb, REG)
    wait_for(lambda: ns in resolver.resolve(user, [c])[c].namespaces, what="granted")
    slow = HeldAfterBindings(client_for(sim, c))
    syncing = threading.Thread(target=sync.run, args=(rb, Work.RBAC, slow, REG), daemon=True)
    syncing.start()
    try:
        assert slow.listed.wait(30), "the sync did not list the RoleBindings"
        sim.delete(c, "RoleBinding", ns, "team-view")
        wait_for(lambda: ns not in resolver.resolve(user, [c])[c].namespaces, what="revoked")
        stores = grants_generation(rb, c)
    finally:
        slow.go.set()
        syncing.join(30)
    assert not syncing.is_alive()
    assert grants_generation(rb, c) == stores  # the sync stored nothing
    assert ns not in resolver.resolve(user, [c])[c].namespaces
    # A sync that listed after the revocation stores (and agrees).
    sync.run(rb, Work.RBAC, client_for(sim, c), REG)
    assert grants_generation(rb, c) == stores + 1
    assert ns not in resolver.resolve(user, [c])[c].namespaces


def test_blocked_by_follows_a_failing_source_through_watch_events(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    """A GitRepository fails: every Kustomization sourcing it gets `blockedBy` naming it, and
    loses it when the repository recovers; rows and `dependents` equal a full sync's meanwhile."""
    run = start_replica("a")
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what=f"{c} watched")
    wait_for(lambda: stored(rb, c) == full_sync_members(sim, c), what=f"{c} listed")
    ks = [
        k
        for k in sim.list(c, "Kustomization")
        if (k["spec"].get("sourceRef") or {}).get("kind") == "GitRepository"
    ]
    ref = ks[0]["spec"]["sourceRef"]
    repo_ns = ref.get("namespace") or ks[0]["metadata"]["namespace"]
    sourcing = [
        k["metadata"]
        for k in ks
        if k["spec"]["sourceRef"]["name"] == ref["name"]
        and (k["spec"]["sourceRef"].get("namespace") or k["metadata"]["namespace"]) == repo_ns
    ]
    cause = {"namespace": repo_ns, "kind": "GitRepository", "name": ref["name"], "exists": True}

    def blocked_by_repo() -> list[bool]:
        out = []
        for m in sourcing:
            member = row_of(rb, c, m["namespace"], "Kustomization", m["name"]) or ""
            b = rows.decode(c, member).get("blockedBy") if member else None
            out.append(b is not None and {k: b[k] for k in cause} == cause)  # type: ignore[literal-required]
        return out

    sim.set_ready(c, "GitRepository", repo_ns, ref["name"], True, "Succeeded", "stored artifact")
    wait_for(lambda: not any(blocked_by_repo()), what="no Kustomization blocked by the repository")
    sim.set_ready(c, "GitRepository", repo_ns, ref["name"], False, "GitOperationFailed", "boom")
    wait_for(lambda: all(blocked_by_repo()), what="every sourcing Kustomization blocked by it")
    assert stored(rb, c) == full_sync_members(sim, c)
    assert consistent(rb, c)
    sim.set_ready(c, "GitRepository", repo_ns, ref["name"], True, "Succeeded", "stored artifact")
    wait_for(lambda: not any(blocked_by_repo()), what="blockedBy cleared after recovery")
    wait_for(lambda: stored(rb, c) == full_sync_members(sim, c), what="rows equal a full sync's")
    assert consistent(rb, c)
