"""One simulated cluster's objects: pre-serialized JSON per object, a resourceVersion counter
like etcd's, a bounded event history for watches and continue tokens, and the write verbs.

Objects are kept as compact JSON bytes, so a list page is a join, not a json.dumps per object.
Writes parse, change and re-serialize one object, bump the cluster's resourceVersion and emit a
watch event. Not thread-safe: the server calls it from its event loop thread only.
"""

from __future__ import annotations

import base64
import bisect
import json
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesim.catalog import NAMESPACES, RBAC_KEYS, SECRETS, Catalog, Resource
from kubesim.errors import KubeError

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Obj = dict[str, Any]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


@dataclass(frozen=True)
class Event:
    rv: int
    res_key: tuple[str, str]
    type: str  # ADDED | MODIFIED | DELETED
    namespace: str
    name: str
    raw: bytes
    at: float = 0.0  # time.monotonic() when the write was made (0 for synthetic events)


def watch_line(kind: str, raw: bytes) -> bytes:
    """One watch event as sent: a JSON line."""
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


@dataclass
class Table:
    """Objects of one resource type, plus a lazily re-sorted key list for pages."""

    items: dict[Key, bytes] = field(default_factory=dict)
    _sorted: list[Key] | None = None

    def keys(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.items)
        return self._sorted

    def put(self, key: Key, raw: bytes) -> None:
        if key not in self.items:
            self._sorted = None
        self.items[key] = raw

    def pop(self, key: Key) -> bytes | None:
        raw = self.items.pop(key, None)
        if raw is not None:
            self._sorted = None
        return raw

    def range(self, namespace: str, after: Key | None) -> Iterator[Key]:
        """Keys in list order, within `namespace` if set, strictly after `after` if set."""
        keys = self.keys()
        lo = 0
        if namespace:
            lo = bisect.bisect_left(keys, (namespace, ""))
        if after is not None:
            lo = max(lo, bisect.bisect_right(keys, after))
        for i in range(lo, len(keys)):
            if namespace and keys[i][0] != namespace:
                return
            yield keys[i]


Watcher = Callable[[Event, bytes], None]  # an event and its watch line, shared by all watchers
WatchKey = tuple[tuple[str, str], str]  # (resource key, namespace; "" for every namespace)


