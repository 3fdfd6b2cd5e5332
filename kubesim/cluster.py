"""One simulated cluster: its store (filled on first use), listener, faults and request log."""

from __future__ import annotations

import random
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any

from kubesim.auth import ClusterAuthorizer, Tokens
from kubesim.catalog import Catalog
from kubesim.faults import Fault, RequestRecord
from kubesim.http import Listener, Request, Response
from kubesim.store import ClusterStore
from kubesim.watch import Deliveries

Loader = Callable[[ClusterStore], None]


class SimCluster:
    """State of one cluster; everything here runs on the server's event loop thread."""

    def __init__(
        self,
        name: str,
        catalog: Catalog,
        tokens: Tokens,
        loader: Loader,
        host: str,
        port: int,
        bookmark_interval_s: float = 10.0,
        tls: ssl.SSLContext | None = None,
        log_size: int = 10_000,
        deliveries: Deliveries | None = None,
    ) -> None:
        self.name, self.catalog, self.tokens = name, catalog, tokens
        self._loader: Loader | None = loader
        self._store = ClusterStore(name, catalog)
        self.authz = ClusterAuthorizer(self._store)
        self.fault = Fault()
        self.rng = random.Random(name)
        self.log: deque[RequestRecord] = deque(maxlen=log_size)
        self.bookmark_interval_s = bookmark_interval_s
        self.deliveries = deliveries if deliveries is not None else Deliveries()
        self.listener = Listener(self._serve, host, port, tls)

    @property
    def store(self) -> ClusterStore:
        """The cluster's objects, generated or loaded on first use."""
        if self._loader is not None:
            loader, self._loader = self._loader, None
            loader(self._store)
        return self._store

    def ensure_loaded(self) -> ClusterStore:
        return self.store

    @property
    def loaded(self) -> bool:
        return self._loader is None

    async def _serve(self, req: Request) -> Response:
        from kubesim.api import handle

        return await handle(self, req)

    def record(self, req: Request, status: int, info: dict[str, Any]) -> None:
        groups = tuple(g for g in req.text_all("impersonate-group") if g)  # each value whole
        self.log.append(
            RequestRecord(
                method=req.method,
                path=req.path,
                query=dict(req.query),
                user=info.get("user", ""),
                impersonate_user=next(iter(req.text_all("impersonate-user")), ""),
                impersonate_groups=groups,
                status=status,
                verb=info.get("verb", ""),
                resource=info.get("resource", ""),
                namespace=info.get("namespace", ""),
                items=info.get("items", 0),
            )
        )
