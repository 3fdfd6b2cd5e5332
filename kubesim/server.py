"""`KubeSim`: many simulated clusters served from one process, one port per cluster, plus the
Python API tests, the demo and benchmarks use to change clusters and inject faults.

    sim = KubeSim.start(fleet=generate_fleet(clusters=2, namespaces=5, seed=1), kubeconfig_dir=d)
    sim.kubeconfig_path("cluster-000"); sim.set_fault("cluster-001", down=True); sim.stop()

The event loop runs in a background thread; every API method is marshalled onto it.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TypeVar

from common.errors import ConfigError
from common.rbac.authorizer import UserInfo
from kubesim.auth import Tokens
from kubesim.catalog import Catalog, Resource
from kubesim.cluster import SimCluster
from kubesim.faults import Fault, RequestRecord
from kubesim.kubeconfig import write_kubeconfig
from kubesim.patch import merge_patch
from kubesim.registration import Credentials, ManagementFleet, fill_credentials
from kubesim.store import ClusterStore, Obj, now_iso
from kubesim.tls import make_serving_cert
from kubesim.watch import Deliveries, Delivery

T = TypeVar("T")


class Fleet(Protocol):
    cluster_names: list[str]

    def load(self, name: str, store: ClusterStore) -> None: ...


class KubeSim:
    """A running simulator. Build with `KubeSim.start(...)`; `stop()` (or `with`) ends it."""

    def __init__(
        self, fleet: Fleet, host: str, advertise_host: str, catalog: Catalog, tls: bool
    ) -> None:
        self.fleet, self.host, self.advertise_host = fleet, host, advertise_host
        self.catalog = catalog
        # The cluster playing the management cluster: its kubeconfig is not a leaf's.
        self.management = fleet.name if isinstance(fleet, ManagementFleet) else ""
        self.cert = make_serving_cert([advertise_host]) if tls else None
        self.tokens = Tokens.create()
        self.kubeconfig_dir: Path | None = None
        self.bookmark_interval_s = 10.0  # how often watches that allow bookmarks get one
        self._clusters: dict[str, SimCluster] = {}
        self.deliveries = Deliveries()  # when each recent live watch event was sent
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubesim", daemon=True)

    @classmethod
    def start(
        cls,
        fleet: Fleet,
        kubeconfig_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        advertise_host: str = "",
        bookmark_interval_s: float = 10.0,
        catalog: Catalog | None = None,
        tls: bool = True,
        management: str = "",
    ) -> KubeSim:
        """Serve every cluster of `fleet`. With `port` 0 (the default) the OS gives each cluster
        its own free port (nothing assumes consecutive free ports); an explicit `port` serves
        cluster i on `port + i` and fails with a ConfigError naming a port already in use.
        `management` names the cluster playing the management cluster (a ManagementFleet's
        own by default): it gets no kubeconfig in `kubeconfig_dir`."""
        catalog = catalog or getattr(fleet, "catalog", None) or Catalog.default()
        sim = cls(fleet, host, advertise_host or _advertise(host), catalog, tls)
        sim.bookmark_interval_s = bookmark_interval_s
        if management:
            if management not in fleet.cluster_names:
                raise KeyError(f"kubesim serves no cluster {management!r}")
            sim.management = management
        context = sim.cert.server_context() if sim.cert else None
        for i, name in enumerate(fleet.cluster_names):
            sim._clusters[name] = SimCluster(
                name,
                catalog,
                sim.tokens,
                functools.partial(sim._load, name),
                host,
                port + i if port else 0,
                bookmark_interval_s,
                context,
                deliveries=sim.deliveries,
            )
        sim._thread.start()
        try:
            sim._run(sim._start_all())
            if kubeconfig_dir is not None:
                sim.write_kubeconfigs(kubeconfig_dir)
        except BaseException:
            sim.stop()
            raise
        return sim

    def _load(self, name: str, store: ClusterStore) -> None:
        """Fill a cluster on first use; annotated Secrets get the leaves' credentials."""
        self.fleet.load(name, store)
        if fill_credentials(store, self.credentials):
            store.compact()  # loading is not history

    async def _start_all(self) -> None:
        for cluster in self._clusters.values():
            listener = cluster.listener
            try:
                await listener.start()
            except OSError as e:
                raise ConfigError(
                    f"kubesim cannot listen on {listener.host}:{listener.port} for cluster "
                    f"{cluster.name}: {e.strerror or e}; choose another base port, or port 0 "
                    "to let the OS pick a free port per cluster"
                ) from e

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the event loop thread (store access is single-threaded)."""
        if threading.current_thread() is self._thread:
            return fn()
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return fut.result()

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            self._run(self._stop_all())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()

    async def _stop_all(self) -> None:
        for cluster in self._clusters.values():
            await cluster.listener.stop()
            cluster.listener.release()
        # What is still running (a connection accepted while the listeners stopped, a watch's
        # reader) ends here, on a running loop, not when the closed loop drops it.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        if rest:
            await asyncio.wait(rest, timeout=2.0)

    def __enter__(self) -> KubeSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses and credentials -----------------------------------------------------

    @property
    def clusters(self) -> list[str]:
        return list(self._clusters)

    def port(self, cluster: str) -> int:
        return self._cluster(cluster).listener.port

    def url(self, cluster: str) -> str:
        scheme = "https" if self.cert else "http"
        return f"{scheme}://{self.advertise_host}:{self.port(cluster)}"

    @property
    def ca_pem(self) -> bytes:
        """The CA certificate (PEM) that signed the serving certificate (b"" without TLS)."""
        return self.cert.ca_pem if self.cert else b""

    def ca_file(self, directory: str | Path) -> Path:
        """Write the CA certificate to `<directory>/kubesim-ca.pem` (for `requests`' verify=)."""
        path = Path(directory) / "kubesim-ca.pem"
        path.write_bytes(self.ca_pem)
        return path

    @property
    def collector_token(self) -> str:
        return self.tokens.collector

    @property
    def admin_token(self) -> str:
        return self.tokens.admin

    def token_for(self, user: str, groups: tuple[str, ...] = (), token: str = "") -> str:
        """A bearer token (`token`, else a random one) that authenticates as `user` with
        `groups` on every cluster."""
        return self._call(lambda: self.tokens.add(UserInfo(user, tuple(groups)), token))

    def revoke_token(self, token: str) -> None:
        """The token stops authenticating (401), as a deleted service-account token does."""
        self._call(lambda: self.tokens.by_token.pop(token, None))

    def credentials(self, cluster: str, token: str = "") -> Credentials:
        """Server, CA and the collector's (or `token`) bearer token of one cluster."""
        server = self.url(cluster)
        return Credentials(cluster, server, token or self.tokens.collector, self.ca_pem)

    def kubeconfig(self, cluster: str, token: str = "") -> dict[str, Any]:
        """An in-memory kubeconfig of one cluster with one user (the collector, or `token`)."""
        return self.credentials(cluster, token).kubeconfig()

    def write_kubeconfigs(self, directory: str | Path) -> list[Path]:
        """One kubeconfig per cluster (`<cluster>.yaml`), usable as FLEETSCOPE_CLUSTERS_DIR."""
        self.kubeconfig_dir = Path(directory)
        self.kubeconfig_dir.mkdir(parents=True, exist_ok=True)
        return [
            write_kubeconfig(self.kubeconfig_dir, name, self.url(name), self.tokens, self.ca_pem)
            for name in self._clusters
            if name != self.management
        ]

    def write_management_kubeconfig(self, path: str | Path) -> Path:
        """The management cluster's kubeconfig (the collector identity, which reads all)."""
        if not self.management:
            raise RuntimeError("no management cluster: serve a ManagementFleet")
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        written = write_kubeconfig(
            target.parent, self.management, self.url(self.management), self.tokens, self.ca_pem
        )
        return written if written == target else written.replace(target)

    def kubeconfig_path(self, cluster: str) -> Path:
        if self.kubeconfig_dir is None:
            raise RuntimeError("no kubeconfig_dir: pass one to KubeSim.start or write_kubeconfigs")
        self._cluster(cluster)
        return self.kubeconfig_dir / f"{cluster}.yaml"

    # -- objects --------------------------------------------------------------------------

    def resource(self, kind: str) -> Resource:
        """A served type by kind, plural, short name or `plural.group`."""
        return self.catalog.find(kind)

    def _store(self, cluster: str) -> ClusterStore:
        return self._cluster(cluster).store

    def get(self, cluster: str, kind: str, namespace: str, name: str) -> Obj | None:
        res = self.resource(kind)
        raw = self._call(lambda: self._store(cluster).get_raw(res, namespace, name))
        return None if raw is None else json.loads(raw)

    def store(self, cluster: str) -> ClusterStore:
        """The cluster's store, for in-process readers (bench.xl_load.StoreLeaf); read it only
        through `call`, on kubesim's loop."""
        return self._store(cluster)

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on kubesim's loop and return its result (thread-safe)."""
        return self._call(fn)

    def list(self, cluster: str, kind: str, namespace: str = "") -> list[Obj]:
        res = self.resource(kind)
        raws, _ = self._call(lambda: self._store(cluster).page(res, namespace, None, 0))
        return [json.loads(raw) for raw in raws]

    def apply(self, cluster: str, obj: Obj) -> Obj:
        """Create or replace `obj` (status included), as a controller-less write would."""
        res = self.catalog.ensure(obj["apiVersion"], obj["kind"], "namespace" in obj["metadata"])
        ns = str(obj["metadata"].get("namespace", "")) if res.namespaced else ""
        body = json.loads(json.dumps(obj))
        return self._call(lambda: self._store(cluster).upsert(res, ns, body))

    def patch(self, cluster: str, kind: str, namespace: str, name: str, patch: Obj) -> Obj:
        """JSON-merge-patch the object (spec/metadata; status is the status subresource's)."""
        res = self.resource(kind)
        fn = lambda doc: merge_patch(doc, patch)  # noqa: E731
        return self._call(lambda: self._store(cluster).patch(res, namespace, name, fn))

    def patch_status(self, cluster: str, kind: str, namespace: str, name: str, status: Obj) -> Obj:
        """JSON-merge-patch `.status`, as a controller writes its status subresource."""
        res = self.resource(kind)
        fn = lambda doc: merge_patch(doc, {"status": status})  # noqa: E731
        return self._call(lambda: self._store(cluster).patch(res, namespace, name, fn, "status"))

    def set_ready(
        self,
        cluster: str,
        kind: str,
        namespace: str,
        name: str,
        ready: bool | None,
        reason: str = "",
        message: str = "",
    ) -> Obj:
        """Set a Flux object's Ready condition (True/False/Unknown for None), like its controller."""
        obj = self.get(cluster, kind, namespace, name)
        if obj is None:
            raise KeyError(f"{kind} {namespace}/{name} not found in {cluster}")
        status = {True: "True", False: "False", None: "Unknown"}[ready]
        if not reason:
            reason = {True: "ReconciliationSucceeded", False: "ReconciliationFailed"}.get(
                bool(ready), "Progressing"
            )
            reason = "Progressing" if ready is None else reason
        gen = obj["metadata"].get("generation", 1)
        cond = {
            "type": "Ready",
            "status": status,
            "observedGeneration": gen,
            "lastTransitionTime": now_iso(),
            "reason": reason,
            "message": message,
        }
        old = (obj.get("status") or {}).get("conditions") or []
        conds = [c for c in old if c.get("type") not in ("Ready", "Stalled", "Reconciling")]
        patch = {"conditions": [cond, *conds], "observedGeneration": gen}
        return self.patch_status(cluster, kind, namespace, name, patch)

    def delete(self, cluster: str, kind: str, namespace: str, name: str) -> Obj:
        res = self.resource(kind)
        return self._call(lambda: self._store(cluster).delete(res, namespace, name))

    def warm(self) -> None:
        """Generate or load every cluster now instead of on its first request (one at a time,
        so requests to other clusters are served in between)."""
        for name in self.clusters:
            self._call(self._cluster(name).ensure_loaded)

    def warm_cluster(self, cluster: str) -> None:
        """Generate or load one cluster now (errors in its manifests surface here)."""
        self._call(self._cluster(cluster).ensure_loaded)

    def compact(self, cluster: str) -> None:
        """Drop history like an etcd compaction: older continue tokens and watches get 410."""
        self._call(lambda: self._store(cluster).compact())

    def resource_version(self, cluster: str) -> int:
        return self._call(lambda: self._store(cluster).rv)

    def delivery(
        self, cluster: str, kind: str, namespace: str, name: str, resource_version: int | str
    ) -> Delivery | None:
        """When the live watch event of this write was made and first sent to a watcher
        (`time.monotonic()` of this process), or None if no watcher got it (yet).

        Read without the event loop, so a benchmark polling it does not queue behind it."""
        kind = self.resource(kind).kind
        return self.deliveries.get(cluster, kind, namespace, name, int(resource_version))

    def watch_streams(self, cluster: str) -> int:
        """Watch streams open on one cluster (registered for live events)."""
        store = self._store(cluster)
        return self._call(lambda: sum(len(group) for group in store.watchers.values()))

    def watch_offers(self, cluster: str) -> int:
        """Live events handed to watch streams of one cluster so far (one per stream per
        event of the resource it watches): the count guard for delivery's cost."""
        return self._call(lambda: self._store(cluster).watch_offers)

    # -- faults and the request log ------------------------------------------------------

    def set_fault(self, cluster: str, **fault: Any) -> None:
        """Replace the cluster's faults (see `Fault`); `set_fault(c)` clears them."""
        new = Fault(**fault)
        sim_cluster = self._cluster(cluster)

        async def apply() -> None:
            sim_cluster.fault = new
            if new.down and sim_cluster.listener.serving:
                await sim_cluster.listener.stop(keep_port=True)
            elif not new.down and not sim_cluster.listener.serving:
                await sim_cluster.listener.start()

        self._run(apply())

    def fault(self, cluster: str) -> Fault:
        return self._cluster(cluster).fault

    def request_log(self, cluster: str) -> builtins.list[RequestRecord]:
        log = self._cluster(cluster).log
        return self._call(lambda: [*log])

    def clear_request_log(self, cluster: str | None = None) -> None:
        names = [cluster] if cluster else self.clusters

        def clear() -> None:
            for n in names:
                self._cluster(n).log.clear()

        self._call(clear)

    def _cluster(self, name: str) -> SimCluster:
        try:
            return self._clusters[name]
        except KeyError:
            raise KeyError(f"kubesim serves no cluster {name!r}") from None

    def serve_forever(self, until: threading.Event | None = None) -> None:
        """Block until `until` is set (or forever), then stop."""
        try:
            (until or threading.Event()).wait()
        finally:
            self.stop()


def _advertise(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
