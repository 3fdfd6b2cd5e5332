"""The Istio checks of networking.istio.io kinds: VirtualService, DestinationRule, Gateway,
ServiceEntry, Sidecar and WorkloadEntry. Each check reads parsed `Item`s and the cluster's
`Mesh` indexes and adds findings to a `Report` (codes and levels: docs/architecture.md)."""

from __future__ import annotations

import heapq
from typing import Any

from common.kinds.istio_mesh import (
    Exported,
    Item,
    Mesh,
    Report,
    dct,
    exported,
    first_other,
    labels_of,
    lst,
    mode_of,
    strs,
    suffixes,
)


def export_to(mesh: Mesh, report: Report, it: Item) -> None:
    """Kiali's KIA0005 (error): an `exportTo` entry naming no namespace of the cluster."""
    for ns in strs(it.spec.get("exportTo")):
        if ns not in (".", "*", "~") and ns not in mesh.namespaces:
            report.add(it.key, "error", "KIA0005", f'exportTo namespace "{ns}" not found')


# VirtualService ----------------------------------------------------------------------------


def virtual_services(mesh: Mesh, items: list[Item], report: Report) -> None:
    for it in items:
        refs, destinations = references(it.spec)
        for ref in refs:
            if ref == "mesh":
                continue
            gw = gateway_name(ref, it.ns)
            if gw not in mesh.gateways:
                report.add(it.key, "error", "KIA1102", f'gateway "{gw[0]}/{gw[1]}" not found')
        for dest in destinations:
            host, subset = dest.get("host"), dest.get("subset")
            if not isinstance(host, str) or not host:
                continue
            fq = mesh.fqdn(host, it.ns)
            if not mesh.host_exists(fq, it.ns):
                msg = f'host "{host}" matches no Service or ServiceEntry'
                report.add(it.key, "warning", "KIA1101", msg)
            if isinstance(subset, str) and subset and not mesh.subset_exists(fq, subset, it.ns):
                msg = f'subset "{subset}" of host "{host}" not found in any DestinationRule'
                report.add(it.key, "error", "KIA1107", msg)
        export_to(mesh, report, it)


