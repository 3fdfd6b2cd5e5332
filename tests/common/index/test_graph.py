"""Edges and blockedBy as stored: the nearest failing node upstream (dangling refs, cycles,
external Services), and the watcher's incremental path (graph.settle through the writer) always
leaving what a full sync of the same rows would store, in rows and in `dependents`."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest
import redis

from common.index import edges, graph, keys, rows
from common.index.write import store, store_events
from common.kinds.relations import Ref
from common.redis_client import text
from tests.support import rowfactory

C = "graph"


def member(
    ns: str,
    kind: str,
    name: str,
    status: str = "healthy",
    refs: tuple[Ref, ...] = (),
    services: set[tuple[str, str]] | None = None,
) -> str:
    return rowfactory.member(C, ns, kind, name, status, edges.encode(ns, refs, services))


def blocked(members: set[str]) -> dict[str, dict[str, object] | None]:
    out = {}
    for m in graph.with_blockers(members):
        b = edges.decode_blocker(C, rows.blocked_of(m))
        out[rows.split_identity(rows.identity(m))[2]] = (
            None if b is None else {"name": b["name"], "exists": b["exists"]}
        )
    return out


def src(name: str, ns: str = "apps") -> Ref:
    return Ref("source", "GitRepository", ns, name)


def dep(name: str, ns: str = "apps") -> Ref:
    return Ref("dependsOn", "Kustomization", ns, name)


def test_the_nearest_failing_node_upstream_is_the_cause() -> None:
    chain = {
        member("apps", "GitRepository", "repo", "unhealthy"),
        member("apps", "Kustomization", "infra", "progressing", (src("repo"),)),
        member("apps", "Kustomization", "app", "unhealthy", (src("repo"), dep("infra"))),
        member("apps", "Kustomization", "top", "healthy", (dep("app"), dep("infra"))),
    }
    got = blocked(chain)
    assert got["repo"] is None  # never its own cause
    assert got["infra"] == {"name": "repo", "exists": True}
    assert got["app"] == {"name": "repo", "exists": True}  # depth 1, in spec order
    assert got["top"] == {"name": "app", "exists": True}  # app (depth 1) before repo (depth 2)


def test_a_dangling_reference_blocks_with_exists_false() -> None:
    got = blocked(
        {
            member("apps", "Kustomization", "app", "unhealthy", (src("gone"),)),
            member("apps", "Kustomization", "late", "healthy", (dep("app"),)),
        }
    )
    assert got["app"] == {"name": "gone", "exists": False}
    assert got["late"] == {"name": "app", "exists": True}


def test_cross_namespace_refs_resolve_and_a_same_named_node_elsewhere_does_not_count() -> None:
    got = blocked(
        {
            member("flux-system", "GitRepository", "repo", "unhealthy"),
            member("apps", "GitRepository", "repo", "healthy"),
            member("apps", "Kustomization", "a", "healthy", (src("repo", "flux-system"),)),
            member("apps", "Kustomization", "b", "healthy", (src("repo"),)),
        }
    )
    assert got["a"] == {"name": "repo", "exists": True}
    assert got["b"] is None


def test_dependson_cycles_are_data() -> None:
    cycle = {
        member("apps", "Kustomization", "a", "unhealthy", (dep("b"),)),
        member("apps", "Kustomization", "b", "healthy", (dep("c"),)),
        member("apps", "Kustomization", "c", "healthy", (dep("a"),)),
    }
    got = blocked(cycle)
    assert got == {
        "a": None,  # its chain comes back to itself: not its own cause
        "b": {"name": "a", "exists": True},
        "c": {"name": "a", "exists": True},
    }
    stored_deps = graph.dependents(cycle)
    assert {graph.unfield(f): graph.split(graph.unfield(f), v) for f, v in stored_deps.items()} == {
        rows.sort_key("apps", "Kustomization", n): {rows.sort_key("apps", "Kustomization", s)}
        for n, s in (("a", "c"), ("b", "a"), ("c", "b"))
    }
    assert stored_deps[graph.field(rows.sort_key("apps", "Kustomization", "a"))] == "=\x1f~K\x1fc"


def test_external_services_block_only_when_known_missing() -> None:
    backends = (Ref("backend", "Service", "apps", "api"), Ref("backend", "Service", "apps", "web"))
    known = {("apps", "api")}
    route = member("apps", "HTTPRoute", "r", "healthy", backends, known)
    unknown = member("apps", "HTTPRoute", "u", "healthy", backends, None)
    assert [e.missing for e in graph.upstream(rows.identity(route), route)] == [False, True]
    got = blocked({route, unknown})
    assert got["r"] == {"name": "web", "exists": False}
    assert got["u"] is None  # Services not listed: not known missing
    assert graph.dependents({route}) == {}  # external nodes are not rows


def test_edges_round_trip_with_sections_and_same_namespace_elision() -> None:
    refs = [
        Ref("parent", "K8sGateway", "infra", "gw", "https"),
        Ref("source", "GitRepository", "apps", "repo"),
        Ref("gatewayClass", "GatewayClass", "", "istio"),
    ]
    field = edges.encode("apps", refs)
    assert "\x1f=\x1frepo" in field  # the object's own namespace is not repeated
    back = edges.decode("apps", field)
    assert [(e.relation, e.kind, e.namespace, e.name, e.section) for e in back] == [
        (r.relation, r.kind, r.namespace, r.name, r.section) for r in refs
    ]


def test_legacy_members_read_as_having_no_edges() -> None:
    legacy = "\x00".join(member("apps", "Kustomization", "a").split("\x00")[:11])
    assert rows.edges_of(legacy) == "" and rows.blocked_of(legacy) == ""
    assert "blockedBy" not in rows.decode(C, legacy)


# -- the writer: watch batches against the full-sync oracle ---------------------------------


def stored(r: redis.Redis) -> tuple[set[str], dict[str, str]]:
    # as a full sync builds them: without the writer's record of their transitions (`recent`)
    members = {rows.without_recent(text(m)) for m in r.zrange(keys.rows(C), 0, -1)}
    deps = {text(k): text(v) for key in graph.DEPENDENTS.keys(C) for k, v in r.hgetall(key).items()}
    return members, deps


def random_world(rng: random.Random, names: list[str]) -> dict[str, str]:
    """name -> member (without blockedBy) of a random graph over `names` (some absent)."""
    world = {}
    for name in names:
        if rng.random() < 0.15:
            continue  # absent: refs to it dangle
        refs = tuple(dep(t) for t in rng.sample(names, rng.randint(0, 3)) if t != name)
        status = rng.choice(["healthy", "healthy", "progressing", "unhealthy"])
        world[name] = member("apps", "Kustomization", name, status, refs)
    return world


@pytest.mark.parametrize("seed", range(6))
def test_watch_batches_leave_what_a_full_sync_would_store(r: redis.Redis, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"k{i:02d}" for i in range(24)]
    world = random_world(rng, names)
    store.replace_rows(r, C, world.values())
    for _ in range(12):
        nxt = random_world(rng, names)
        changed = rng.sample(names, rng.randint(1, 6))
        batch = []
        for name in changed:
            new = nxt.get(name)
            identity = rows.sort_key("apps", "Kustomization", name)
            batch.append(store_events.Change(identity, new))
            if new is None:
                world.pop(name, None)
            else:
                world[name] = new
        store_events.apply_changes(r, C, batch)
        members, deps = stored(r)
        want = graph.with_blockers(world.values())
        assert members == want
        assert deps == graph.dependents(want)


def test_a_status_change_among_healthy_rows_costs_no_graph_read(r: redis.Redis) -> None:
    repo = member("apps", "GitRepository", "repo", "unhealthy")
    app = member("apps", "Kustomization", "app", "healthy", (src("repo"),))
    store.replace_rows(r, C, [repo, app])
    progressing = member("apps", "Kustomization", "app", "progressing", (src("repo"),))
    stats = store_events.apply_changes(r, C, [store_events.Change.of(progressing)])
    assert stats.updated == 1 and stats.graph_reads == 0
    app_now = one(m for m in stored(r)[0] if "\x00app\x00" in m)
    assert rows.status_of(app_now) == "progressing"
    assert edges.decode_blocker(C, rows.blocked_of(app_now))["name"] == "repo"  # type: ignore[index]


def test_blocked_by_appears_and_clears_as_the_source_fails_and_recovers(r: redis.Redis) -> None:
    repo_ok = member("apps", "GitRepository", "repo", "healthy")
    apps = [
        member("apps", "Kustomization", "infra", "healthy", (src("repo"),)),
        member("apps", "Kustomization", "app", "healthy", (dep("infra"),)),
    ]
    store.replace_rows(r, C, [repo_ok, *apps])
    assert all(not rows.blocked_of(m) for m in stored(r)[0])
    failing = member("apps", "GitRepository", "repo", "unhealthy")
    stats = store_events.apply_changes(r, C, [store_events.Change.of(failing)])
    assert stats.graph_reads <= 4  # dependents down two levels, then the chains' members
    got = {rows.split_identity(rows.identity(m))[2]: rows.blocked_of(m) for m in stored(r)[0]}
    assert got["infra"] == got["app"] == edges.encode_blocker("GitRepository", "apps", "repo", True)
    store_events.apply_changes(r, C, [store_events.Change.of(repo_ok)])
    assert all(not rows.blocked_of(m) for m in stored(r)[0])
    store_events.apply_changes(r, C, [store_events.Change(rows.identity(repo_ok), None)])
    got = {rows.split_identity(rows.identity(m))[2]: rows.blocked_of(m) for m in stored(r)[0]}
    assert got["app"] == edges.encode_blocker("GitRepository", "apps", "repo", False)


def one(items: Iterable[str]) -> str:
    found = list(items)
    assert len(found) == 1, found
    return found[0]


def test_a_full_sync_repairs_edges_and_blockers_a_missed_event_left_wrong(r: redis.Redis) -> None:
    repo = member("apps", "GitRepository", "repo", "unhealthy")
    app = member("apps", "Kustomization", "app", "healthy", (src("repo"),))
    store.replace_rows(r, C, [repo, app])
    good = stored(r)
    # drift, as if an event was lost: the repository's dependents, the app's blockedBy
    node = graph.field(rows.identity(repo))
    assert r.hdel(graph.DEPENDENTS.key_of(C, node), node) == 1
    app_stored = one(m for m in good[0] if m != repo)
    r.zrem(keys.rows(C), app_stored)
    r.zadd(keys.rows(C), {rows.with_blocked(app_stored, ""): 0})
    assert stored(r) != good
    store.replace_rows(r, C, [repo, app])
    assert stored(r) == good


def test_a_kinds_file_kind_gets_edges_from_the_extractors_it_lists() -> None:
    from common.kinds.registry import parse_kind

    kind = parse_kind({**kind_entry(), "relations": ["flux-source", "managedBy"]})
    obj = {
        "metadata": {
            "namespace": "apps",
            "name": "d",
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "apps",
                "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
            },
        },
        "spec": {"sourceRef": {"kind": "GitRepository", "name": "repo"}},
    }
    m = rows.member(C, kind, "example.io/v1", obj)
    got = [(e.relation, e.kind, e.namespace, e.name) for e in graph.upstream(rows.identity(m), m)]
    assert got == [
        ("source", "GitRepository", "apps", "repo"),
        ("managedBy", "Kustomization", "flux-system", "apps"),
    ]
    none = parse_kind({**kind_entry(), "relations": []})
    assert rows.edges_of(rows.member(C, none, "example.io/v1", obj)) == ""


def kind_entry() -> dict[str, object]:
    return {
        "group": "example.io",
        "versions": ["v1"],
        "kind": "Deployer",
        "plural": "deployers",
        "status_rule": "conditions",
    }


def test_the_single_dependents_hash_of_an_older_version_goes_at_the_next_full_sync(
    r: redis.Redis,
) -> None:
    repo = member("apps", "GitRepository", "repo", "unhealthy")
    app = member("apps", "Kustomization", "app", "healthy", (src("repo"),))
    r.hset(keys.dependents_unbucketed(C), "stale", "x")
    store.replace_rows(r, C, [repo, app])
    assert not r.exists(keys.dependents_unbucketed(C))
    assert stored(r)[1] == graph.dependents(graph.with_blockers([repo, app])) != {}
    assert sum(r.exists(k) for k in graph.DEPENDENTS.keys(C)) == 1  # one node: one bucket
