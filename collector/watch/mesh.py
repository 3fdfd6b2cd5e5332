"""One watched cluster's Istio config, kept in memory, and its debounced re-validation.

The checked Istio kinds' objects (slimmed to what the rows and the checks read), the cluster's
Services and its Namespaces are kept from list and watch events. After a change, at most once per
debounce window, the whole cluster is validated again (common.kinds.istio_checks is linear in
the config) and only rows that changed are written: deleting a Gateway re-checks the
VirtualServices that name it. Nothing is written before every resource was listed once, since
validating a partial config would report references as missing that are not.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from collector import mesh
from collector.debounce import Debounced
from collector.watch.packed import Table, key_of
from common import redis_client
from common.errors import FleetscopeError
from common.index import rows
from common.index.write import store_events
from common.kinds.registry import Kind

log = logging.getLogger(__name__)
CONTEXT = (mesh.SERVICES, mesh.NAMESPACES)
"""The resources the checks read beside the Istio kinds (listed and watched at `v1`)."""


class MeshState:
    """The cluster's checked Istio objects, Services and Namespaces; `run` re-validates."""

    def __init__(
        self,
        cluster: str,
        kinds: Iterable[tuple[Kind, str]],
        debounce_s: float,
        replace: Callable[[str, list[str]], None],
        change: Callable[[store_events.Change], None],
        done: Callable[[], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.kinds = {k.key: (k, v) for k, v in kinds}
        self.debounce_s = debounce_s
        self._replace, self._change, self._done = replace, change, done
        # slimmed, and packed (collector.watch.packed) until the next validation
        self.objects: dict[str, Table] = {k: Table() for k in self.kinds}
        self.services = Table()
        self.namespaces: set[str] = set()
        self.listed: set[str] = set()
        self.validations = 0
        self.context_ok = True  # False: Services or Namespaces cannot be listed
        self._relisted: set[str] = set()  # kinds whose rows are replaced wholesale next run
        # identity -> hash of the member last handed to the writer (not the member: a copy of
        # every Istio row per cluster was most of a replica's memory after the build)
        self._emitted: dict[str, int] = {}
        self._lock = threading.Lock()
        self._validate: Debounced | None = None  # set by `start`
        self._dirty = False  # changed before `start`

    @property
    def resources(self) -> set[str]:
        """What must be listed before the first validation: the kinds and the context."""
        return set(self.kinds) | set(CONTEXT)

    @property
    def complete(self) -> bool:
        return self.listed >= self.resources

    def replace(self, resource: str, items: list[dict[str, Any]]) -> None:
        """A (re)list of one kind (by key) or context resource."""
        with self._lock:
            if resource == mesh.SERVICES:
                self.services = Table(map(mesh.service_slim, items))
            elif resource == mesh.NAMESPACES:
                self.namespaces = {mesh.namespace_name(o) for o in items}
            else:
                kind = self.kinds[resource][0]
                self.objects[resource] = Table(mesh.slim(kind, o) for o in items)
                self._relisted.add(resource)
            self.listed.add(resource)
        self.touch()

    def unavailable(self, resource: str) -> None:
        """Services or Namespaces cannot be listed: rows are built without validation."""
        with self._lock:
            self.context_ok = False
            self.listed.add(resource)
        self.touch()

    def event(self, resource: str, event_type: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if resource == mesh.NAMESPACES:
                if event_type == "DELETED":
                    self.namespaces.discard(mesh.namespace_name(obj))
                else:
                    self.namespaces.add(mesh.namespace_name(obj))
            else:
                table = self.services if resource == mesh.SERVICES else self.objects[resource]
                if event_type == "DELETED":
                    table.delete(key_of(obj))
                elif resource == mesh.SERVICES:
                    table.put(mesh.service_slim(obj))
                else:
                    table.put(mesh.slim(self.kinds[resource][0], obj))
        self.touch()

    def touch(self) -> None:
        """Recompute at the next chance (what was held back while not allowed to write)."""
        validate = self._validate
        if validate is None:
            self._dirty = True
        else:
            validate.mark()

    def start(self, stopped: Callable[[], bool], may_write: Callable[[], bool]) -> None:
        """Validate after changes, at most once per debounce window, once everything is listed
        (on the process's shared recompute pool, collector.debounce), until `stopped()`."""
        self._validate = Debounced(
            self.debounce_s,
            lambda: self.complete and may_write(),
            self.validate,
            (FleetscopeError, *redis_client.ERRORS),
            "re-validate Istio config",
            self.cluster,
            stopped,
        )
        if self._dirty:
            self._validate.mark()

    def validate(self) -> int:
        """Validate the whole config and hand the writer the rows that changed; returns their
        number (relisted kinds count whole)."""
        with self._lock:
            held = [
                mesh.Held(kind, api_version, obj)
                for key, (kind, api_version) in self.kinds.items()
                for obj in self.objects[key].objects()
            ]
            services = self.services.objects() if self.context_ok else None
            namespaces = set(self.namespaces) if self.context_ok else None
            relisted, self._relisted = self._relisted, set()
        members = mesh.members(self.cluster, held, services, namespaces)
        self.validations += 1
        new = {rows.identity(m): m for m in members}
        changed = 0
        by_kind: dict[str, list[str]] = {key: [] for key in relisted}
        for m in members:  # one pass, not one per relisted kind (all of them, the first time)
            mine = by_kind.get(rows.kind_of(m))
            if mine is not None:
                mine.append(m)
        for key in sorted(relisted):
            self._replace(key, by_kind[key])
            changed += len(by_kind[key])
        for identity, member in new.items():
            if rows.split_identity(identity)[1] not in relisted and self._emitted.get(
                identity
            ) != hash(member):
                self._change(store_events.Change(identity, member))
                changed += 1
        for identity in self._emitted.keys() - new.keys():
            if rows.split_identity(identity)[1] not in relisted:
                self._change(store_events.Change(identity, None))
                changed += 1
        self._emitted = {identity: hash(member) for identity, member in new.items()}
        if self._done is not None:
            self._done()
        return changed
