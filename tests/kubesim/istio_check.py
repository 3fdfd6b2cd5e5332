"""A small, independent Istio validator for the tests (Kiali's semantics for the checks
fleetscope makes), so kubesim's generated config can be judged without kubesim's own code:
which objects are broken, and with which Kiali codes.

Hosts: `name` resolves in the object's namespace, `name.ns` and `name.ns.svc.cluster.local`
name a Service; other hosts must match a ServiceEntry host (wildcards included).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace, name)
SUFFIX = ".svc.cluster.local"


def fqdn(host: str, namespace: str) -> str:
    if host.endswith(SUFFIX) or host.startswith("*"):
        return host
    parts = host.split(".")
    if len(parts) == 1:
        return f"{host}.{namespace}{SUFFIX}"
    if len(parts) == 2:
        return f"{host}{SUFFIX}"
    return host


def host_matches(pattern: str, host: str) -> bool:
    if pattern == "*" or pattern == host:
        return True
    return pattern.startswith("*.") and host.endswith(pattern[1:])


class Mesh:
    """The Istio objects, Services and namespaces of one cluster (objects by kind)."""

    def __init__(self, objects: dict[str, list[Obj]], namespaces: set[str]) -> None:
        self.by_kind = objects
        self.namespaces = namespaces
        self.services = {
            f"{o['metadata']['name']}.{o['metadata']['namespace']}{SUFFIX}"
            for o in objects.get("Service", [])
        }
        self.entry_hosts = [h for o in objects.get("ServiceEntry", []) for h in o["spec"]["hosts"]]
        # A VirtualService may name an Istio Gateway or a Gateway API one (istioctl analyze).
        self.gateways = {
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for kind in ("Gateway", "K8sGateway")
            for o in objects.get(kind, [])
        }
        self.findings: dict[Key, set[str]] = defaultdict(set)

    def resolves(self, host: str, namespace: str) -> bool:
        name = fqdn(host, namespace)
        if name.endswith(SUFFIX):
            if name.startswith("*."):
                return any(host_matches(name, s) for s in self.services)
            return name in self.services
        return any(host_matches(p, name) for p in self.entry_hosts)

    def flag(self, kind: str, obj: Obj, code: str) -> None:
        meta = obj["metadata"]
        self.findings[(kind, meta["namespace"], meta["name"])].add(code)

    def check(self) -> dict[Key, set[str]]:
        self._virtual_services()
        self._destination_rules()
        self._selectorless("Sidecar", "KIA0002")
        self._gateway_hosts()
        self._authorization_policies()
        return dict(self.findings)

    def _subsets(self, host: str, namespace: str) -> set[str]:
        found: set[str] = set()
        for dr in self.by_kind.get("DestinationRule", []):
            dr_ns = dr["metadata"]["namespace"]
            if fqdn(dr["spec"]["host"], dr_ns) == fqdn(host, namespace):
                found |= {s["name"] for s in dr["spec"].get("subsets", [])}
        return found

    def _virtual_services(self) -> None:
        for vs in self.by_kind.get("VirtualService", []):
            ns = vs["metadata"]["namespace"]
            for gw in vs["spec"].get("gateways", []):
                if gw == "mesh":
                    continue
                gw_ns, _, gw_name = gw.rpartition("/")
                if (gw_ns or ns, gw_name) not in self.gateways:
                    self.flag("VirtualService", vs, "KIA1102")
            for http in vs["spec"].get("http", []):
                for route in http.get("route", []):
                    dest = route["destination"]
                    if not self.resolves(dest["host"], ns):
                        self.flag("VirtualService", vs, "KIA1101")
                    if dest.get("subset") and dest["subset"] not in self._subsets(dest["host"], ns):
                        self.flag("VirtualService", vs, "KIA1107")

    def _peer_mode(self, namespace: str) -> str:
        """The mTLS mode in force for `namespace`: its own PeerAuthentication, else the mesh's."""
        for ns in (namespace, "istio-system"):
            for pa in self.by_kind.get("PeerAuthentication", []):
                meta = pa["metadata"]
                if meta["namespace"] == ns and not pa["spec"].get("selector"):
                    mode: str = pa["spec"]["mtls"]["mode"]
                    return ("ns:" if ns == namespace else "mesh:") + mode
        return ""

    def _destination_rules(self) -> None:
        seen: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for dr in self.by_kind.get("DestinationRule", []):
            ns, host = dr["metadata"]["namespace"], dr["spec"]["host"]
            seen[(ns, fqdn(host, ns))].append(dr)
            if not self.resolves(host, ns):
                self.flag("DestinationRule", dr, "KIA0202")
            tls = dr["spec"].get("trafficPolicy", {}).get("tls", {}).get("mode")
            mode = self._peer_mode(ns)
            if tls == "DISABLE" and mode == "ns:STRICT":
                self.flag("DestinationRule", dr, "KIA0207")
            elif tls == "DISABLE" and mode == "mesh:STRICT":
                self.flag("DestinationRule", dr, "KIA0208")
        for same in seen.values():
            for dr in same if len(same) > 1 else ():
                self.flag("DestinationRule", dr, "KIA0201")

    def _selectorless(self, kind: str, code: str) -> None:
        by_ns: dict[str, list[Obj]] = defaultdict(list)
        for obj in self.by_kind.get(kind, []):
            if not obj["spec"].get("workloadSelector"):
                by_ns[obj["metadata"]["namespace"]].append(obj)
        for objs in by_ns.values():
            for obj in objs if len(objs) > 1 else ():
                self.flag(kind, obj, code)

    def _gateway_hosts(self) -> None:
        servers: list[tuple[Obj, str, int, str]] = []
        for gw in self.by_kind.get("Gateway", []):
            selector = repr(sorted(gw["spec"].get("selector", {}).items()))
            for server in gw["spec"]["servers"]:
                for host in server["hosts"]:
                    servers.append((gw, selector, server["port"]["number"], host))
        for i, (gw, sel, port, host) in enumerate(servers):
            for other, o_sel, o_port, o_host in servers[i + 1 :]:
                if other is gw or (sel, port) != (o_sel, o_port):
                    continue
                both_wild = host.startswith("*.") and o_host.startswith("*.")
                if not both_wild and (host_matches(host, o_host) or host_matches(o_host, host)):
                    self.flag("Gateway", gw, "KIA0301")
                    self.flag("Gateway", other, "KIA0301")

    def _authorization_policies(self) -> None:
        for ap in self.by_kind.get("AuthorizationPolicy", []):
            for rule in ap["spec"].get("rules", []):
                for src in rule.get("from", []):
                    for ns in src["source"].get("namespaces", []):
                        if ns not in self.namespaces:
                            self.flag("AuthorizationPolicy", ap, "KIA0101")
