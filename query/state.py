"""Per-process state of the query service: Redis client, reader, resolver, identity, tokens.

Built by `create_app` from Settings; nothing connects to Redis until the first request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import redis
from flask import current_app, request

from common import redis_client
from common.index.read.group_facets import GroupFacets
from common.index.read.groups import GroupReader
from common.index.read.reader import Reader
from common.index.read.timesort import TimeReader
from common.kinds.registry import KindRegistry, load_registry
from common.rbac.authorizer import UserInfo
from common.rbac.grants import AccessResolver
from common.settings import Settings
from query.auth import Authenticator, make_authenticator
from query.leaves import LeafPool
from query.scope import FleetView, Scope, resolve_scope
from query.tokens import TokenSigner


@dataclass
class QueryState:
    settings: Settings
    registry: KindRegistry
    r: redis.Redis
    reader: Reader
    time_reader: TimeReader
    group_reader: GroupReader
    group_facets: GroupFacets
    resolver: AccessResolver
    fleet: FleetView
    authenticate: Authenticator
    leaves: LeafPool
    extensions: dict[str, Any] = field(default_factory=dict)
    """Per-process state of later routes (e.g. query.alerts' view), built on first use."""
    _signer: TokenSigner | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, settings: Settings) -> QueryState:
        registry = load_registry(settings.kinds_file)
        r = redis_client.connect(settings.redis_url, redis_client.QUERY_TIMEOUT_S)
        reader = Reader(r, registry.keys())
        return cls(
            settings=settings,
            registry=registry,
            r=r,
            reader=reader,
            group_reader=GroupReader(reader),
            group_facets=GroupFacets(reader),
            time_reader=TimeReader(r),
            resolver=AccessResolver(r, registry),
            fleet=FleetView(r),
            authenticate=make_authenticator(settings),
            leaves=LeafPool(settings, r),
        )

    @property
    def signer(self) -> TokenSigner:
        if self._signer is None:
            with self._lock:
                if self._signer is None:
                    self._signer = TokenSigner.shared(self.r, self.settings.continue_token_key)
        return self._signer

    def scope(self, user: UserInfo, optimistic: bool = False) -> Scope:
        return resolve_scope(user, self.fleet, self.resolver, self.settings, optimistic)


def state() -> QueryState:
    """The state of the app serving the current request."""
    st: QueryState = current_app.extensions["fleetscope"]
    return st


def caller() -> UserInfo:
    """The authenticated caller of the current request (401 otherwise), with the group every
    authenticated user has (`system:authenticated`, added here and nowhere else, as the
    kube-apiserver's authentication layer does)."""
    return state().authenticate(request).with_authenticated()
