"""The RBAC authorizer, rule by rule (table-driven), against kube-apiserver's RBAC semantics."""

from __future__ import annotations

from typing import Any

import pytest

from common.rbac.authorizer import (
    AUTHENTICATED,
    Authorizer,
    RbacObjects,
    UserInfo,
    selector_matches,
    service_account_user,
)
from tests.common.rbac.rbac_objects import crb, crole, rb, role, rule, subj

FLUX_K = "kustomize.toolkit.fluxcd.io"
ALICE = UserInfo("alice", ("team-a",))


LIST_KS = rule(["list"], [FLUX_K], ["kustomizations"])

# (case, ClusterRole rules, request (verb, group, resource, subresource, name), expected)
RULE_CASES = [
    ("exact", [LIST_KS], ("list", FLUX_K, "kustomizations", "", None), True),
    ("other verb", [LIST_KS], ("get", FLUX_K, "kustomizations", "", None), False),
    (
        "verb wildcard",
        [rule(["*"], [FLUX_K], ["kustomizations"])],
        ("watch", FLUX_K, "kustomizations", "", None),
        True,
    ),
    ("other group", [LIST_KS], ("list", "other.io", "kustomizations", "", None), False),
    (
        "group wildcard",
        [rule(["list"], ["*"], ["kustomizations"])],
        ("list", "x.io", "kustomizations", "", None),
        True,
    ),
    (
        "core group is empty string",
        [rule(["list"], [""], ["pods"])],
        ("list", "", "pods", "", None),
        True,
    ),
    (
        "core rule, other group",
        [rule(["list"], [""], ["pods"])],
        ("list", "apps", "pods", "", None),
        False,
    ),
    (
        "resource wildcard",
        [rule(["list"], [FLUX_K], ["*"])],
        ("list", FLUX_K, "kustomizations", "", None),
        True,
    ),
    (
        "all wildcards",
        [rule(["*"], ["*"], ["*"])],
        ("delete", "a.io", "things", "status", "x"),
        True,
    ),
    (
        "subresource rule not resource",
        [rule(["list"], [FLUX_K], ["kustomizations/status"])],
        ("list", FLUX_K, "kustomizations", "", None),
        False,
    ),
    (
        "subresource rule grants subresource",
        [rule(["get"], [FLUX_K], ["kustomizations/status"])],
        ("get", FLUX_K, "kustomizations", "status", None),
        True,
    ),
    (
        "*/status not resource",
        [rule(["list"], ["*"], ["*/status"])],
        ("list", FLUX_K, "kustomizations", "", None),
        False,
    ),
    (
        "*/status grants status",
        [rule(["get"], ["*"], ["*/status"])],
        ("get", FLUX_K, "kustomizations", "status", None),
        True,
    ),
    (
        "*/status not scale",
        [rule(["get"], ["*"], ["*/status"])],
        ("get", FLUX_K, "kustomizations", "scale", None),
        False,
    ),
    (
        "resource rule not subresource",
        [LIST_KS],
        ("list", FLUX_K, "kustomizations", "status", None),
        False,
    ),
    (
        "resourceNames do not grant list",
        [rule(["list"], [FLUX_K], ["kustomizations"], ["a"])],
        ("list", FLUX_K, "kustomizations", "", None),
        False,
    ),
    (
        "resourceNames grant get by name",
        [rule(["get"], [FLUX_K], ["kustomizations"], ["a"])],
        ("get", FLUX_K, "kustomizations", "", "a"),
        True,
    ),
    (
        "resourceNames other name",
        [rule(["get"], [FLUX_K], ["kustomizations"], ["a"])],
        ("get", FLUX_K, "kustomizations", "", "b"),
        False,
    ),
    (
        "empty resourceNames list = all",
        [rule(["list"], [FLUX_K], ["kustomizations"], [])],
        ("list", FLUX_K, "kustomizations", "", None),
        True,
    ),
    (
        "case-sensitive resource",
        [rule(["list"], [FLUX_K], ["Kustomizations"])],
        ("list", FLUX_K, "kustomizations", "", None),
        False,
    ),
    (
        "case-sensitive verb",
        [rule(["LIST"], [FLUX_K], ["kustomizations"])],
        ("list", FLUX_K, "kustomizations", "", None),
        False,
    ),
    (
        "nonResourceURLs grant nothing",
        [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        ("list", FLUX_K, "kustomizations", "", None),
        False,
    ),
    ("no rules", [], ("list", FLUX_K, "kustomizations", "", None), False),
    (
        "second rule matches",
        [rule(["get"], ["x"], ["y"]), LIST_KS],
        ("list", FLUX_K, "kustomizations", "", None),
        True,
    ),
    (
        "impersonate users",
        [rule(["impersonate"], [""], ["users", "groups"])],
        ("impersonate", "", "groups", "", "team-a"),
        True,
    ),
    (
        "impersonate serviceaccounts",
        [rule(["impersonate"], [""], ["serviceaccounts"])],
        ("impersonate", "", "users", "", "bob"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("rules", "request_", "expected"),
    [(c[1], c[2], c[3]) for c in RULE_CASES],
    ids=[c[0] for c in RULE_CASES],
)
def test_rules(rules: list[dict[str, Any]], request_: tuple[Any, ...], expected: bool) -> None:
    objs = RbacObjects(
        cluster_roles=[crole("r", *rules) if rules else {"metadata": {"name": "r"}, "rules": []}],
        role_bindings=[rb("team-a", "b", "ClusterRole", "r", subj("User", "alice"))],
    )
    verb, group, resource, sub, name = request_
    got = Authorizer(objs).allowed(ALICE, verb, group, resource, "team-a", name, sub)
    assert got is expected


BINDING_OBJECTS = RbacObjects(
    roles=[
        role("team-a", "ks-reader", LIST_KS),
        role("team-b", "ks-reader", rule(["get"], [FLUX_K], ["kustomizations"])),
    ],
    cluster_roles=[crole("ks-lister", LIST_KS)],
    role_bindings=[
        rb("team-a", "role", "Role", "ks-reader", subj("User", "alice")),
        rb("team-b", "role-elsewhere", "Role", "ks-reader", subj("User", "bob")),
        rb("team-c", "missing-role", "Role", "nope", subj("User", "alice")),
        rb("team-d", "cr", "ClusterRole", "ks-lister", subj("Group", "team-d")),
        rb("team-e", "sa", "ClusterRole", "ks-lister", subj("ServiceAccount", "deployer")),
        rb(
            "team-f", "sa-other-ns", "ClusterRole", "ks-lister", subj("ServiceAccount", "ci", "ops")
        ),
        rb("team-g", "missing-cr", "ClusterRole", "nope", subj("User", "alice")),
        rb("team-h", "authn", "ClusterRole", "ks-lister", subj("Group", AUTHENTICATED)),
        rb("team-i", "odd-kind", "Deployment", "ks-lister", subj("User", "alice")),
        rb("team-j", "Case", "ClusterRole", "ks-lister", subj("User", "Alice")),
    ],
    cluster_role_bindings=[
        crb("admins", "ks-lister", subj("Group", "platform")),
        crb("crb-missing", "nope", subj("User", "alice")),
        crb("crb-sa-no-ns", "ks-lister", subj("ServiceAccount", "deployer")),
        crb("crb-to-role", "ks-reader", subj("User", "alice")),
    ],
)
BINDING_OBJECTS.cluster_role_bindings[-1]["roleRef"]["kind"] = "Role"

BOB = UserInfo("bob")
ADMIN = UserInfo("carol", ("platform",))
DEPLOYER = service_account_user("team-e", "deployer")
CI = service_account_user("ops", "ci")

# (case, user, namespace or None for all namespaces, expected for list kustomizations)
BINDING_CASES = [
    ("RoleBinding to Role in its namespace", ALICE, "team-a", True),
    ("RoleBinding grants in its namespace only", ALICE, "team-x", False),
    ("RoleBinding does not grant all namespaces", ALICE, None, False),
    ("Role resolves in the binding's namespace", BOB, "team-b", False),
    ("binding to a missing Role", ALICE, "team-c", False),
    ("binding to a missing ClusterRole", ALICE, "team-g", False),
    ("RoleBinding to ClusterRole via group", UserInfo("dan", ("team-d",)), "team-d", True),
    (
        "ClusterRole via RoleBinding stays in namespace",
        UserInfo("dan", ("team-d",)),
        "team-a",
        False,
    ),
    ("group names are case-sensitive", UserInfo("dan", ("Team-D",)), "team-d", False),
    ("user names are case-sensitive", ALICE, "team-j", False),
    ("service account defaults to binding namespace", DEPLOYER, "team-e", True),
    (
        "service account by user name alone",
        UserInfo("system:serviceaccount:team-e:deployer"),
        "team-e",
        True,
    ),
    (
        "service account of another namespace",
        service_account_user("x", "deployer"),
        "team-e",
        False,
    ),
    ("service account with explicit namespace", CI, "team-f", True),
    ("ClusterRoleBinding: SA without namespace matches nobody", DEPLOYER, None, False),
    ("system:authenticated only when passed", UserInfo("eve"), "team-h", False),
    ("system:authenticated group", UserInfo("eve").with_authenticated(), "team-h", True),
    ("unknown roleRef kind", ALICE, "team-i", False),
    ("ClusterRoleBinding grants everywhere", ADMIN, "anything", True),
    ("ClusterRoleBinding grants all namespaces", ADMIN, None, True),
    ("ClusterRoleBinding to a Role grants nothing", ALICE, "team-b", False),
    ("system:masters may do everything", UserInfo("root", ("system:masters",)), None, True),
    ("stranger", UserInfo("mallory", (AUTHENTICATED,)), "team-a", False),
]


@pytest.mark.parametrize(
    ("user", "namespace", "expected"),
    [(c[1], c[2], c[3]) for c in BINDING_CASES],
    ids=[c[0] for c in BINDING_CASES],
)
def test_bindings(user: UserInfo, namespace: str | None, expected: bool) -> None:
    auth = Authorizer(BINDING_OBJECTS)
    assert auth.allowed(user, "list", FLUX_K, "kustomizations", namespace) is expected


def test_masters_may_do_anything() -> None:
    auth = Authorizer(RbacObjects())
    root = UserInfo("root", ("system:masters",))
    assert auth.allowed(root, "delete", "", "nodes", None, "n1")
    assert auth.allowed(root, "impersonate", "", "users", None, "alice")
    assert not auth.allowed(UserInfo("root"), "get", "", "nodes", None)


def test_service_account_identity_and_anonymous() -> None:
    sa = service_account_user("ns", "bot")
    assert sa.name == "system:serviceaccount:ns:bot"
    assert set(sa.groups) == {"system:serviceaccounts", "system:serviceaccounts:ns", AUTHENTICATED}
    assert UserInfo("system:anonymous").with_authenticated().groups == ()
    assert UserInfo("a", (AUTHENTICATED,)).with_authenticated().groups == (AUTHENTICATED,)


AGG_ROLES = [
    crole("view-flux", LIST_KS, labels={"rbac.example.com/aggregate-to-view": "true"}),
    crole("view-istio", rule(["list"], ["networking.istio.io"], ["*"]), labels={"tier": "istio"}),
    crole("unlabelled", rule(["*"], ["*"], ["*"])),
    crole("view", agg=[{"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}}]),
    crole(
        "view-expr",
        agg=[{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["istio"]}]}],
    ),
    crole("prefilled", rule(["get"], ["a"], ["b"]), agg=[{"matchLabels": {"tier": "istio"}}]),
    # nested: selects `view`, which is itself aggregated (and labelled)
    crole("outer", agg=[{"matchLabels": {"nest": "yes"}}]),
    crole("loop-a", labels={"loop": "1"}, agg=[{"matchLabels": {"loop": "1"}}]),
    crole("nothing", agg=[{"matchLabels": {"absent": "x"}}]),
]
AGG_ROLES[3]["metadata"]["labels"] = {"nest": "yes"}

# (case, ClusterRole bound to alice in team-a, group, resource, expected)
AGG_CASES = [
    ("aggregated by matchLabels", "view", FLUX_K, "kustomizations", True),
    ("aggregation excludes unselected", "view", "networking.istio.io", "gateways", False),
    ("aggregated by matchExpressions", "view-expr", "networking.istio.io", "gateways", True),
    ("filled-in rules win over selectors", "prefilled", "networking.istio.io", "gateways", False),
    ("nested aggregation", "outer", FLUX_K, "kustomizations", True),
    ("self-selecting role terminates", "loop-a", FLUX_K, "kustomizations", False),
    ("selector matching nothing", "nothing", FLUX_K, "kustomizations", False),
]


@pytest.mark.parametrize(
    ("ref", "group", "resource", "expected"),
    [c[1:] for c in AGG_CASES],
    ids=[c[0] for c in AGG_CASES],
)
def test_aggregated_cluster_roles(ref: str, group: str, resource: str, expected: bool) -> None:
    objs = RbacObjects(
        cluster_roles=AGG_ROLES,
        role_bindings=[rb("team-a", "b", "ClusterRole", ref, subj("User", "alice"))],
    )
    assert Authorizer(objs).allowed(ALICE, "list", group, resource, "team-a") is expected


SELECTOR_CASES = [
    ({}, {"a": "1"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, {"a": "1"}, False),
    ("not a selector", {"a": "1"}, False),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), SELECTOR_CASES)
def test_label_selectors(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_malformed_objects_grant_nothing() -> None:
    objs = RbacObjects(
        roles=[{"metadata": {"namespace": "a", "name": "r"}, "rules": "oops"}],
        cluster_roles=[{"metadata": {}}, {"metadata": {"name": "c"}, "rules": [None, 3]}],
        role_bindings=[{"metadata": {"namespace": "a", "name": "b"}, "subjects": [None]}],
        cluster_role_bindings=[{"roleRef": "x", "subjects": "y"}],
    )
    assert not Authorizer(objs).allowed(ALICE, "list", FLUX_K, "kustomizations", "a")
