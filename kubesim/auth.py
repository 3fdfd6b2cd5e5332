"""Authentication (bearer tokens), impersonation and RBAC authorization for kubesim.

The collector identity (the token in the kubeconfigs kubesim writes) may get/list/watch
everything and impersonate, on top of the cluster's own RBAC. The admin identity is in
`system:masters`. Everyone else, and every impersonated identity, is decided by
`common.rbac.authorizer.Authorizer` over the cluster's own Roles and bindings.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.rbac.authorizer import (
    AUTHENTICATED,
    MASTERS,
    SA_PREFIX,
    Authorizer,
    RbacObjects,
    UserInfo,
)
from kubesim.catalog import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    Resource,
)
from kubesim.errors import KubeError
from kubesim.http import Request
from kubesim.store import ClusterStore

COLLECTOR_USER = "fleetscope-collector"
ADMIN_USER = "kubesim-admin"
COLLECTOR_VERBS = frozenset({"get", "list", "watch"})


@dataclass
class Tokens:
    """Bearer token -> identity. The collector and admin tokens are made at start."""

    by_token: dict[str, UserInfo] = field(default_factory=dict)
    collector: str = ""
    admin: str = ""

    @classmethod
    def create(cls) -> Tokens:
        t = cls()
        t.collector = t.add(UserInfo(COLLECTOR_USER, (AUTHENTICATED,)))
        t.admin = t.add(UserInfo(ADMIN_USER, (MASTERS, AUTHENTICATED)))
        return t

    def add(self, user: UserInfo, token: str = "") -> str:
        token = token or secrets.token_urlsafe(24)
        self.by_token[token] = user.with_authenticated()
        return token

    def authenticate(self, req: Request) -> UserInfo:
        auth = req.header("authorization")
        scheme, _, token = auth.partition(" ")
        user = self.by_token.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise KubeError.unauthorized()
        return user


class ClusterAuthorizer:
    """Decisions for one cluster; the RBAC engine is rebuilt when an RBAC object changes."""

    def __init__(self, store: ClusterStore) -> None:
        self.store = store
        self._engine: Authorizer | None = None
        self._generation = -1

    def engine(self) -> Authorizer:
        if self._engine is None or self._generation != self.store.rbac_generation:
            s = self.store
            objects = RbacObjects(
                roles=_objects(s, ROLES),
                cluster_roles=_objects(s, CLUSTER_ROLES),
                role_bindings=_objects(s, ROLE_BINDINGS),
                cluster_role_bindings=_objects(s, CLUSTER_ROLE_BINDINGS),
            )
            self._engine, self._generation = Authorizer(objects), s.rbac_generation
        return self._engine

    def allowed(
        self,
        user: UserInfo,
        verb: str,
        group: str,
        resource: str,
        namespace: str | None,
        name: str = "",
        sub: str = "",
    ) -> bool:
        if user.name == COLLECTOR_USER and (verb in COLLECTOR_VERBS or verb == "impersonate"):
            return True
        if MASTERS in user.groups:
            return True
        return self.engine().allowed(user, verb, group, resource, namespace, name or None, sub)

    def impersonate(self, req: Request, user: UserInfo) -> UserInfo:
        """The identity to act as: `user`, or the one its Impersonate-* headers name."""
        target = next(iter(req.text_all("impersonate-user")), "")
        groups = tuple(g for g in req.text_all("impersonate-group") if g)  # each value whole
        if not target:
            if groups:
                raise KubeError.bad_request("requested impersonation of groups without a user")
            return user
        if target.startswith(SA_PREFIX):
            ns, _, sa = target[len(SA_PREFIX) :].partition(":")
            self._check(user, "serviceaccounts", ns, sa)
        else:
            self._check(user, "users", None, target)
        for g in groups:
            self._check(user, "groups", None, g)
        return UserInfo(target, groups).with_authenticated()

    def _check(self, user: UserInfo, resource: str, namespace: str | None, name: str) -> None:
        if not self.allowed(user, "impersonate", "", resource, namespace, name):
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise KubeError.forbidden(
                f'{resource} "{name}" is forbidden: User "{user.name}" cannot impersonate '
                f'resource "{resource}" in API group "" {where}'
            )


def forbidden(
    user: UserInfo, verb: str, group: str, resource: str, namespace: str, name: str
) -> KubeError:
    """kube-apiserver's wording of an RBAC denial."""
    what = f'{resource} "{name}"' if name else resource
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return KubeError.forbidden(
        f'{what}{"." + group if group and not name else ""} is forbidden: User "{user.name}" '
        f'cannot {verb} resource "{resource}" in API group "{group}" {where}'
    )


def _objects(store: ClusterStore, res: Resource) -> list[Mapping[str, Any]]:
    table = store.tables.get(res.key)
    return [json.loads(raw) for raw in table.items.values()] if table else []
