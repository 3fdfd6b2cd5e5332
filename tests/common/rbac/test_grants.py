"""Compiled grants: rule-to-kind mapping, the compact encoding, store_grants on a real Redis,
and AccessResolver's caching, invalidation and explanations (counted in round trips)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from common.index import keys, syncstatus
from common.kinds.registry import builtin_registry
from common.rbac.access import NO_ACCESS, Access, merge
from common.rbac.authorizer import AUTHENTICATED, RbacObjects, UserInfo
from common.rbac.encoding import decode_grants
from common.rbac.grants import AccessResolver, compile_grants, store_grants
from tests.common.rbac.rbac_objects import crb, crole, rb, role, rule, subj
from tests.support import topology

TOPOLOGIES = ("standalone", "cluster")

REG = builtin_registry()
FLUX_K, SRC = "kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io"
ISTIO_NET = "networking.istio.io"
ALL = frozenset(REG.keys())
SOURCES = frozenset({"GitRepository", "HelmRepository", "OCIRepository", "Bucket", "HelmChart"})
NET = frozenset(
    {"VirtualService", "DestinationRule", "Gateway", "ServiceEntry", "Sidecar", "WorkloadEntry"}
)

# (case, ClusterRole rules, kinds listable in the binding's namespace)
KIND_CASES = [
    ("one resource", [rule(["list"], [FLUX_K], ["kustomizations"])], {"Kustomization"}),
    ("resource wildcard", [rule(["list"], [SRC], ["*"])], SOURCES),
    # Istio's and Gateway API's Gateways are both `gateways`: a group wildcard grants both.
    ("group wildcard", [rule(["list"], ["*"], ["gateways"])], {"Gateway", "K8sGateway"}),
    ("everything", [rule(["*"], ["*"], ["*"])], ALL),
    ("verb wildcard", [rule(["*"], [ISTIO_NET], ["*"])], NET),
    ("get is not list", [rule(["get", "watch"], ["*"], ["*"])], set()),
    ("subresource only", [rule(["list"], ["*"], ["*/status", "kustomizations/status"])], set()),
    ("resourceNames", [rule(["list"], ["*"], ["*"], ["x"])], set()),
    ("unregistered resource", [rule(["list"], [""], ["pods", "secrets"])], set()),
    ("wrong group", [rule(["list"], [SRC], ["kustomizations"])], set()),
]


@pytest.mark.parametrize(
    ("rules", "expected"), [c[1:] for c in KIND_CASES], ids=[c[0] for c in KIND_CASES]
)
def test_rules_map_to_kinds(rules: list[dict[str, Any]], expected: set[str]) -> None:
    objs = RbacObjects(
        cluster_roles=[crole("r", *rules)],
        role_bindings=[rb("ns1", "b", "ClusterRole", "r", subj("User", "alice"))],
    )
    compiled = compile_grants(objs, REG)
    grants = compiled.subjects.get("u:alice")
    got = set(grants.namespaces.get("ns1", set())) if grants else set()
    assert got == expected


def _objects() -> RbacObjects:
    return RbacObjects(
        roles=[role("team-a", "sources", rule(["list"], [SRC], ["gitrepositories"]))],
        cluster_roles=[
            crole("flux-view", rule(["list", "get"], [FLUX_K], ["kustomizations"])),
            crole("net-view", rule(["list"], [ISTIO_NET], ["*"])),
        ],
        role_bindings=[
            rb(f"team-{t}", "view", "ClusterRole", "flux-view", subj("Group", f"team-{t}"))
            for t in "abc"
        ]
        + [
            rb("team-a", "src", "Role", "sources", subj("User", "alice")),
            rb("team-b", "bot", "ClusterRole", "flux-view", subj("ServiceAccount", "bot")),
        ],
        cluster_role_bindings=[crb("net", "net-view", subj("Group", "netops"))],
    )


def test_compile_subjects_and_scopes() -> None:
    compiled = compile_grants(_objects(), REG)
    s = compiled.subjects
    assert s["g:team-a"].namespaces == {"team-a": {"Kustomization"}}
    assert s["u:alice"].namespaces == {"team-a": {"GitRepository"}}
    assert s["u:system:serviceaccount:team-b:bot"].namespaces == {"team-b": {"Kustomization"}}
    assert s["g:netops"].cluster_wide == NET and not s["g:netops"].namespaces
    assert s["g:system:masters"].cluster_wide == ALL
    assert set(s) == {
        "g:team-a",
        "g:team-b",
        "g:team-c",
        "u:alice",
        "u:system:serviceaccount:team-b:bot",
        "g:netops",
        "g:system:masters",
    }


def test_content_hash_ignores_listing_order_and_sees_changes() -> None:
    objs = _objects()
    shuffled = RbacObjects(
        objs.roles,
        list(reversed(objs.cluster_roles)),
        list(reversed(objs.role_bindings)),
        objs.cluster_role_bindings,
    )
    assert compile_grants(objs, REG).content_hash == compile_grants(shuffled, REG).content_hash
    fewer = RbacObjects(objs.roles, objs.cluster_roles, objs.role_bindings[1:])
    assert compile_grants(fewer, REG).content_hash != compile_grants(objs, REG).content_hash


def test_encoding_shares_kind_sets_across_namespaces() -> None:
    objs = RbacObjects(
        cluster_roles=[crole("v", rule(["list"], [FLUX_K], ["*"]))],
        role_bindings=[
            rb(f"ns{i:05}", "b", "ClusterRole", "v", subj("User", "wide")) for i in range(10_000)
        ],
    )
    value = compile_grants(objs, REG).fields["u:wide"]
    grants = json.loads(value.partition("\n")[0])
    assert grants["s"] == [["Kustomization"]]
    assert len(grants["n"]) == 1 and len(grants["n"][0][1]) == 10_000
    cluster_wide, namespaces = decode_grants(value)
    assert not cluster_wide and len(namespaces) == 10_000
    assert len({id(k) for k in namespaces.values()}) == 1


def test_decode_of_garbage_grants_nothing() -> None:
    for bad in ["", "not json", '{"s": [], "c": 3, "n": []}', '{"s": [["A"]], "c": -1}']:
        assert decode_grants(bad) == (frozenset(), {})


def test_access_merge_and_lookup() -> None:
    a = Access.build(frozenset(), {"x": frozenset({"A"}), "y": frozenset({"A"})})
    b = Access.build(frozenset({"B"}), {"y": frozenset({"B", "C"}), "z": frozenset({"B"})})
    m = merge([a, b, NO_ACCESS])
    assert m.cluster_wide == {"B"}
    assert dict(m.namespaces) == {"x": {"A"}, "y": {"A", "C"}}
    assert m.sorted_namespaces == ["x", "y"]
    assert m.kinds_in("z") == {"B"} and m.kinds_in("y") == {"A", "B", "C"}
    assert merge([NO_ACCESS]).is_empty and merge([a]) is a


def test_store_grants_writes_atomically_and_bumps_version_on_change(r: redis.Redis) -> None:
    compiled = compile_grants(_objects(), REG)
    assert store_grants(r, "c1", compiled, 1000.0)
    stored = r.hgetall(keys.rbac("c1"))
    assert stored.pop("#hash") == compiled.content_hash
    assert stored == compiled.fields
    sync = syncstatus.read_all(r, ["c1"])["c1"]
    assert (sync.rbac_hash, sync.rbac_synced_at, sync.rbac_error) == (
        compiled.content_hash,
        1000.0,
        "",
    )
    version = int(r.get(keys.VERSION))
    assert version > 0
    assert not store_grants(r, "c1", compiled, 2000.0)  # unchanged: no rewrite, no new version
    assert int(r.get(keys.VERSION)) == version
    assert syncstatus.read_all(r, ["c1"])["c1"].rbac_synced_at == 2000.0


def test_store_grants_removes_subjects_that_lost_all_grants(r: redis.Redis) -> None:
    objs = _objects()
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    version = int(r.get(keys.VERSION))
    without_alice = RbacObjects(objs.roles, objs.cluster_roles, objs.role_bindings[:3])
    store_grants(r, "c1", compile_grants(without_alice, REG), 2.0)
    assert not r.hexists(keys.rbac("c1"), "u:alice")
    assert int(r.get(keys.VERSION)) > version


ALICE = UserInfo("alice", ("team-a",))


def test_resolver_reads_grants_and_takes_groups_as_given(r: redis.Redis) -> None:
    objs = _objects()
    objs.role_bindings.append(
        rb("shared", "all", "ClusterRole", "net-view", subj("Group", AUTHENTICATED))
    )
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    resolver = AccessResolver(r, REG)
    # The identity layer (query.state.caller) adds system:authenticated; the resolver does not.
    assert "shared" not in resolver.resolve(ALICE, ["c1"])["c1"].namespaces
    got = resolver.resolve(ALICE.with_authenticated(), ["c1", "c2"])
    assert got["c2"].is_empty
    a = got["c1"]
    assert not a.cluster_wide
    assert dict(a.namespaces) == {"team-a": {"Kustomization", "GitRepository"}, "shared": NET}
    assert a.sorted_namespaces == ["shared", "team-a"]
    anon = resolver.resolve(UserInfo("system:anonymous"), ["c1"])["c1"]
    assert anon.is_empty
    root = resolver.resolve(UserInfo("root", ("system:masters",)), ["c1"])["c1"]
    assert root.cluster_wide == ALL


@pytest.mark.parametrize("cache_size", [1, 2, 50_000])
def test_a_subject_dropped_from_the_cache_mid_resolve_is_not_no_access(
    r: redis.Redis, cache_size: int
) -> None:
    """The resolver merges a user's own and group grants from what it just read, not from its
    memo: a memo too small to hold them all at once (a byte budget, other threads' entries)
    dropped one before the merge, and the cluster was answered as no access (the soak's team
    walks at fleet L lost half their rows)."""
    objs = _objects()
    objs.role_bindings.append(
        rb("shared", "all", "ClusterRole", "net-view", subj("Group", AUTHENTICATED))
    )
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    whole = AccessResolver(r, REG).resolve(ALICE.with_authenticated(), ["c1"])["c1"]
    resolver = AccessResolver(r, REG, cache_size=cache_size)
    for _ in range(2):  # first read, then what the memo kept
        got = resolver.resolve(ALICE.with_authenticated(), ["c1"])["c1"]
        assert (
            dict(got.namespaces)
            == dict(whole.namespaces)
            == {
                "team-a": {"Kustomization", "GitRepository"},
                "shared": NET,
            }
        )
        resolver.answers.clear()


def test_resolver_costs_one_round_trip_when_cached(r: redis.Redis) -> None:
    clusters = [f"c{i}" for i in range(20)]
    compiled = compile_grants(_objects(), REG)
    for c in clusters:
        store_grants(r, c, compiled, 1.0)
    resolver = AccessResolver(r, REG)
    first = resolver.resolve(ALICE, clusters)
    assert resolver.round_trips == 3  # version, hashes, subjects: not one per cluster
    again = resolver.resolve(ALICE, clusters)
    assert again == first
    assert resolver.round_trips == 4  # only the GET of fs:version
    again.clear()  # callers own the answer; the cache keeps its copy
    assert resolver.resolve(ALICE, clusters) == first


def test_cached_answer_is_tied_to_the_version_it_was_resolved_at(r: redis.Redis) -> None:
    """`cached` makes no Redis call and hands back the fs:version its answer is valid for; the
    caller compares that with a fresh read, so a grants change is never served from it."""
    store_grants(r, "c1", compile_grants(_objects(), REG), 1.0)
    resolver = AccessResolver(r, REG)
    assert resolver.cached(ALICE, ["c1"]) is None  # nothing resolved yet
    first = resolver.resolve(ALICE, ["c1"])
    trips = resolver.round_trips
    hit = resolver.cached(ALICE, ["c1"])
    assert hit is not None and hit[0] == first and hit[1] == keys.GrantsVersion(r.get(keys.VERSION))
    assert resolver.round_trips == trips
    assert resolver.cached(ALICE, ["c1", "c2"]) is None  # other clusters: not this answer
    objs = _objects()
    fewer = RbacObjects([], objs.cluster_roles, objs.role_bindings[1:3])
    store_grants(r, "c1", compile_grants(fewer, REG), 2.0)
    assert (
        keys.GrantsVersion(r.get(keys.VERSION)) != hit[1]
    )  # the check a caller makes fails: it resolves again
    assert resolver.resolve(ALICE, ["c1"])["c1"].is_empty
    again = resolver.cached(ALICE, ["c1"])
    assert (
        again is not None
        and again[0]["c1"].is_empty
        and again[1] == keys.GrantsVersion(r.get(keys.VERSION))
    )


def test_users_with_the_same_groups_share_work(r: redis.Redis) -> None:
    store_grants(r, "c1", compile_grants(_objects(), REG), 1.0)
    resolver = AccessResolver(r, REG)
    resolver.resolve(UserInfo("u1", ("team-b",)).with_authenticated(), ["c1"])
    assert resolver.subjects_loaded == 3  # u:u1, g:system:authenticated, g:team-b
    resolver.resolve(UserInfo("u2", ("team-b",)).with_authenticated(), ["c1"])
    assert resolver.subjects_loaded == 4  # only u:u2: the groups were parsed and merged once
    resolver.resolve(UserInfo("u1", ("team-b",)).with_authenticated(), ["c1"])
    assert resolver.subjects_loaded == 4


def test_deleted_binding_and_role_stop_granting_after_next_sync(r: redis.Redis) -> None:
    objs = _objects()
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    resolver = AccessResolver(r, REG)
    assert resolver.resolve(ALICE, ["c1"])["c1"].kinds_in("team-a") == {
        "Kustomization",
        "GitRepository",
    }
    no_binding = RbacObjects(
        objs.roles,
        objs.cluster_roles,
        [b for b in objs.role_bindings if b["metadata"]["name"] != "src"],
    )
    store_grants(r, "c1", compile_grants(no_binding, REG), 2.0)
    assert resolver.resolve(ALICE, ["c1"])["c1"].kinds_in("team-a") == {"Kustomization"}
    no_role = RbacObjects([], [objs.cluster_roles[1]], no_binding.role_bindings)
    store_grants(r, "c1", compile_grants(no_role, REG), 3.0)
    assert resolver.resolve(ALICE, ["c1"])["c1"].is_empty


def test_version_after_a_flush_does_not_revive_cached_grants(r: redis.Redis) -> None:
    objs = _objects()
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    resolver = AccessResolver(r, REG)
    assert resolver.resolve(ALICE, ["c1"])["c1"].kinds_in("team-a")
    old_version = r.get(keys.VERSION)
    topology.flushall(r)  # Redis is ephemeral: rebuilt from the clusters, with alice's binding gone
    fewer = RbacObjects([], objs.cluster_roles, objs.role_bindings[1:3])
    store_grants(r, "c1", compile_grants(fewer, REG), 2.0)
    assert r.get(keys.VERSION) != old_version
    assert resolver.resolve(ALICE, ["c1"])["c1"].is_empty


def test_cluster_removed_from_redis_fails_closed(r: redis.Redis) -> None:
    store_grants(r, "c1", compile_grants(_objects(), REG), 1.0)
    resolver = AccessResolver(r, REG)
    assert not resolver.resolve(ALICE, ["c1"])["c1"].is_empty
    r.delete(*keys.cluster_keys("c1"))
    r.incr(keys.VERSION)
    assert resolver.resolve(ALICE, ["c1"])["c1"].is_empty


def test_explain_shows_only_the_callers_bindings(r: redis.Redis) -> None:
    store_grants(r, "c1", compile_grants(_objects(), REG), 1.0)
    entries = AccessResolver(r, REG).explain(ALICE, "c1")
    assert entries == [
        {
            "namespace": "team-a",
            "kinds": ["GitRepository"],
            "binding": "RoleBinding team-a/src -> Role sources",
            "subject": "User alice",
        },
        {
            "namespace": "team-a",
            "kinds": ["Kustomization"],
            "binding": "RoleBinding team-a/view -> ClusterRole flux-view",
            "subject": "Group team-a",
        },
    ]
    netops = AccessResolver(r, REG).explain(UserInfo("n", ("netops",)), "c1")
    assert [e["namespace"] for e in netops] == ["*"]
    assert AccessResolver(r, REG).explain(UserInfo("nobody"), "c1") == []