class ClusterStore:
    """All objects of one cluster."""

    def __init__(self, name: str, catalog: Catalog, history: int = 10_000) -> None:
        self.name = name
        self.catalog = catalog
        self.rv = 0
        self.compacted_rv = 0  # watches and continue tokens older than this answer 410
        self.tables: dict[tuple[str, str], Table] = {}
        self.events: deque[Event] = deque(maxlen=history)
        # Watchers by what they watch, so an event reaches only its resource's (and
        # namespace's) watchers, never a pass over every stream of the cluster.
        self.watchers: dict[WatchKey, set[Watcher]] = {}
        self.watch_offers = 0  # events handed to watchers (a count guard for the indexing)
        self.rbac_generation = 0  # bumped on every RBAC write (the authorizer cache key)

    def table(self, res: Resource) -> Table:
        t = self.tables.get(res.key)
        if t is None:
            t = self.tables[res.key] = Table()
        return t

    # -- loading and reading ------------------------------------------------------------

    def load(self, objects: Iterable[tuple[Resource, str, str, bytes]], last_rv: int) -> None:
        """Bulk-load pre-serialized objects whose resourceVersions are <= `last_rv`."""
        for res, ns, name, raw in objects:
            self.table(res).put((ns, name), raw)
        self.rv = self.compacted_rv = max(self.rv, last_rv)

    def get_raw(self, res: Resource, namespace: str, name: str) -> bytes | None:
        t = self.tables.get(res.key)
        return t.items.get((namespace, name)) if t else None

    def get(self, res: Resource, namespace: str, name: str) -> Obj:
        raw = self.get_raw(res, namespace, name)
        if raw is None:
            raise KubeError.not_found(res, name)
        obj: Obj = json.loads(raw)
        return obj

    def count(self, res: Resource) -> int:
        t = self.tables.get(res.key)
        return len(t.items) if t else 0

    def page(
        self,
        res: Resource,
        namespace: str,
        after: Key | None,
        limit: int,
        match: Callable[[bytes], bool] | None = None,
    ) -> tuple[list[bytes], Key | None]:
        """Up to `limit` (0 = all) objects after `after`; the last key if more may follow."""
        t = self.tables.get(res.key)
        if t is None:
            return [], None
        out: list[bytes] = []
        last: Key | None = None
        items = t.items
        for key in t.range(namespace, after):
            if limit and len(out) >= limit:
                return out, last
            raw = items[key]
            if match is None or match(raw):
                out.append(raw)
                last = key
        return out, None

    def watch(self, res: Resource, namespace: str, watcher: Watcher) -> None:
        """Hand `watcher` every later event of `res` (within `namespace` if set)."""
        self.watchers.setdefault((res.key, namespace), set()).add(watcher)

    def unwatch(self, res: Resource, namespace: str, watcher: Watcher) -> None:
        key = (res.key, namespace)
        group = self.watchers.get(key)
        if group is not None:
            group.discard(watcher)
            if not group:
                del self.watchers[key]

    def compact(self) -> None:
        """Forget history like an etcd compaction: older continue tokens and watches get 410."""
        self.compacted_rv = self.rv
        self.events.clear()

    def events_since(self, rv: int) -> list[Event] | None:
        """Events after `rv`, or None when `rv` is older than the retained history."""
        oldest = self.events[0].rv - 1 if self.events else self.compacted_rv
        if rv < max(oldest, self.compacted_rv):
            return None
        return [e for e in self.events if e.rv > rv]

    # -- writes -----------------------------------------------------------------------------

    def create(self, res: Resource, namespace: str, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name") or ""
        if not name:
            raise KubeError.invalid(res, "", "metadata.name: Required value: name is required")
        if res.namespaced:
            meta["namespace"] = namespace
            if not self.get_raw(NAMESPACES, "", namespace):
                raise KubeError.not_found(NAMESPACES, namespace)
        else:
            meta.pop("namespace", None)
        if self.get_raw(res, namespace, name) is not None:
            raise KubeError.already_exists(res, name)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        meta.pop("deletionTimestamp", None)
        if res.status_rule:
            meta["generation"] = 1
        if res is NAMESPACES:
            obj["status"] = {"phase": "Active"}
        if res.key == SECRETS.key:
            _string_data(obj)
        return self._write(res, namespace, name, obj, "ADDED")

    def replace(self, res: Resource, namespace: str, name: str, obj: Obj, sub: str = "") -> Obj:
        old = self.get(res, namespace, name)
        meta = obj.get("metadata") or {}
        want_rv = meta.get("resourceVersion")
        if want_rv and want_rv != old["metadata"].get("resourceVersion"):
            raise KubeError.conflict(res, name)
        return self._update(res, old, obj, sub)

    def patch(
        self, res: Resource, namespace: str, name: str, fn: Callable[[Obj], Obj], sub: str = ""
    ) -> Obj:
        old = self.get(res, namespace, name)
        new = fn(json.loads(dumps(old)))
        return self._update(res, old, new, sub)

    def upsert(self, res: Resource, namespace: str, obj: Obj) -> Obj:
        """Create, or replace everything including status (the Python API's `apply`)."""
        name = str((obj.get("metadata") or {}).get("name", ""))
        if self.get_raw(res, namespace, name) is None:
            return self.create(res, namespace, obj)
        old = self.get(res, namespace, name)
        new = self._update(res, old, obj, "")
        if "status" in obj and new.get("status") != obj["status"]:
            new = self._update(res, new, {**new, "status": obj["status"]}, "status")
        return new

    def delete(self, res: Resource, namespace: str, name: str) -> Obj:
        obj = self.get(res, namespace, name)
        if res is NAMESPACES:
            self._delete_namespace_contents(name)
        self.table(res).pop((namespace, name))
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._emit(res, "DELETED", namespace, name, dumps(obj))
        return obj

    def _delete_namespace_contents(self, namespace: str) -> None:
        for key, table in list(self.tables.items()):
            res = self.catalog.resources.get(key)
            if res is None or not res.namespaced:
                continue
            for _, name in list(table.range(namespace, None)):
                self.delete(res, namespace, name)

    def _update(self, res: Resource, old: Obj, new: Obj, sub: str) -> Obj:
        if sub == "status":
            merged = dict(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
        elif sub:
            raise KubeError.not_found(res, f"{old['metadata']['name']}/{sub}")
        else:
            merged = dict(new)
            merged["apiVersion"], merged["kind"] = res.api_version, res.kind
            if res.has_status:  # the status subresource owns .status
                if "status" in old:
                    merged["status"] = old["status"]
                else:
                    merged.pop("status", None)
            meta = dict(merged.get("metadata") or {})
            for field_name in ("uid", "creationTimestamp", "namespace", "name", "generation"):
                if field_name in old["metadata"]:
                    meta[field_name] = old["metadata"][field_name]
            merged["metadata"] = meta
            if res.status_rule and _spec_of(merged) != _spec_of(old):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
            if res.key == SECRETS.key:
                _string_data(merged)
        meta = merged["metadata"]
        return self._write(res, meta.get("namespace", ""), meta["name"], merged, "MODIFIED")

    def _write(self, res: Resource, namespace: str, name: str, obj: Obj, kind: str) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        raw = dumps(obj)
        self.table(res).put((namespace if res.namespaced else "", name), raw)
        self._emit(res, kind, namespace if res.namespaced else "", name, raw)
        return obj

    def _emit(self, res: Resource, kind: str, namespace: str, name: str, raw: bytes) -> None:
        if res.key in RBAC_KEYS:
            self.rbac_generation += 1
        event = Event(self.rv, res.key, kind, namespace, name, raw, time.monotonic())
        self.events.append(event)
        if not self.watchers:
            return
        every = self.watchers.get((res.key, ""))
        within = self.watchers.get((res.key, namespace)) if namespace else None
        if not every and not within:
            return
        line = watch_line(kind, raw)  # serialized once, whatever the number of watchers
        for group in (every, within):
            for watcher in list(group or ()):
                self.watch_offers += 1
                watcher(event, line)


def _string_data(secret: Obj) -> None:
    """A Secret's `stringData` merged into `data` (base64), as kube-apiserver does on writes."""
    strings = secret.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        data = dict(secret.get("data") or {})
        for key, value in strings.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data


def _spec_of(obj: Obj) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
