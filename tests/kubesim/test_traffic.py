"""The generated traffic objects (Istio, Gateway API, Kuadrant, Services): realistic shares for
a seed, every breakage and failing condition present at the demo's size in every cluster, and
objects that agree with each other as the upstream controllers and Kiali would judge them —
healthy ones genuinely valid, broken ones broken exactly as their annotation or status says.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from common.kinds.status import is_suspended
from kubesim.catalog import Catalog
from kubesim.gen.fleet import PRESETS, GeneratedFleet, generate_fleet
from kubesim.gen.istio_shapes import EXPECTED_FINDINGS
from kubesim.store import ClusterStore
from tests.kubesim.istio_check import Mesh

Obj = dict[str, Any]
GW = "gateway.networking.k8s.io"


def objects(fleet: GeneratedFleet, cluster: str) -> dict[str, list[Obj]]:
    """A generated cluster's objects by kind (the Gateway API Gateway as `K8sGateway`)."""
    store = ClusterStore(cluster, Catalog.default())
    fleet.load(cluster, store)
    out: dict[str, list[Obj]] = {}
    for res in store.catalog:
        table = store.tables.get(res.key)
        kind = "K8sGateway" if res.kind == "Gateway" and res.group == GW else res.kind
        out[kind] = [json.loads(raw) for raw in table.items.values()] if table else []
    return out


def demo_fleet() -> GeneratedFleet:
    clusters, namespaces = PRESETS["S"]  # what `fleetscope demo` serves (seed 1)
    return generate_fleet(clusters, namespaces, seed=1)


@pytest.fixture(scope="module")
def demo() -> dict[str, dict[str, list[Obj]]]:
    fleet = demo_fleet()
    return {c: objects(fleet, c) for c in fleet.cluster_names}


@pytest.fixture(scope="module")
def big() -> dict[str, list[Obj]]:
    """One cluster of fleet L's size, no showcase bias in the shares beyond 30 namespaces."""
    return objects(generate_fleet(1, 2000, seed=3), "cluster-000")