def references(spec: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The gateways a VirtualService names (`gateways`, and `gateways` of http, tls and tcp
    matches), and its destinations (http, tls and tcp routes, http mirrors)."""
    refs, destinations = strs(spec.get("gateways")), []
    for section in ("http", "tls", "tcp"):
        for rule in lst(spec.get(section)):
            rule = dct(rule)
            for match in lst(rule.get("match")):
                refs += strs(dct(match).get("gateways"))
            destinations += [dct(dct(r).get("destination")) for r in lst(rule.get("route"))]
            if section == "http":
                if rule.get("mirror"):
                    destinations.append(dct(rule["mirror"]))
                destinations += [dct(dct(m).get("destination")) for m in lst(rule.get("mirrors"))]
    return (list(dict.fromkeys(refs)) if len(refs) > 1 else refs), destinations


def gateway_name(ref: str, namespace: str) -> tuple[str, str]:
    """Istio's reading of a gateway reference: `ns/name`, `./name`, `name`, or the legacy
    `name.ns[.svc.cluster.local]`."""
    if "/" in ref:
        ns, _, name = ref.partition("/")
        return (namespace if ns == "." else ns), name
    if "." in ref:
        name, _, rest = ref.partition(".")
        return rest.split(".")[0], name
    return namespace, ref


# DestinationRule ---------------------------------------------------------------------------


def destination_rules(mesh: Mesh, items: list[Item], report: Report) -> None:
    merged: dict[tuple[Any, ...], dict[str, list[str]]] = {}
    parts: list[tuple[Item, tuple[Any, ...], list[str], str]] = []
    for it in items:
        host = it.spec.get("host")
        if not isinstance(host, str) or not host:
            continue
        fq = mesh.fqdn(host, it.ns)
        if not mesh.host_exists(fq, it.ns):
            msg = f'host "{host}" matches no Service or ServiceEntry'
            report.add(it.key, "warning", "KIA0202", msg)
        policy = it.spec.get("trafficPolicy")
        if mode_of(dct(dct(policy).get("tls")).get("mode")) == "DISABLE":
            _disabled_mtls(mesh, report, it, host, fq)
        export_to(mesh, report, it)
        group, tokens = _merge_group(it, fq), _merge_tokens(it.spec)
        parts.append((it, group, tokens, host))
        for token in tokens:
            merged.setdefault(group, {}).setdefault(token, []).append(it.name)
    _duplicates(report, merged, parts)


def _disabled_mtls(mesh: Mesh, report: Report, it: Item, host: str, fq: str) -> None:
    """Kiali's KIA0207 / KIA0208 (error): clients told to send plain text to servers whose
    PeerAuthentication (namespace or workload / mesh-wide) accepts only mTLS."""
    peer = mesh.peer(fq)
    if peer is None or peer[0] != "STRICT":
        return
    _, pa, mesh_wide = peer
    if mesh_wide:
        msg = f'tls.mode DISABLE for "{host}" but mesh-wide PeerAuthentication "{pa}" is STRICT'
        report.add(it.key, "error", "KIA0208", msg)
    else:
        msg = f'tls.mode DISABLE for "{host}" but PeerAuthentication "{pa}" is STRICT'
        report.add(it.key, "error", "KIA0207", msg)


def _merge_group(it: Item, fq: str) -> tuple[Any, ...]:
    """Istio merges the DestinationRules of one namespace for one host with the same workload
    selector and exportTo: subsets are concatenated, the first top-level trafficPolicy wins."""
    selector = it.spec.get("workloadSelector")
    labels = tuple(sorted(labels_of(selector, "matchLabels").items())) if selector else ()
    exp = exported(strs(it.spec.get("exportTo")), it.ns) if it.spec.get("exportTo") else None
    return it.ns, fq, labels, None if exp is None else tuple(sorted(exp))


def _merge_tokens(spec: dict[str, Any]) -> list[str]:
    """What a DestinationRule contributes to a merge; the same token twice is dropped once."""
    tokens = [f'subset "{dct(s).get("name")}"' for s in lst(spec.get("subsets"))]
    return [*tokens, "trafficPolicy"] if "trafficPolicy" in spec else tokens


def _duplicates(
    report: Report,
    merged: dict[tuple[Any, ...], dict[str, list[str]]],
    parts: list[tuple[Item, tuple[Any, ...], list[str], str]],
) -> None:
    """Kiali's KIA0201 (warning on each): what one DestinationRule sets is silently dropped
    because another one of the same merge sets it too."""
    for by_token in merged.values():
        for token, names in by_token.items():
            by_token[token] = sorted(set(names))
    for it, group, tokens, host in parts:
        for token in tokens:
            other = first_other(merged[group][token], it.name)
            if other is not None:
                msg = f'DestinationRule "{it.ns}/{other}" also sets {token} for host "{host}"'
                report.add(it.key, "warning", "KIA0201", msg)
                break


# Gateway -----------------------------------------------------------------------------------


def gateways(mesh: Mesh, items: list[Item], report: Report) -> None:
    """Kiali's KIA0301 (warning on each): two Gateways on the same workloads (selector), port
    and bind address exposing one host: `*` overlaps every host, `*.example.com` the hosts
    under it; the `ns/` part of a host only says which VirtualServices may bind."""
    groups: dict[tuple[Any, ...], _HostIndex] = {}
    servers: list[tuple[Item, tuple[Any, ...], str, Any]] = []
    for it in items:
        selector = tuple(sorted((str(k), str(v)) for k, v in dct(it.spec.get("selector")).items()))
        for server in lst(it.spec.get("servers")):
            port = dct(dct(server).get("port")).get("number")
            group = (selector, str(port), str(dct(server).get("bind") or ""))
            for host in strs(dct(server).get("hosts")):
                host = host.rpartition("/")[2].lower()
                groups.setdefault(group, _HostIndex()).add(host, it.ref)
                servers.append((it, group, host, port))
    for index in groups.values():
        index.freeze()
    for it, group, host, port in servers:
        other = groups[group].overlap(host, it.ref)
        if other is not None:
            msg = f'host "{host}" on port {port} is also exposed by Gateway "{other}"'
            report.add(it.key, "warning", "KIA0301", msg)


class _HostIndex:
    """The hosts of one (selector, port, bind) group, indexed so that finding another Gateway
    with an overlapping host costs a few lookups per host."""

    def __init__(self) -> None:
        self.exact: dict[str, set[str]] = {}
        self.under: dict[str, set[str]] = {}  # "*.x" -> gateways with a host under .x
        self.every: set[str] = set()
        self.wildcards = False
        self.smallest: dict[str, list[str]] = {}

    def add(self, host: str, gw: str) -> None:
        self.exact.setdefault(host, set()).add(gw)
        self.every.add(gw)
        self.wildcards = self.wildcards or host.startswith("*")

    def freeze(self) -> None:
        if not self.wildcards:
            return  # plain hosts overlap only when equal
        for host, gws in self.exact.items():
            if not host.startswith("*"):
                for s in suffixes(host):
                    self.under.setdefault("*" + s, set()).update(gws)

    def overlap(self, host: str, gw: str) -> str | None:
        if not self.wildcards:
            return self._other(host, self.exact.get(host), gw)
        if host == "*":
            return self._other("every:", self.every, gw)
        found = [self._other(host, self.exact.get(host), gw)]
        found.append(self._other("*", self.exact.get("*"), gw))
        if host.startswith("*."):
            found.append(self._other("under:" + host, self.under.get(host), gw))
        else:
            found.extend(self._other("*" + s, self.exact.get("*" + s), gw) for s in suffixes(host))
        return min((o for o in found if o is not None), default=None)

    def _other(self, name: str, gateways: set[str] | None, me: str) -> str | None:
        """The first (sorted) gateway of a set that is not `me`; the set's two smallest are
        computed once, however many hosts ask."""
        if not gateways:
            return None
        two = self.smallest.get(name)
        if two is None:
            two = self.smallest[name] = heapq.nsmallest(2, gateways)
        return first_other(two, me)


# ServiceEntry ------------------------------------------------------------------------------


def service_entries(mesh: Mesh, items: list[Item], report: Report) -> None:
    groups: dict[tuple[str, Any], list[tuple[str, Exported, str]]] = {}
    for it in items:
        endpoints = lst(it.spec.get("endpoints"))
        if endpoints and mode_of(it.spec.get("resolution")) in ("", "NONE"):
            msg = "resolution NONE (the default) takes no endpoints"
            report.add(it.key, "error", "FS1201", msg)
        if endpoints and it.spec.get("workloadSelector") is not None:
            msg = "only one of workloadSelector and endpoints may be set"
            report.add(it.key, "error", "FS1202", msg)
        export_to(mesh, report, it)
        exp = exported(strs(it.spec.get("exportTo")), it.ns)
        if exp is not None and not exp:
            continue  # exported nowhere: conflicts with nothing
        for port in lst(it.spec.get("ports")):
            number, protocol = dct(port).get("number"), mode_of(dct(port).get("protocol"))
            for host in strs(it.spec.get("hosts")):
                group = groups.setdefault((mesh.fqdn(host, it.ns), number), [])
                group.append((it.ref, exp, protocol))
    for (host, number), entries in groups.items():
        if len({e[0] for e in entries}) > 1:
            _duplicate_service_entries(report, host, number, entries)


def _duplicate_service_entries(
    report: Report, host: str, number: Any, entries: list[tuple[str, Exported, str]]
) -> None:
    """Kiali's KIA1211 / KIA1212 (protocols differ) (warning on each): one host and port
    defined by two ServiceEntries visible in a common namespace."""
    everywhere = sorted({se for se, exp, _ in entries if exp is None})
    every = sorted({se for se, _, _ in entries})
    by_ns: dict[str, set[str]] = {}
    for se, exp, _ in entries:
        for ns in exp or ():
            by_ns.setdefault(ns, set()).add(se)
    in_ns = {ns: sorted(names) for ns, names in by_ns.items()}
    conflict = len({protocol for _, _, protocol in entries}) > 1
    code, text = ("KIA1212", " with another protocol") if conflict else ("KIA1211", "")
    for se, exp, _ in entries:
        if exp is None:
            other = first_other(every, se)
        else:
            found = [first_other(everywhere, se)] + [first_other(in_ns[n], se) for n in exp]
            other = min((o for o in found if o is not None), default=None)
        if other is not None:
            ns, _, name = se.partition("/")
            msg = f'host "{host}" port {number} is also defined by ServiceEntry "{other}"{text}'
            report.add((ns, "ServiceEntry", name), "warning", code, msg)


# Sidecar, WorkloadEntry --------------------------------------------------------------------


def sidecars(mesh: Mesh, items: list[Item], report: Report) -> None:
    def selects(it: Item) -> bool:
        return bool(labels_of(it.spec.get("workloadSelector"), "labels"))

    report.selectorless(items, "workloadSelector", selects)
    for it in items:
        if it.ns == mesh.root and selects(it):
            msg = "the root namespace's Sidecar is the mesh default: it takes no workloadSelector"
            report.add(it.key, "warning", "KIA1006", msg)
        for egress in lst(it.spec.get("egress")):
            for host in strs(dct(egress).get("hosts")):
                scope, _, dns = host.partition("/")
                if not dns or scope == "~" or dns.startswith("*"):
                    continue  # wildcards import sets of hosts, not one
                if not mesh.host_exists(mesh.fqdn(dns, it.ns), it.ns):
                    msg = f'egress host "{host}" matches no Service or ServiceEntry'
                    report.add(it.key, "warning", "KIA1004", msg)


def workload_entries(mesh: Mesh, items: list[Item], report: Report) -> None:
    """Istio's own validation errors (istiod ignores such an entry)."""
    for it in items:
        address = str(it.spec.get("address") or "")
        if not address and not it.spec.get("network"):
            report.add(it.key, "error", "FS1301", "address is required (no network is set)")
        if address.startswith("unix://") and dct(it.spec.get("ports")):
            msg = f'unix socket address "{address}" takes no ports'
            report.add(it.key, "error", "FS1302", msg)
