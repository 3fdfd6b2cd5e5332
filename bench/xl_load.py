"""Load a generated fleet into Redis through the collector's own sync, one cluster at a time, no
HTTP: for fleets whose objects would not fit in kubesim beside the collector (fleet XL).

    .venv/bin/python -m bench.xl_load --preset XL --redis-url redis+cluster://... [--processes 2]

Each worker process generates one leaf cluster into a kubesim `ClusterStore` (the generator
kubesim serves from), hands it to the collector's `Collector.run` (lock, fence, discovery,
`collector.sync.collect`, `store.replace_rows`, the RBAC sync and `store_grants`) through
`StoreLeaf`, a `LeafClient` answering discovery and lists from that store instead of over HTTP,
then drops the cluster and takes the next. Redis ends up holding what `fleetscope collect --once`
writes for the same fleet (tests/bench/test_xl_load.py checks it at S on a Redis Cluster);
only the registry records differ (`source` `bench`, no API server).

Why not kubesim: warmed (`--kubesim-rss`), it held 54 MiB for fleet S's 8,547 objects and
247 MiB for M's 179,051: ~1.2 KiB per further object (1.4 KiB on average at M). An XL cluster
has ~13,700 objects (7,800 rows plus RBAC, Services and Namespaces), so XL's ~13.7 M objects
would take ~15-18 GiB in kubesim alone, beside the collector and 3 Redis primaries (~3 GiB at
~400 B a row) on a 24 GiB machine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import redis

from collector.jobs import Collector
from collector.sync import Work
from common import redis_client
from common.kinds.registry import builtin_registry
from common.leaf import registry
from common.leaf.client import ClusterConfig, LeafClient
from common.settings import Settings
from kubesim.catalog import Catalog
from kubesim.gen.fleet import preset_fleet
from kubesim.store import ClusterStore

SERVER = "https://bench-xl-load.invalid"


class StoreLeaf(LeafClient):
    """A `LeafClient` whose discovery and list answers come from a `ClusterStore` in this
    process, as kubesim would send them (one page per list), so the collector's code from
    `discover` and `list_pages` on runs unchanged."""

    def __init__(
        self, store: ClusterStore, run: Callable[[Callable[[], Any]], Any] | None = None
    ) -> None:  # no kubeconfig, no connection pool
        self.name = store.name
        self.config = _config(store.name)
        self.requests = 0
        self.page_size = 0
        self._store = store
        self._run = run or (lambda fn: fn())  # a live kubesim's store is read on its own loop

    def close(self) -> None:
        pass

    def _get_body(self, path: str, *_: Any, **__: Any) -> bytes:
        self.requests += 1
        path = urlsplit(path).path
        doc = self._store.catalog.doc(path)
        if doc is not None:
            return bytes(doc)
        parts = path.strip("/").split("/")
        group, version, plural = ("", *parts[1:]) if parts[0] == "api" else parts[1:]
        res = self._store.catalog.for_api(group, version, plural)
        raws: list[bytes] = []
        rv = self._store.rv
        if res is not None:
            raws, rv = self._run(lambda: (self._store.page(res, "", None, 0)[0], self._store.rv))
        meta = b'{"metadata":{"resourceVersion":"%d"},"items":[' % int(rv)
        return meta + b",".join(raws) + b"]}"


class _OneSource:
    """The collector's cluster source for one cluster at a time (`Collector.source`)."""

    leaf: StoreLeaf | None = None

    def client(self, cluster: str) -> StoreLeaf:
        assert self.leaf is not None and self.leaf.name == cluster
        return self.leaf

    def close_idle(self, idle_s: float) -> list[str]:
        """Nothing kept between clusters: nothing to close."""
        return []


def _config(name: str) -> ClusterConfig:
    kubeconfig = {
        "current-context": name,
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "clusters": [{"name": name, "cluster": {"server": SERVER}}],
        "users": [{"name": name, "user": {}}],
    }
    return ClusterConfig(name, "dir", f"bench/xl_load/{name}", kubeconfig)


def register(r: redis.Redis, names: list[str]) -> None:
    """Register the clusters as the collector's reconcile does (sync status `pending`)."""
    registry.reconcile(r, {name: _config(name) for name in names})


def load_cluster(c: Collector, source: _OneSource, fleet: Any, name: str) -> int:
    """Generate cluster `name`, run its object and RBAC syncs; its row count."""
    store = ClusterStore(name, Catalog.default(c.kinds))
    fleet.load(name, store)
    source.leaf = StoreLeaf(store)
    try:
        objects = c.run(Work.OBJECTS, name)
        rbac = c.run(Work.RBAC, name)
    finally:
        source.leaf = None
    if not (objects.ok and rbac.ok):
        raise RuntimeError(f"{name}: {objects.error or rbac.error}")
    return objects.objects


def _worker(url: str, preset: str, seed: int, names: list[str]) -> int:
    r = redis_client.connect(url)
    source = _OneSource()
    c = Collector(Settings(redis_url=url), r, builtin_registry(), source)  # type: ignore[arg-type]
    fleet = preset_fleet(preset, seed)
    try:
        return sum(load_cluster(c, source, fleet, name) for name in names)
    finally:
        r.close()


def load(url: str, preset: str, seed: int = 1, processes: int = 0) -> dict[str, Any]:
    """Every cluster of a preset fleet into Redis at `url` (standalone or a Redis Cluster)."""
    names = preset_fleet(preset, seed).cluster_names
    procs = max(1, min(processes or os.cpu_count() or 1, len(names)))
    started = time.monotonic()
    r = redis_client.connect(url)
    try:
        register(r, names)
    finally:
        r.close()
    parts = [names[i::procs] for i in range(procs)]
    with ProcessPoolExecutor(procs) as pool:
        total = sum(pool.map(_worker, [url] * procs, [preset] * procs, [seed] * procs, parts))
    return {"clusters": len(names), "rows": total, "load_s": round(time.monotonic() - started, 1)}


def kubesim_rss(preset: str, seed: int = 1) -> dict[str, Any]:
    """kubesim's resident memory per object, every cluster of `preset` generated (`--warm`)."""
    from bench.collection import start_kubesim

    with tempfile.TemporaryDirectory() as tmp:
        sim = start_kubesim(preset, seed, os.path.join(tmp, "clusters"))
        try:
            with open(f"/proc/{sim.pid}/status") as f:
                rss = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:"))
        finally:
            sim.terminate()
            sim.wait(30)
    fleet, catalog = preset_fleet(preset, seed), Catalog.default()
    objects = sum(
        sum(1 for _ in fleet.objects(i, catalog)) for i in range(len(fleet.cluster_names))
    )
    return {
        "preset": preset,
        "objects": objects,
        "rss_mib": rss // 2**20,
        "bytes_per_object": round(rss / objects),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="S")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--redis-url", default="", help="default: a private redis-server")
    ap.add_argument("--processes", type=int, default=0)
    ap.add_argument(
        "--kubesim-rss", action="store_true", help="only measure kubesim's memory per object"
    )
    args = ap.parse_args()
    if args.kubesim_rss:
        print(json.dumps(kubesim_rss(args.preset, args.seed)))
        return
    from common.redis_server import start_redis_server

    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        loaded = load(url, args.preset, args.seed, args.processes)
        print(json.dumps({"preset": args.preset, **loaded}))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
