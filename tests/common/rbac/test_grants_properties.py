"""Property tests: the compiled per-subject grants, read back through the encoding and the
AccessResolver, agree with direct Authorizer evaluation on random RBAC sets and random users."""

from __future__ import annotations

from typing import Any

import fakeredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.kinds.registry import builtin_registry
from common.rbac.authorizer import Authorizer, RbacObjects, UserInfo
from common.rbac.grants import AccessResolver, compile_grants, store_grants

REG = builtin_registry()
NAMESPACES = ["a", "b", "c"]
USERS = ["alice", "bob", "Alice", "system:serviceaccount:a:bot"]
GROUPS = ["team-a", "team-b", "system:authenticated", "system:masters", "system:serviceaccounts"]
ROLE_NAMES = ["r1", "r2", "r3"]

verbs = st.lists(st.sampled_from(["list", "list", "get", "*", "LIST"]), min_size=1, max_size=2)
groups = st.lists(
    st.sampled_from(
        ["kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io", "networking.istio.io", "", "*"]
    ),
    min_size=1,
    max_size=2,
)
resources = st.lists(
    st.sampled_from(
        [
            "kustomizations",
            "gitrepositories",
            "gateways",
            "*",
            "*/status",
            "kustomizations/status",
            "pods",
        ]
    ),
    min_size=1,
    max_size=3,
)
PAIRS = [
    ("kustomize.toolkit.fluxcd.io", "kustomizations"),
    ("source.toolkit.fluxcd.io", "gitrepositories"),
    ("networking.istio.io", "gateways"),
    ("networking.istio.io", "*"),
]
# Most rules grant a registered kind (so grants overlap and merge); the rest probe the edges.
granting_rule = st.builds(
    lambda pair, v: {"verbs": v, "apiGroups": [pair[0]], "resources": [pair[1]]},
    st.sampled_from(PAIRS),
    st.sampled_from([["list"], ["*"], ["get", "list"]]),
)
edge_rule = st.builds(
    lambda v, g, res, names: {"verbs": v, "apiGroups": g, "resources": res, **names},
    verbs,
    groups,
    resources,
    st.sampled_from([{}, {}, {"resourceNames": ["x"]}, {"resourceNames": []}]),
)
rules = st.lists(st.one_of(granting_rule, granting_rule, edge_rule), min_size=1, max_size=3)
labels = st.sampled_from([{}, {"agg": "yes"}, {"agg": "no"}])
subjects = st.lists(
    st.one_of(
        st.builds(lambda n: {"kind": "User", "name": n}, st.sampled_from(USERS)),
        st.builds(lambda n: {"kind": "Group", "name": n}, st.sampled_from(GROUPS)),
        st.builds(
            lambda n, ns: {"kind": "ServiceAccount", "name": n, **ns},
            st.sampled_from(["bot", "ci"]),
            st.sampled_from([{}, {"namespace": "a"}, {"namespace": "b"}]),
        ),
    ),
    min_size=1,
    max_size=3,
)
role_ref = st.builds(
    lambda kind, name: {"kind": kind, "name": name},
    st.sampled_from(["Role", "ClusterRole"]),
    st.sampled_from(ROLE_NAMES),
)


@st.composite
def rbac_objects(draw: Any) -> RbacObjects:
    roles = [
        {"metadata": {"namespace": ns, "name": name}, "rules": draw(rules)}
        for ns in NAMESPACES
        for name in ROLE_NAMES
        if draw(st.booleans())
    ]
    cluster_roles = []
    for name in [*ROLE_NAMES, "agg-src"]:
        if not draw(st.booleans()):
            continue
        cr: dict[str, Any] = {"metadata": {"name": name, "labels": draw(labels)}}
        if draw(st.integers(0, 3)) == 0:
            cr["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}
        else:
            cr["rules"] = draw(rules)
        cluster_roles.append(cr)
    role_bindings = [
        {
            "metadata": {"namespace": draw(st.sampled_from(NAMESPACES)), "name": f"rb{i}"},
            "roleRef": draw(role_ref),
            "subjects": draw(subjects),
        }
        for i in range(draw(st.integers(0, 10)))
    ]
    cluster_role_bindings = [
        {"metadata": {"name": f"crb{i}"}, "roleRef": draw(role_ref), "subjects": draw(subjects)}
        for i in range(draw(st.integers(0, 3)))
    ]
    return RbacObjects(roles, cluster_roles, role_bindings, cluster_role_bindings)


users = st.builds(
    lambda name, gs: UserInfo(name, tuple(gs)),
    st.sampled_from([*USERS, "system:anonymous", "nobody"]),
    st.lists(st.sampled_from(GROUPS), max_size=3, unique=True),
)


def expected_kinds(auth: Authorizer, user: UserInfo, namespace: str | None) -> set[str]:
    return {k.key for k in REG if auth.allowed(user, "list", k.group, k.plural, namespace)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objs=rbac_objects(), user_list=st.lists(users, min_size=1, max_size=4))
def test_compiled_grants_match_the_authorizer(objs: RbacObjects, user_list: list[UserInfo]) -> None:
    auth = Authorizer(objs)
    r = fakeredis.FakeRedis(decode_responses=True)
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    resolver = AccessResolver(r, REG)
    for user in user_list:
        effective = user.with_authenticated()  # as the query's identity layer hands it over
        access = resolver.resolve(effective, ["c1"])["c1"]
        assert set(access.cluster_wide) == expected_kinds(auth, effective, None)
        for ns in [*NAMESPACES, "elsewhere"]:
            assert set(access.kinds_in(ns)) == expected_kinds(auth, effective, ns), (user, ns)
        assert set(access.sorted_namespaces) <= set(NAMESPACES)
        assert access.sorted_namespaces == sorted(access.namespaces)
        for ns, kinds in access.namespaces.items():
            assert kinds and not kinds & access.cluster_wide, ns
        # explain() accounts for every kind the user may list, and for nothing else
        explained: dict[str, set[str]] = {}
        for entry in resolver.explain(effective, "c1"):
            explained.setdefault(entry["namespace"], set()).update(entry["kinds"])
        assert explained.get("*", set()) == set(access.cluster_wide)
        for ns in NAMESPACES:
            assert explained.get(ns, set()) | set(access.cluster_wide) == set(access.kinds_in(ns))


@settings(max_examples=60, deadline=None)
@given(objs=rbac_objects(), drop=st.integers(0, 20), user=users)
def test_a_removed_binding_never_adds_access(objs: RbacObjects, drop: int, user: UserInfo) -> None:
    r = fakeredis.FakeRedis(decode_responses=True)
    resolver = AccessResolver(r, REG)
    store_grants(r, "c1", compile_grants(objs, REG), 1.0)
    user = user.with_authenticated()
    before = resolver.resolve(user, ["c1"])["c1"]
    bindings = objs.role_bindings + objs.cluster_role_bindings
    if bindings:
        gone = bindings[drop % len(bindings)]
        objs = RbacObjects(
            objs.roles,
            objs.cluster_roles,
            [b for b in objs.role_bindings if b is not gone],
            [b for b in objs.cluster_role_bindings if b is not gone],
        )
    store_grants(r, "c1", compile_grants(objs, REG), 2.0)
    after = resolver.resolve(user, ["c1"])["c1"]
    expected = expected_kinds(Authorizer(objs), user, "a")
    assert set(after.kinds_in("a")) == expected
    assert after.kinds_in("a") <= before.kinds_in("a")
