"""One cluster's Istio configuration as the Istio checks see it: each object parsed once into an
`Item`, host names resolved the way Istio (and Kiali) resolve them, and indexes built once per
validation (Services, ServiceEntry hosts, DestinationRule subsets, Gateways, PeerAuthentication
modes), so that each check is a dictionary lookup instead of a scan over every object. `Report`
collects the findings."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from common.kinds.status import Finding

DOMAIN = "svc.cluster.local"
EXPORT_TO_ANNOTATION = "networking.istio.io/exportTo"
# DestinationRule hosts that cover every service of the mesh (Istio's documented `*.local`).
MESH_WIDE_HOSTS = frozenset({"*", "*.local", "*.cluster.local", "*.svc.cluster.local"})
MTLS_ON = frozenset({"ISTIO_MUTUAL", "MUTUAL"})

Exported = frozenset[str] | None
"""The namespaces an object is visible in (its `exportTo`); None means every namespace."""
Peer = tuple[str, str, bool]
"""The PeerAuthentication deciding a server's mTLS mode: (mode, "ns/name", mesh-wide)."""
Key = tuple[str, str, str]
"""(namespace, kind, name): what findings are reported against."""


class Item(NamedTuple):
    """One object as the checks read it, parsed once."""

    key: Key
    ns: str
    name: str
    spec: dict[str, Any]
    created: str  # metadata.creationTimestamp (PeerAuthentication: the oldest one wins)

    @property
    def ref(self) -> str:
        return f"{self.ns}/{self.name}"


def item(kind: str, obj: dict[str, Any]) -> Item:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    spec = obj.get("spec")
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    created = str(meta.get("creationTimestamp") or "")
    return Item((ns, kind, name), ns, name, spec if isinstance(spec, dict) else {}, created)


_EMPTY: dict[str, Any] = {}


def dct(value: Any) -> dict[str, Any]:
    """`value` if it is a mapping, else an empty one (never to be written to)."""
    return value if isinstance(value, dict) else _EMPTY


