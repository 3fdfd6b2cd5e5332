"""Kubernetes RBAC, replicated: who may do what, from one cluster's Roles and bindings.

`Authorizer.allowed` follows kube-apiserver's RBAC authorizer (plugin/pkg/auth/authorizer/rbac):
verb/apiGroup/resource wildcards, `*/status`-style subresource rules, resourceNames, RoleBindings
granting in their own namespace, ClusterRoleBindings everywhere, missing roles granting nothing,
aggregated ClusterRoles resolved from `clusterRoleSelectors` when their rules are empty, and
`system:masters` allowed everything. The caller supplies the groups: the query service's
identity layer (query.state.caller) adds `system:authenticated`; `service_account_user` builds
a service account's identity with its groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ANONYMOUS = "system:anonymous"
SA_PREFIX = "system:serviceaccount:"

Obj = Mapping[str, Any]  # a raw API object: JSON dicts (anything else counts as malformed)


@dataclass(frozen=True)
class UserInfo:
    """An identity as the leaf API server would see it (groups exactly as given)."""

    name: str
    groups: tuple[str, ...] = ()

    def with_authenticated(self) -> UserInfo:
        """The same user with `system:authenticated` added (unless anonymous or present)."""
        if self.name == ANONYMOUS or AUTHENTICATED in self.groups:
            return self
        return UserInfo(self.name, (*self.groups, AUTHENTICATED))


def service_account_user(namespace: str, name: str) -> UserInfo:
    """A service account's identity: its user name and the groups its token carries."""
    return UserInfo(
        f"{SA_PREFIX}{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


@dataclass(frozen=True)
class RbacObjects:
    """One cluster's RBAC objects, as raw dicts listed from the API."""

    roles: list[Obj] = field(default_factory=list)
    cluster_roles: list[Obj] = field(default_factory=list)
    role_bindings: list[Obj] = field(default_factory=list)
    cluster_role_bindings: list[Obj] = field(default_factory=list)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strs(value: Any) -> tuple[str, ...]:
    items = _list(value)
    if all(type(v) is str for v in items):
        return tuple(items)
    return tuple(v for v in items if isinstance(v, str))


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class Rule:
    """One PolicyRule (nonResourceURLs-only rules have no resources and grant nothing here)."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]

    @classmethod
    def parse(cls, raw: Any) -> Rule:
        raw = raw if isinstance(raw, dict) else {}
        return cls(
            _strs(raw.get("verbs")),
            _strs(raw.get("apiGroups")),
            _strs(raw.get("resources")),
            _strs(raw.get("resourceNames")),
        )

    def allows(self, verb: str, group: str, resource: str, sub: str, name: str) -> bool:
        """rbac.RuleAllows: every part must match, resourceNames only if present."""
        if not ("*" in self.verbs or verb in self.verbs):
            return False
        if not ("*" in self.api_groups or group in self.api_groups):
            return False
        if not self.matches_resource(resource, sub):
            return False
        return not self.resource_names or name in self.resource_names

    def matches_resource(self, resource: str, sub: str) -> bool:
        combined = f"{resource}/{sub}" if sub else resource
        for rr in self.resources:
            if rr == "*" or rr == combined:
                return True
            if sub and rr == f"*/{sub}":
                return True
        return False


def parse_rules(obj: Obj) -> tuple[Rule, ...]:
    return tuple(Rule.parse(r) for r in _list(obj.get("rules")))


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions; `{}` matches everything."""
    if not isinstance(selector, dict):
        return False
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    return all(_expression_matches(e, labels) for e in _list(selector.get("matchExpressions")))


def _expression_matches(expr: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expr, dict):
        return False
    key, op, values = str(expr.get("key")), expr.get("operator"), _strs(expr.get("values"))
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # an unknown operator is invalid: the selector matches nothing


def resolve_cluster_roles(cluster_roles: Iterable[Obj]) -> dict[str, tuple[Rule, ...]]:
    """Rules per ClusterRole name; empty aggregated roles take their selected roles' rules."""
    by_name: dict[str, Obj] = {}
    for cr in cluster_roles:
        name = _meta(cr).get("name")
        if isinstance(name, str):
            by_name[name] = cr
    resolved: dict[str, tuple[Rule, ...]] = {}
    for name in by_name:
        resolved[name] = _aggregate(name, by_name, resolved, frozenset())
    return resolved


def _aggregate(
    name: str, by_name: Mapping[str, Obj], done: dict[str, tuple[Rule, ...]], seen: frozenset[str]
) -> tuple[Rule, ...]:
    if name in done:
        return done[name]
    cr = by_name[name]
    rules = parse_rules(cr)
    agg = cr.get("aggregationRule")
    if rules or not isinstance(agg, dict) or name in seen:
        return rules
    # The aggregation controller has not filled this role in yet: do what it would do.
    out: list[Rule] = []
    for selector in _list(agg.get("clusterRoleSelectors")):
        for other, obj in sorted(by_name.items()):
            labels = _meta(obj).get("labels") or {}
            if other == name or not selector_matches(selector, labels):
                continue
            for rule in _aggregate(other, by_name, done, seen | {name}):
                if rule not in out:
                    out.append(rule)
    return tuple(out)


@dataclass(frozen=True)
class Binding:
    """A RoleBinding (namespace set) or ClusterRoleBinding (namespace None), parsed."""

    namespace: str | None
    name: str
    role_kind: str
    role_name: str
    subjects: tuple[tuple[str, str, str], ...]  # (kind, name, namespace)

    @classmethod
    def parse(cls, obj: Obj, namespaced: bool) -> Binding:
        meta = _meta(obj)
        raw_ref = obj.get("roleRef")
        ref: Mapping[str, Any] = raw_ref if isinstance(raw_ref, dict) else {}
        subjects = []
        for s in _list(obj.get("subjects")):
            if isinstance(s, dict):
                subjects.append(
                    (str(s.get("kind", "")), str(s.get("name", "")), str(s.get("namespace") or ""))
                )
        return cls(
            str(meta.get("namespace") or "") if namespaced else None,
            str(meta.get("name", "")),
            str(ref.get("kind", "")),
            str(ref.get("name", "")),
            tuple(subjects),
        )

    @property
    def ref(self) -> tuple[str, str, str, str]:
        """(binding kind, binding name, role kind, role name): what explains a grant."""
        kind = "ClusterRoleBinding" if self.namespace is None else "RoleBinding"
        return kind, self.name, self.role_kind, self.role_name

    def subject_keys(self) -> Iterator[tuple[str, str]]:
        """Each subject as ('u'|'g', name); service accounts are users. Unmatchable ones drop."""
        for kind, name, ns in self.subjects:
            if kind == "User":
                yield "u", name
            elif kind == "Group":
                yield "g", name
            elif kind == "ServiceAccount":
                sa_ns = ns or (self.namespace or "")
                if sa_ns:
                    yield "u", f"{SA_PREFIX}{sa_ns}:{name}"

    def applies_to(self, user: UserInfo) -> bool:
        for kind, name in self.subject_keys():
            if (kind == "u" and name == user.name) or (kind == "g" and name in user.groups):
                return True
        return False


class Authorizer:
    """Answers `allowed(user, verb, ...)` for one cluster's RBAC objects."""

    def __init__(self, objects: RbacObjects) -> None:
        self.cluster_role_rules = resolve_cluster_roles(objects.cluster_roles)
        self.role_rules: dict[tuple[str, str], tuple[Rule, ...]] = {}
        for role in objects.roles:
            meta = _meta(role)
            key = (str(meta.get("namespace") or ""), str(meta.get("name", "")))
            self.role_rules[key] = parse_rules(role)
        self.cluster_bindings = [Binding.parse(b, False) for b in objects.cluster_role_bindings]
        self.bindings_by_ns: dict[str, list[Binding]] = {}
        for raw in objects.role_bindings:
            b = Binding.parse(raw, True)
            self.bindings_by_ns.setdefault(b.namespace or "", []).append(b)

    def binding_rules(self, binding: Binding) -> tuple[Rule, ...]:
        """rbac GetRoleReferenceRules: a missing (or unresolvable) role grants nothing."""
        if binding.role_kind == "ClusterRole":
            return self.cluster_role_rules.get(binding.role_name, ())
        if binding.role_kind == "Role" and binding.namespace:
            return self.role_rules.get((binding.namespace, binding.role_name), ())
        return ()

    def bindings_for(self, namespace: str | None) -> Iterator[Binding]:
        """ClusterRoleBindings, then the RoleBindings of `namespace` (none when None)."""
        yield from self.cluster_bindings
        if namespace:
            yield from self.bindings_by_ns.get(namespace, ())

    def allowed(
        self,
        user: UserInfo,
        verb: str,
        api_group: str,
        resource: str,
        namespace: str | None,
        name: str | None = None,
        subresource: str = "",
    ) -> bool:
        """May `user` do `verb` on the resource? `namespace=None`: cluster-scoped / all
        namespaces, where only ClusterRoleBindings count."""
        if MASTERS in user.groups:
            return True
        for binding in self.bindings_for(namespace):
            if not binding.applies_to(user):
                continue
            for rule in self.binding_rules(binding):
                if rule.allows(verb, api_group, resource, subresource, name or ""):
                    return True
        return False
