"""Istio objects of the generated fleet, shaped as users write them, and the status istiod adds
when its analysis is on.

istiod writes no status by default (`PILOT_ENABLE_STATUS`, `enableAnalysis`), so most objects
carry none; the `istiod-error` / `istiod-warning` variants carry `validationMessages` for
fleetscope's merge path. Objects kubesim breaks on purpose carry the annotation
`EXPECTED_FINDINGS`: the Kiali codes a validator should raise on them (comma-separated), so
tests can compare fleetscope's own findings with kubesim's intent.
"""

from __future__ import annotations

from typing import Any

from kubesim.gen.templates import metadata, num, slot

EXPECTED_FINDINGS = "kubesim.fleetscope.io/expected-findings"
INGRESS_SELECTOR = {"istio": "ingressgateway"}
DOCS = "https://istio.io/latest/docs/reference/config/analysis/"


Route = tuple[str, str, int]  # (destination host, subset or "", weight or 0)


def virtual_service(
    hosts: tuple[str, ...], gateways: tuple[str, ...], routes: tuple[Route, ...]
) -> dict[str, Any]:
    """One HTTP route over `routes`; `gateways` empty means the mesh only."""
    destinations = []
    for host, subset, weight in routes:
        dest: dict[str, Any] = {"host": host, "port": {"number": 80}}
        if subset:
            dest["subset"] = subset
        entry: dict[str, Any] = {"destination": dest}
        if weight:
            entry["weight"] = weight
        destinations.append(entry)
    spec: dict[str, Any] = {"hosts": list(hosts)}
    if gateways:
        spec["gateways"] = list(gateways)
    spec["http"] = [{"route": destinations}]
    return spec


def destination_rule(host: str, subsets: tuple[str, ...], tls_mode: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"host": host, "trafficPolicy": {"tls": {"mode": tls_mode}}}
    if subsets:
        spec["subsets"] = [{"name": s, "labels": {"version": s}} for s in subsets]
    return spec


def istio_gateway(host: str, credential: str) -> dict[str, Any]:
    server = {
        "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
        "hosts": [host],
        "tls": {"mode": "SIMPLE", "credentialName": credential},
    }
    return {"selector": dict(INGRESS_SELECTOR), "servers": [server]}


def authorization_policy(namespaces: tuple[str, ...]) -> dict[str, Any]:
    return {
        "selector": {"matchLabels": {"app": slot("name")}},
        "action": "ALLOW",
        "rules": [{"from": [{"source": {"namespaces": list(namespaces)}}]}],
    }


def peer_authentication(mode: str) -> dict[str, Any]:
    return {"mtls": {"mode": mode}}


def static_spec(kind: str) -> dict[str, Any]:
    return dict(STATIC_SPECS[kind])


STATIC_SPECS: dict[str, dict[str, Any]] = {
    "ServiceEntry": {
        "hosts": ["@@name@@.example.com"],
        "ports": [{"number": 443, "name": "https", "protocol": "TLS"}],
        "resolution": "DNS",
        "location": "MESH_EXTERNAL",
    },
    "Sidecar": {"egress": [{"hosts": ["./*", "istio-system/*"]}]},
    "WorkloadEntry": {"address": "10.0.0.1", "labels": {"app": slot("name")}},
    "RequestAuthentication": {
        "selector": {"matchLabels": {"app": slot("name")}},
        "jwtRules": [
            {"issuer": "https://issuer.example.com", "jwksUri": "https://issuer.example.com/jwks"}
        ],
    },
    "Telemetry": {"accessLogging": [{"providers": [{"name": "envoy"}]}]},
}


def istio_status(variant: str) -> dict[str, Any] | None:
    """What istiod's analysis writes (API form: `type.code`, upper-case level); None: no status."""
    if variant == "istiod-error":
        return {
            "conditions": [
                {
                    "type": "PassedAnalysis",
                    "status": "False",
                    "reason": "errorsFound",
                    "message": "1 Error found. See validationMessages field for details",
                    "lastTransitionTime": slot("ltt"),
                }
            ],
            "validationMessages": [
                {
                    "type": {"code": "IST0101", "name": "ReferencedResourceNotFound"},
                    "level": "ERROR",
                    "documentationUrl": f"{DOCS}ist0101/",
                }
            ],
            "observedGeneration": slot("gen"),
        }
    if variant == "istiod-warning":
        return {
            "validationMessages": [
                {
                    "type": {"code": "IST0104", "name": "GatewayPortNotOnWorkload"},
                    "level": "WARNING",
                    "documentationUrl": f"{DOCS}ist0104/",
                }
            ],
            "observedGeneration": slot("gen"),
        }
    return None


def istio_object(
    api_version: str,
    kind: str,
    spec: dict[str, Any],
    labels: dict[str, str],
    variant: str = "",
    expected: str = "",
) -> dict[str, Any]:
    """One Istio object; `expected` lists the Kiali codes of what kubesim broke in it."""
    meta = metadata(labels)
    meta["generation"] = num("gen")
    if expected:
        meta["annotations"] = {EXPECTED_FINDINGS: expected}
    shape: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    shape["spec"] = spec
    status = istio_status(variant)
    if status is not None:
        shape["status"] = status
    return shape
