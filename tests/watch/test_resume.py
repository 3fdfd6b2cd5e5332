"""A take-over resumes instead of rebuilding: every write stores, with the rows, the
resourceVersion each watched kind's rows are at (`keys.resume`); a replica taking a cluster that
nobody holds watches those kinds from there (kubesim replays what was missed) and lists only what
it keeps in memory (RBAC, the Istio config and its context). What changed while nobody watched
is applied, and recorded in the history once. A resume point older than the leaf's history
(410) lists that kind, as a relist does."""

from __future__ import annotations

from collections.abc import Callable

import redis

from common.index import history, rows
from common.index.write import store_events
from kubesim.server import KubeSim
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import Running, full_sync_members, stored

FLUX = "toolkit.fluxcd.io"
KINDS = {  # row kinds, resumed
    "Kustomization": f"kustomizations.kustomize.{FLUX}",
    "HelmRelease": f"helmreleases.helm.{FLUX}",
}
RBAC = "rbac.authorization.k8s.io"
MEMORY = (f"rolebindings.{RBAC}", f"clusterrolebindings.{RBAC}", "services", "namespaces")


def built(run: Running, rb: redis.Redis, sim: KubeSim, c: str) -> bool:
    return run.healthy(c) and stored(rb, c) == full_sync_members(sim, c)


def requests(sim: KubeSim, c: str, verb: str) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for rec in sim.request_log(c):
        if rec.verb == verb and rec.status < 400:
            out.setdefault(rec.resource, []).append(rec.query)
    return out


def built_then_left(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running], c: str
) -> dict[str, str]:
    """Replica `a` builds cluster `c` and leaves (its leases free, nobody watching); the resume
    points it stored."""
    a = start_replica("a")
    wait_for(lambda: built(a, rb, sim, c), 60, "a built the cluster")
    points = store_events.resume_points(rb, c)
    a.stop()
    return points


def test_a_free_cluster_is_resumed_from_the_stored_points_not_relisted(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    c = sim.clusters[0]
    points = built_then_left(sim, rb, start_replica, c)
    assert set(KINDS) <= set(points), points  # written with the rows
    sim.set_ready(c, "Kustomization", "app-0003", "apps", False, reason="BuildFailed", message="z")
    kustomizations = sorted(
        (ns, name)
        for ns, kind, name in map(rows.split_identity, map(rows.identity, stored(rb, c)))
        if kind == "Kustomization" and name != "app-0003"
    )
    gone = kustomizations[0]
    sim.delete(c, "Kustomization", *gone)
    sim.clear_request_log(c)
    b = start_replica("b")
    app = rows.sort_key("app-0003", "Kustomization", "apps")
    wait_for(
        lambda: (
            b.healthy(c)
            and rows.status_of(row_of(rb, c, "app-0003", "Kustomization", "apps") or "h")
            == "unhealthy"
            and row_of(rb, c, gone[1], "Kustomization", gone[0]) is None
        ),
        60,
        "b applied what changed meanwhile",
    )
    lists, watches = requests(sim, c, "list"), requests(sim, c, "watch")
    assert stored(rb, c) == full_sync_members(sim, c)
    assert set(KINDS) <= b.replica.watches[c].resumed
    # The row kinds were watched from their stored points, never listed; what is kept in
    # memory was listed.
    assert not set(KINDS.values()) & set(lists), sorted(lists)
    assert set(MEMORY) <= set(lists), sorted(lists)
    for key, plural in KINDS.items():
        assert watches[plural][0].get("resourceVersion") == points[key]
    # The change made while nobody watched is in the history once.
    entries = [(e["source"], e["status"]) for e in history.read(rb, c, app)]
    assert entries == [("watch", "unhealthy")]


def test_a_resume_point_past_the_leafs_history_lists_that_kind(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    c = sim.clusters[1]
    built_then_left(sim, rb, start_replica, c)
    sim.set_ready(c, "Kustomization", "app-0002", "apps", False, reason="BuildFailed", message="q")
    sim.compact(c)  # the stored points are now older than what the leaf can replay: 410
    sim.clear_request_log(c)
    b = start_replica("b")
    wait_for(
        lambda: (
            b.healthy(c)
            and rows.status_of(row_of(rb, c, "app-0002", "Kustomization", "apps") or "h")
            == "unhealthy"
        ),
        60,
        "b listed the expired kinds",
    )
    assert KINDS["Kustomization"] in requests(sim, c, "list")  # after its watch's 410
    assert stored(rb, c) == full_sync_members(sim, c)
    app = rows.sort_key("app-0002", "Kustomization", "apps")
    assert [e["status"] for e in history.read(rb, c, app)] == ["unhealthy"]


def test_a_claimed_cluster_is_listed_while_its_holder_still_writes(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    """A hand-over between live replicas does not resume: the holder writes until it lets go."""
    a = start_replica("a")
    wait_for(lambda: all(built(a, rb, sim, c) for c in sim.clusters), 60, "a built all")
    b = start_replica("b")
    wait_for(lambda: len(b.replica.watches) == 1, 60, "b claimed its share")
    (c,) = b.replica.watches
    assert not b.replica.watches[c].resumed
    wait_for(lambda: built(b, rb, sim, c), 60, "b watches it")