def key(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


def expected(obj: Obj) -> set[str]:
    text = (obj["metadata"].get("annotations") or {}).get(EXPECTED_FINDINGS, "")
    return set(text.split(",")) - {""}


ISTIO = (
    "VirtualService",
    "DestinationRule",
    "Gateway",
    "Sidecar",
    "AuthorizationPolicy",
    "PeerAuthentication",
    "ServiceEntry",
)


def istio_verdicts(objs: dict[str, list[Obj]]) -> Iterator[tuple[str, Obj, set[str], set[str]]]:
    """(kind, object, what the independent validator finds, what kubesim meant to break)."""
    namespaces = {o["metadata"]["name"] for o in objs["Namespace"]}
    findings = Mesh(objs, namespaces).check()
    for kind in ISTIO:
        for obj in objs[kind]:
            ns, name = key(obj)
            yield kind, obj, findings.get((kind, ns, name), set()), expected(obj)


# -- Istio: valid unless broken on purpose ----------------------------------------------


def test_istio_objects_are_broken_exactly_as_annotated(
    demo: dict[str, dict[str, list[Obj]]], big: dict[str, list[Obj]]
) -> None:
    for objs in [*demo.values(), big]:
        for kind, obj, found, meant in istio_verdicts(objs):
            assert found == meant, (kind, key(obj), found, meant)


def test_every_istio_breakage_in_every_demo_cluster(demo: dict[str, dict[str, list[Obj]]]) -> None:
    codes = {"KIA0002", "KIA0101", "KIA0201", "KIA0202", "KIA0301", "KIA1101", "KIA1102", "KIA1107"}
    mtls = {"KIA0207", "KIA0208"}
    for cluster, objs in demo.items():
        seen: set[str] = set()
        for _, _, found, _ in istio_verdicts(objs):
            seen |= found
        assert codes <= seen and seen & mtls, (cluster, codes - seen)
        vs_gateways = [g for v in objs["VirtualService"] for g in v["spec"].get("gateways", [])]
        assert "ingress" in vs_gateways and "istio-system/ingressgateway" in vs_gateways
        assert "istio-system/public" in vs_gateways  # a Gateway API Gateway: valid, no KIA1102
    assert (
        set().union(*(found for o in demo.values() for *_, found, _ in istio_verdicts(o))) >= mtls
    )


def test_istio_mostly_without_status_some_with_istiod_messages(
    big: dict[str, list[Obj]],
) -> None:
    levels: Counter[str] = Counter()
    for kind in ISTIO:
        for obj in big[kind]:
            messages = (obj.get("status") or {}).get("validationMessages", [])
            levels[messages[0]["level"] if messages else "none"] += 1
    total = sum(levels.values())
    assert levels["none"] / total > 0.95
    assert 0.003 < levels["ERROR"] / total < 0.02 and 0.01 < levels["WARNING"] / total < 0.04


def test_permissive_namespace_may_disable_mtls_under_a_strict_mesh(
    demo: dict[str, dict[str, list[Obj]]],
) -> None:
    """The trap a validator must not fall into: a namespace-wide PERMISSIVE PeerAuthentication
    overrides the mesh's STRICT, so a DestinationRule there may DISABLE mTLS."""
    found = 0
    for objs in demo.values():
        mesh = [p for p in objs["PeerAuthentication"] if key(p) == ("istio-system", "default")]
        permissive = {
            key(p)[0]
            for p in objs["PeerAuthentication"]
            if p["spec"]["mtls"]["mode"] == "PERMISSIVE"
        }
        for dr in objs["DestinationRule"]:
            tls = dr["spec"]["trafficPolicy"]["tls"]["mode"]
            if tls == "DISABLE" and key(dr)[0] in permissive - {"istio-system"}:
                assert mesh[0]["spec"]["mtls"]["mode"] in ("STRICT", "PERMISSIVE")
                assert not expected(dr) & {"KIA0207", "KIA0208"}
                found += 1
    assert found >= len(demo)


# -- Services ------------------------------------------------------------------------------


def test_services_behind_most_hosts(big: dict[str, list[Obj]]) -> None:
    services = {key(s) for s in big["Service"]}
    hosts: Counter[bool] = Counter()
    for vs in big["VirtualService"]:
        ns = key(vs)[0]
        for http in vs["spec"]["http"]:
            for route in http["route"]:
                name = route["destination"]["host"].split(".")[0]
                hosts[(ns, name) in services] += 1
    missing = hosts[False] / (hosts[True] + hosts[False])
    assert 0.01 < missing < 0.06, missing
    app_namespaces = 2000
    assert len(big["Service"]) < 1.2 * app_namespaces  # ~1 per host, not more
    forms = Counter(
        route["destination"]["host"].count(".")
        for vs in big["VirtualService"]
        for http in vs["spec"]["http"]
        for route in http["route"]
    )
    assert forms[0] and forms[1] and forms[4], forms  # short, name.ns, FQDN


# -- Gateway API ---------------------------------------------------------------------------


def listeners_of(gateway: Obj) -> dict[str, Obj]:
    return {lst["name"]: lst for lst in gateway["spec"]["listeners"]}


def test_routes_status_agrees_with_gateways_services_and_grants(
    demo: dict[str, dict[str, list[Obj]]], big: dict[str, list[Obj]]
) -> None:
    for objs in [*demo.values(), big]:
        gateways = {key(g): g for g in objs["K8sGateway"]}
        services = {key(s) for s in objs["Service"]}
        grants = {
            (key(g)[0], f["namespace"]) for g in objs["ReferenceGrant"] for f in g["spec"]["from"]
        }
        attached: Counter[tuple[str, str, str]] = Counter()
        for kind in ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"):
            for route in objs[kind]:
                check_route(route, gateways, services, grants, attached)
        for gw_key, gw in gateways.items():
            for status in gw.get("status", {}).get("listeners", []):
                want = attached[(*gw_key, status["name"])]
                assert status["attachedRoutes"] == want, (gw_key, status["name"])


def check_route(
    route: Obj,
    gateways: dict[tuple[str, str], Obj],
    services: set[tuple[str, str]],
    grants: set[tuple[str, str]],
    attached: Counter[tuple[str, str, str]],
) -> None:
    ns = key(route)[0]
    backend = route["spec"]["rules"][0]["backendRefs"][0]
    b_ns = backend.get("namespace", ns)
    if b_ns != ns and (b_ns, ns) not in grants:
        refs = "RefNotPermitted"
    else:
        refs = "ResolvedRefs" if (b_ns, backend["name"]) in services else "BackendNotFound"
    parents = [p for p in route.get("status", {}).get("parents", []) if "group" in p["parentRef"]]
    for entry in parents:
        ref = entry["parentRef"]
        gw_key = (ref.get("namespace", ns), ref["name"])
        listeners = listeners_of(gateways[gw_key])
        conds = {c["type"]: c for c in entry["conditions"]}
        assert entry["controllerName"] == "istio.io/gateway-controller"
        assert conds["ResolvedRefs"]["reason"] == refs, (key(route), refs)
        section = ref.get("sectionName")
        if section and section not in listeners:
            assert conds["Accepted"]["reason"] == "NoMatchingParent"
            continue
        chosen = [listeners[section]] if section else list(listeners.values())
        chosen = [lst for lst in chosen if route["kind"] in kinds_of(lst)]
        allowed = [
            lst
            for lst in chosen
            if lst["allowedRoutes"]["namespaces"]["from"] == "All" or gw_key[0] == ns
        ]
        if not allowed:
            assert conds["Accepted"]["reason"] == "NotAllowedByListeners"
            continue
        assert conds["Accepted"]["status"] == "True", key(route)
        for lst in allowed:
            attached[(*gw_key, lst["name"])] += 1
    managed = [
        p
        for p in route["spec"]["parentRefs"]
        if gateways[(p.get("namespace", ns), p["name"])]["spec"]["gatewayClassName"] == "istio"
    ]
    assert [e["parentRef"] for e in parents] == managed  # none for parents no controller handles
    if not managed:
        assert "status" not in route


def kinds_of(listener: Obj) -> set[str]:
    kinds = listener["allowedRoutes"].get("kinds")
    if kinds:
        return {k["kind"] for k in kinds}
    return {"HTTPRoute", "GRPCRoute"} if listener["protocol"] in ("HTTP", "HTTPS") else set()


def test_gateway_api_conditions_follow_gateway_api_conventions(
    demo: dict[str, dict[str, list[Obj]]],
) -> None:
    for objs in demo.values():
        classes = {key(c)[1]: c for c in objs["GatewayClass"]}
        assert conditions(classes["istio"])["Accepted"]["status"] == "True"
        assert conditions(classes["istio"])["SupportedVersion"]["status"] == "True"
        assert all(key(c)[0] == "" for c in objs["GatewayClass"])  # cluster-scoped
        for gw in objs["K8sGateway"]:
            conds = conditions(gw)
            gen = gw["metadata"]["generation"]
            if (
                gw["spec"]["gatewayClassName"] not in classes
                or classes[gw["spec"]["gatewayClassName"]]["spec"]["controllerName"]
                != "istio.io/gateway-controller"
            ):
                assert conds["Accepted"]["reason"] == "Pending" and "listeners" not in gw["status"]
                continue
            for cond in [*conds.values()] + [
                c for lst in gw["status"]["listeners"] for c in lst["conditions"]
            ]:
                assert cond["observedGeneration"] in (gen, gen - 1)
            names = [lst["name"] for lst in gw["status"]["listeners"]]
            assert names == [lst["name"] for lst in gw["spec"]["listeners"]]


def reasons(objs: dict[str, list[Obj]]) -> set[str]:
    """Every failing or pending condition reason, and markers for status shapes."""
    seen: set[str] = set()
    for kind in ("GatewayClass", "K8sGateway"):
        for obj in objs[kind]:
            for cond in conditions(obj).values():
                if cond["status"] != "True" and cond["type"] in ("Accepted", "Programmed"):
                    seen.add(f"{kind}:{cond['type']}:{cond['reason']}")
                if cond.get("observedGeneration", 0) < obj["metadata"]["generation"]:
                    seen.add(f"{kind}:behind")
            for lst in (obj.get("status") or {}).get("listeners", []):
                for cond in lst["conditions"]:
                    bad = cond["status"] == ("True" if cond["type"] == "Conflicted" else "False")
                    if bad:
                        seen.add(f"listener:{cond['type']}:{cond['reason']}")
    for kind in ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"):
        for obj in objs[kind]:
            if "status" not in obj:
                seen.add("route:no-status")
            for entry in (obj.get("status") or {}).get("parents", []):
                for cond in entry["conditions"]:
                    if cond["status"] == "False":
                        seen.add(f"route:{cond['type']}:{cond['reason']}")
                if "namespace" in entry["parentRef"] and "group" in entry["parentRef"]:
                    seen.add("route:cross-namespace-parent")
            if "namespace" in obj["spec"]["rules"][0]["backendRefs"][0]:
                seen.add("route:cross-namespace-backend")
    for kind in ("AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy"):
        for obj in objs[kind]:
            conds = conditions(obj)
            if not conds:
                seen.add("policy:no-status")
            for cond in conds.values():
                if cond["status"] == "False":
                    seen.add(f"policy:{cond['type']}:{cond['reason']}")
                if cond.get("observedGeneration", 1 << 30) < obj["metadata"]["generation"]:
                    seen.add("policy:stale")
                if "partially" in cond["message"]:
                    seen.add("policy:partial")
    return seen


GATEWAY_VARIANTS = {
    "GatewayClass:Accepted:InvalidParameters",
    "GatewayClass:Accepted:Pending",
    "K8sGateway:Accepted:Pending",
    "K8sGateway:Programmed:AddressNotAssigned",
    "K8sGateway:Programmed:Pending",
    "K8sGateway:behind",
    "listener:ResolvedRefs:InvalidCertificateRef",
    "listener:Conflicted:ProtocolConflict",
    "listener:Programmed:Invalid",
    "route:Accepted:NoMatchingParent",
    "route:Accepted:NotAllowedByListeners",
    "route:ResolvedRefs:BackendNotFound",
    "route:ResolvedRefs:RefNotPermitted",
    "route:no-status",
    "route:cross-namespace-parent",
    "route:cross-namespace-backend",
    "policy:Accepted:TargetNotFound",
    "policy:Accepted:Conflicted",
    "policy:Accepted:Invalid",
    "policy:Enforced:Overridden",
    "policy:Enforced:Unknown",
    "policy:no-status",
    "policy:partial",
    "policy:stale",
}


def test_every_gateway_api_and_kuadrant_variant_in_every_demo_cluster(
    demo: dict[str, dict[str, list[Obj]]],
) -> None:
    per_cluster = {"GatewayClass:Accepted:InvalidParameters", "GatewayClass:Accepted:Pending"}
    everywhere: set[str] = set()
    for cluster, objs in demo.items():
        seen = reasons(objs)
        everywhere |= seen
        assert GATEWAY_VARIANTS - per_cluster <= seen, (cluster, GATEWAY_VARIANTS - seen)
    assert everywhere >= GATEWAY_VARIANTS


def test_policies_targets_and_discoverability(
    demo: dict[str, dict[str, list[Obj]]], big: dict[str, list[Obj]]
) -> None:
    for objs in [*demo.values(), big]:
        present = {(k, *key(o)) for k in ("K8sGateway", "HTTPRoute") for o in objs[k]}
        affected: set[tuple[str, str, str]] = set()
        for kind in ("AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy"):
            for pol in objs[kind]:
                ref, ns = pol["spec"]["targetRef"], key(pol)[0]
                assert ref["group"] == GW
                target = (
                    "K8sGateway" if ref["kind"] == "Gateway" else ref["kind"],
                    ns,
                    ref["name"],
                )
                accepted = conditions(pol).get("Accepted")
                if accepted is None:
                    continue
                assert (accepted["reason"] == "TargetNotFound") == (target not in present)
                if accepted["status"] == "True":
                    assert pol["status"]["observedGeneration"] == pol["metadata"]["generation"]
                    affected.add(target)
                else:
                    assert "Enforced" not in conditions(pol)  # Kuadrant drops it
        for gw in objs["K8sGateway"]:
            marked = any(t.startswith("kuadrant.io/") for t in conditions(gw))
            assert marked == (("K8sGateway", *key(gw)) in affected), key(gw)
        check_enforcement(objs)


def check_enforcement(objs: dict[str, list[Obj]]) -> None:
    """Overridden names a policy that really overrides (a Gateway `overrides`, or a route-level
    policy under Gateway `defaults`); "not in the path" means the target reaches no route."""
    auth = {key(p): p for p in objs["AuthPolicy"]}
    routes = {key(r): r for r in objs["HTTPRoute"]}

    def attached(route: Obj | None) -> bool:
        entries = (route or {}).get("status", {}).get("parents", [])
        return any(c["type"] == "Accepted" and c["status"] == "True"
                   for e in entries for c in e["conditions"])  # fmt: skip

    for kind in ("AuthPolicy", "RateLimitPolicy"):
        for pol in objs[kind]:
            enforced = conditions(pol).get("Enforced")
            if enforced is None:
                continue
            ns, target = key(pol)[0], pol["spec"]["targetRef"]
            if enforced["reason"] == "Overridden":
                other = auth[(ns, enforced["message"].split("/")[-1].rstrip("]"))]
                if target["kind"] == "HTTPRoute":
                    assert "overrides" in other["spec"]
                else:
                    assert (
                        "defaults" in pol["spec"]
                        and other["spec"]["targetRef"]["kind"] == "HTTPRoute"
                    )
            no_routes = "not in the path" in enforced["message"]
            if target["kind"] == "HTTPRoute":
                assert no_routes == (not attached(routes.get((ns, target["name"])))), key(pol)
            elif no_routes:
                mine = [r for r in routes.values() if key(r)[0] == ns]
                assert not any(attached(r) for r in mine)


def test_gateway_api_shares(big: dict[str, list[Obj]]) -> None:
    app_gateways = [g for g in big["K8sGateway"] if key(g)[0].startswith("app-")]
    share = len(app_gateways) / 2000
    assert 0.12 < share < 0.19, share
    kuadrant = {key(p)[0] for k in ("AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy")
                for p in big[k]}  # fmt: skip
    assert 0.3 < len(kuadrant) / len(app_gateways) < 0.5
    healthy = [g for g in app_gateways if conditions(g)["Programmed"]["status"] == "True"]
    assert 0.85 < len(healthy) / len(app_gateways) < 0.99
    routes = [r for k in ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute") for r in big[k]]
    failing = [
        r
        for r in routes
        for p in (r.get("status") or {}).get("parents", [])
        for c in p["conditions"]
        if c["status"] == "False"
    ]
    assert 0.01 < len(failing) / len(routes) < 0.12
    assert big["GRPCRoute"] and big["TLSRoute"] and big["TCPRoute"] and big["ReferenceGrant"]


def test_new_kinds_add_at_most_a_quarter_of_the_rows(big: dict[str, list[Obj]]) -> None:
    catalog = Catalog.default()
    by_rule: Counter[str] = Counter()
    for res in catalog:
        if res.status_rule:
            kind = "K8sGateway" if res.kind == "Gateway" and res.group == GW else res.kind
            by_rule[res.status_rule] += len(big[kind])
    old = by_rule["flux"] + by_rule["static"] - len(big["ReferenceGrant"]) + by_rule["istio"]
    new = by_rule["gateway"] + by_rule["route"] + by_rule["policy"] + len(big["ReferenceGrant"])
    assert 3.0 < old / 2000 < 3.4  # the Flux and Istio mix as before
    assert 0.1 < new / old <= 0.25, new / old


# -- Flux suspension -----------------------------------------------------------------------


def test_suspension_is_drawn_apart_from_health(big: dict[str, list[Obj]]) -> None:
    flux = [
        o for k in ("Kustomization", "HelmRelease", "GitRepository", "HelmChart") for o in big[k]
    ]
    suspended = [o for o in flux if is_suspended("flux", o)]
    assert 0.002 < len(suspended) / len(flux) < 0.01
    assert all(conditions(o)["Ready"]["status"] in ("True", "False", "Unknown") for o in suspended)


def test_demo_has_suspended_failing_flux_objects(demo: dict[str, dict[str, list[Obj]]]) -> None:
    for objs in demo.values():
        failing = [
            o
            for o in objs["Kustomization"]
            if is_suspended("flux", o) and conditions(o)["Ready"]["status"] == "False"
        ]
        assert failing  # `flux get` would show SUSPENDED True, READY False