def lst(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def exported(export_to: Iterable[str], owner: str) -> Exported:
    """`exportTo` (or the Service annotation) as a namespace set: `.` is the owner's namespace,
    `*` or nothing is everywhere, `~` is nowhere."""
    entries = list(export_to)
    if not entries or "*" in entries:
        return None
    return frozenset(owner if e == "." else e for e in entries if e != "~")


def visible(exp: Exported, viewer: str) -> bool:
    return exp is None or viewer in exp


def fqdn(host: str, namespace: str, namespaces: Collection[str]) -> str:
    """`host` as written in an object of `namespace`, fully qualified: a short name resolves in
    that namespace, `name.ns` when `ns` is a namespace of the cluster (as Kiali reads it),
    `name.ns.svc` and the FQDN as they are; anything else (external names, wildcards) as is."""
    h = host.lower()
    if h == "*":
        return h
    if "." not in h:
        return f"{h}.{namespace}.{DOMAIN}"
    parts = h.split(".")
    if len(parts) == 2 and (parts[1] == namespace or parts[1] in namespaces):
        return f"{h}.{DOMAIN}"
    if len(parts) == 3 and parts[2] == "svc":
        return f"{h}.cluster.local"
    return h


def host_namespace(fq: str) -> str | None:
    """The namespace of an in-cluster FQDN (`name.ns.svc.cluster.local`, `*.ns.svc...`)."""
    if not fq.endswith("." + DOMAIN):
        return None
    parts = fq[: -len(DOMAIN) - 1].split(".")
    return parts[1] if len(parts) == 2 else None


def suffixes(host: str) -> Iterator[str]:
    """`a.b.c` -> `.b.c`, `.c`: the parts a wildcard host `*.b.c` or `*.c` would stand for."""
    i = host.find(".")
    while i != -1:
        yield host[i:]
        i = host.find(".", i + 1)


def first_other(names: list[str], me: str) -> str | None:
    """The first entry of a sorted, de-duplicated list that is not `me`."""
    if not names:
        return None
    if names[0] != me:
        return names[0]
    return names[1] if len(names) > 1 else None


def labels_of(selector: Any, key: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in dct(dct(selector).get(key)).items()}


def mode_of(value: Any) -> str:
    return str(value or "").upper()


class Mesh:
    """The indexes of one cluster, built in one pass over its objects and Services."""

    def __init__(
        self,
        items: Mapping[str, list[Item]],
        services: Iterable[dict[str, Any]],
        namespaces: Iterable[str],
        root: str,
    ) -> None:
        self.namespaces = frozenset(namespaces)
        self.root = root
        self.services: dict[str, tuple[Exported, dict[str, str]]] = {}
        self.se_hosts: dict[str, list[Exported]] = {}
        self.se_wildcards: dict[str, list[Exported]] = {}  # ".example.com" for *.example.com
        self.service_entries = {(it.ns, it.name) for it in items.get("ServiceEntry", ())}
        self.gateways = {
            (it.ns, it.name) for k in ("Gateway", "K8sGateway") for it in items.get(k, ())
        }
        self.subsets: dict[str, list[tuple[Exported, frozenset[str]]]] = {}
        self.wildcard_subsets: dict[str, list[tuple[Exported, frozenset[str]]]] = {}
        self.tls_rules: dict[str, list[tuple[str, str]]] = {}  # wildcard DR host -> (mode, dr)
        self.mesh_peer: Peer | None = None
        self.namespace_peer: dict[str, Peer] = {}
        self.workload_peers: dict[str, list[tuple[dict[str, str], Peer]]] = {}
        for svc in services:
            self._add_service(svc)
        for se in items.get("ServiceEntry", ()):
            self._add_service_entry(se)
        for dr in items.get("DestinationRule", ()):
            self._add_destination_rule(dr)
        self._add_peer_authentications(items.get("PeerAuthentication", ()))

    def fqdn(self, host: str, namespace: str) -> str:
        return fqdn(host, namespace, self.namespaces)

    def has_service(self, namespace: str, name: str) -> bool:
        return f"{name}.{namespace}.{DOMAIN}".lower() in self.services

    def host_exists(self, fq: str, viewer: str) -> bool:
        """Whether a Service or ServiceEntry visible from `viewer` serves the FQDN `fq`
        (wildcard hosts are patterns, not references: they always pass)."""
        if fq.startswith("*"):
            return True
        svc = self.services.get(fq)
        if svc is not None and visible(svc[0], viewer):
            return True
        if any(visible(e, viewer) for e in self.se_hosts.get(fq, ())):
            return True
        wildcards = self.se_wildcards
        if not wildcards:
            return False
        return any(visible(e, viewer) for s in suffixes(fq) for e in wildcards.get(s, ()))

    def subset_exists(self, fq: str, subset: str, viewer: str) -> bool:
        """Whether a DestinationRule visible from `viewer`, for `fq` or a wildcard covering it,
        defines `subset`."""
        rules = self.subsets.get(fq, ())
        if any(subset in names and visible(exp, viewer) for exp, names in rules):
            return True
        wildcards = self.wildcard_subsets
        if not wildcards:
            return False
        rules = [rule for s in (*suffixes(fq), "") for rule in wildcards.get(s, ())]
        return any(subset in names and visible(exp, viewer) for exp, names in rules)

    def peer(self, fq: str) -> Peer | None:
        """The PeerAuthentication that sets the server-side mTLS mode for traffic to `fq`: a
        workload one whose selector the Service's selector implies, else the namespace-wide
        one, else the mesh-wide one (each overrides the one after it)."""
        if fq in MESH_WIDE_HOSTS:
            return self.mesh_peer
        ns = host_namespace(fq)
        if ns is None:
            return None
        svc = self.services.get(fq)
        if svc is not None and svc[1]:
            for labels, peer in self.workload_peers.get(ns, ()):
                if all(svc[1].get(k) == v for k, v in labels.items()):
                    return peer
        return self.namespace_peer.get(ns) or self.mesh_peer

    def _add_service(self, svc: dict[str, Any]) -> None:
        meta = dct(svc.get("metadata"))
        ns = meta.get("namespace") or ""
        exp, notes = None, meta.get("annotations")
        note = notes.get(EXPORT_TO_ANNOTATION) if isinstance(notes, dict) else None
        if isinstance(note, str) and note:
            exp = exported([e.strip() for e in note.split(",") if e.strip()], ns)
        spec = svc.get("spec")
        selector = dct(spec.get("selector")) if isinstance(spec, dict) else _EMPTY
        self.services[f"{meta.get('name') or ''}.{ns}.{DOMAIN}".lower()] = (exp, selector)

    def _add_service_entry(self, se: Item) -> None:
        exp = exported(strs(se.spec.get("exportTo")), se.ns)
        for host in strs(se.spec.get("hosts")):
            fq = self.fqdn(host, se.ns)
            if fq.startswith("*."):
                self.se_wildcards.setdefault(fq[1:], []).append(exp)
            else:
                self.se_hosts.setdefault(fq, []).append(exp)

    def _add_destination_rule(self, dr: Item) -> None:
        host = dr.spec.get("host")
        if not isinstance(host, str) or not host:
            return
        fq = self.fqdn(host, dr.ns)
        names = frozenset(str(dct(s).get("name")) for s in lst(dr.spec.get("subsets")))
        entry = (exported(strs(dr.spec.get("exportTo")), dr.ns), names)
        if fq.startswith("*"):
            self.wildcard_subsets.setdefault(fq[1:], []).append(entry)
            mode = mode_of(dct(dct(dr.spec.get("trafficPolicy")).get("tls")).get("mode"))
            self.tls_rules.setdefault(fq, []).append((mode, dr.ref))
        else:
            self.subsets.setdefault(fq, []).append(entry)

    def _add_peer_authentications(self, pas: Iterable[Item]) -> None:
        # Istio: of several mesh- or namespace-wide policies the oldest wins; UNSET inherits.
        for pa in sorted(pas, key=lambda pa: (pa.created, pa.name)):
            mode = mode_of(dct(pa.spec.get("mtls")).get("mode"))
            labels = labels_of(pa.spec.get("selector"), "matchLabels")
            peer = (mode, pa.ref, pa.ns == self.root and not labels)
            if labels:
                if mode not in ("", "UNSET"):
                    self.workload_peers.setdefault(pa.ns, []).append((labels, peer))
            elif pa.ns == self.root:
                if self.mesh_peer is None:
                    self.mesh_peer = peer
            else:
                self.namespace_peer.setdefault(pa.ns, peer)
        if self.mesh_peer is not None and self.mesh_peer[0] in ("", "UNSET"):
            self.mesh_peer = None
        self.namespace_peer = {
            ns: p for ns, p in self.namespace_peer.items() if p[0] not in ("", "UNSET")
        }


class Report:
    """Findings per object, de-duplicated; `result()` puts errors first, otherwise keeping the
    order the checks found them in."""

    def __init__(self) -> None:
        self.findings: dict[Key, list[Finding]] = {}

    def ensure(self, key: Key) -> None:
        self.findings.setdefault(key, [])

    def add(self, key: Key, level: str, code: str, message: str) -> None:
        found = self.findings.setdefault(key, [])
        finding = Finding(level, code, message)
        if finding not in found:
            found.append(finding)

    def result(self) -> dict[Key, list[Finding]]:
        return {
            k: sorted(v, key=lambda f: f.level != "error") if len(v) > 1 else v
            for k, v in self.findings.items()
        }

    def selectorless(self, items: list[Item], what: str, selects: Callable[[Item], bool]) -> None:
        """Kiali's KIA0002 (error): more than one object of a kind without a selector in one
        namespace (Istio then picks one of them, or none, by rules that are easy to miss)."""
        by_ns: dict[str, set[str]] = {}
        for it in items:
            if not selects(it):
                by_ns.setdefault(it.ns, set()).add(it.name)
        kind = items[0].key[1] if items else ""
        for ns, found in by_ns.items():
            names = sorted(found)
            for name in names:
                other = first_other(names, name)
                if other is not None:
                    msg = f'{kind} "{ns}/{other}" in this namespace also has no {what}'
                    self.add((ns, kind, name), "error", "KIA0002", msg)
