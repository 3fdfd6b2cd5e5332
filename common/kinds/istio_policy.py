"""The Istio checks of security.istio.io and telemetry.istio.io kinds: AuthorizationPolicy,
PeerAuthentication, RequestAuthentication and Telemetry (codes and levels:
docs/architecture.md)."""

from __future__ import annotations

from common.kinds.istio_mesh import (
    DOMAIN,
    MESH_WIDE_HOSTS,
    MTLS_ON,
    Item,
    Mesh,
    Report,
    dct,
    labels_of,
    lst,
    mode_of,
    strs,
)

_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE")


def target_refs(mesh: Mesh, report: Report, it: Item) -> None:
    """FS0001 (error): a `targetRef(s)` naming a Service or ServiceEntry that does not exist
    (the policy then applies to nothing). Gateway targets are not checked."""
    refs = [dct(it.spec.get("targetRef"))] + [dct(r) for r in lst(it.spec.get("targetRefs"))]
    for ref in refs:
        name, ns = str(ref.get("name") or ""), str(ref.get("namespace") or it.ns)
        kind, group = ref.get("kind"), ref.get("group") or ""
        if kind == "Service" and group == "" and name and not mesh.has_service(ns, name):
            report.add(it.key, "error", "FS0001", f'targetRef Service "{ns}/{name}" not found')
        is_se = kind == "ServiceEntry" and group == "networking.istio.io"
        if is_se and name and (ns, name) not in mesh.service_entries:
            msg = f'targetRef ServiceEntry "{ns}/{name}" not found'
            report.add(it.key, "error", "FS0001", msg)


def authorization_policies(mesh: Mesh, items: list[Item], report: Report) -> None:
    for it in items:
        target_refs(mesh, report, it)
        for rule in lst(it.spec.get("rules")):
            for src in lst(dct(rule).get("from")):
                source = dct(dct(src).get("source"))
                for ns in strs(source.get("namespaces")) + strs(source.get("notNamespaces")):
                    if "*" not in ns and ns not in mesh.namespaces:
                        report.add(it.key, "warning", "KIA0101", f'namespace "{ns}" not found')
            for dst in lst(dct(rule).get("to")):
                operation = dct(dct(dst).get("operation"))
                for method in strs(operation.get("methods")) + strs(operation.get("notMethods")):
                    if not _http_method(method):
                        msg = f'method "{method}" is not an HTTP method'
                        report.add(it.key, "warning", "KIA0102", msg)


def _http_method(method: str) -> bool:
    """Kiali's reading: an HTTP method, `*`, or a prefix (`GE*`) or suffix (`*ET`) of one."""
    m = method.strip().upper()
    if m == "*":
        return True
    if m.endswith("*") and not m.startswith("*"):
        return any(x.startswith(m[:-1]) for x in _HTTP_METHODS)
    if m.startswith("*") and not m.endswith("*"):
        return any(x.endswith(m[1:]) for x in _HTTP_METHODS)
    return m in _HTTP_METHODS


def peer_authentications(mesh: Mesh, items: list[Item], report: Report) -> None:
    def selects(it: Item) -> bool:
        return bool(labels_of(it.spec.get("selector"), "matchLabels"))

    report.selectorless(items, "selector", selects)
    for it in items:
        if dct(it.spec.get("portLevelMtls")) and not selects(it):
            report.add(it.key, "error", "FS0501", "portLevelMtls requires a selector")
        if not selects(it) and mode_of(dct(it.spec.get("mtls")).get("mode")) == "DISABLE":
            _mtls_required(mesh, report, it)


def _mtls_required(mesh: Mesh, report: Report, it: Item) -> None:
    """Kiali's KIA0506 / KIA0505 (error): mTLS is disabled mesh- or namespace-wide, yet a
    DestinationRule for those hosts makes clients send it (a namespace-wide DestinationRule
    with DISABLE excuses the namespace from a mesh-wide one)."""
    mesh_on = [dr for mode, dr in _mesh_rules(mesh) if mode in MTLS_ON]
    if it.ns == mesh.root:
        if mesh_on:
            msg = f'mTLS is disabled mesh-wide but DestinationRule "{mesh_on[0]}" enables it'
            report.add(it.key, "error", "KIA0506", msg)
        return
    rules = mesh.tls_rules.get(f"*.{it.ns}.{DOMAIN}", [])
    on = [dr for mode, dr in rules if mode in MTLS_ON]
    if not on and not any(mode == "DISABLE" for mode, _ in rules):
        on = mesh_on
    if on:
        msg = f'mTLS is disabled in namespace "{it.ns}" but DestinationRule "{on[0]}" enables it'
        report.add(it.key, "error", "KIA0505", msg)


def _mesh_rules(mesh: Mesh) -> list[tuple[str, str]]:
    return [rule for host in sorted(MESH_WIDE_HOSTS) for rule in mesh.tls_rules.get(host, [])]


def request_authentications(mesh: Mesh, items: list[Item], report: Report) -> None:
    for it in items:
        target_refs(mesh, report, it)


def telemetries(mesh: Mesh, items: list[Item], report: Report) -> None:
    def selects(it: Item) -> bool:
        targeted = it.spec.get("targetRef") or it.spec.get("targetRefs")
        return bool(labels_of(it.spec.get("selector"), "matchLabels")) or bool(targeted)

    report.selectorless(items, "selector or targetRef", selects)
    for it in items:
        target_refs(mesh, report, it)
