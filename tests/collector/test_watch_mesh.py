"""The watcher's Istio state (collector.watch.mesh.MeshState) at its seam: lists and events in,
replaced kinds and changed rows out. Nothing before everything was listed; relisted kinds are
replaced whole; an event re-checks dependents and hands over only the rows that changed;
unlistable Services leave the rows "not validated"."""

from __future__ import annotations

from typing import Any

from collector import mesh
from collector.watch.mesh import MeshState
from common.index import rows
from common.index.write import store_events
from common.kinds.registry import builtin_registry

REG = builtin_registry()
KINDS = [k for k in REG if mesh.validated(k)]


def obj(kind: str, ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    api = "security.istio.io/v1" if kind == "AuthorizationPolicy" else "networking.istio.io/v1"
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"namespace": ns, "name": name},
        "spec": spec,
    }


GW = obj("Gateway", "shop", "gw", {"selector": {"istio": "ingress"}, "servers": []})
VS = obj(
    "VirtualService",
    "shop",
    "web",
    {
        "hosts": ["web.example.com"],
        "gateways": ["gw"],
        "http": [{"route": [{"destination": {"host": "web"}}]}],
    },
)
SVC = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"namespace": "shop", "name": "web"},
    "spec": {},
}
NS = {"metadata": {"name": "shop"}}


class Out:
    def __init__(self) -> None:
        self.replaced: dict[str, list[str]] = {}
        self.changes: list[store_events.Change] = []

    def replace(self, key: str, members: list[str]) -> None:
        self.replaced[key] = members

    def change(self, c: store_events.Change) -> None:
        self.changes.append(c)


def listed_state(out: Out) -> MeshState:
    state = MeshState("c1", [(k, k.api_version()) for k in KINDS], 0.0, out.replace, out.change)
    for k in KINDS:
        items = {"Gateway": [GW], "VirtualService": [VS]}.get(k.kind, [])
        assert not state.complete
        state.replace(k.key, items)
    state.replace(mesh.SERVICES, [SVC])
    state.replace(mesh.NAMESPACES, [NS])
    assert state.complete
    return state


def status_of(member: str | None) -> rows.Row:
    assert member is not None
    return rows.decode("c1", member)


def test_first_validation_replaces_every_kind_then_events_change_only_dependents() -> None:
    out = Out()
    state = listed_state(out)
    assert state.validate() == 2
    assert set(out.replaced) == {k.key for k in KINDS} and not out.changes
    (vs,) = out.replaced["VirtualService"]
    assert status_of(vs)["status"] == "healthy" and status_of(vs)["warnings"] == 0

    out.replaced.clear()
    state.event("Gateway", "DELETED", GW)
    assert state.validate() == 2  # the Gateway's row goes, the VirtualService's changes
    assert not out.replaced
    by_id = {c.identity: c.member for c in out.changes}
    assert by_id[rows.sort_key("shop", "Gateway", "gw")] is None
    row = status_of(by_id[rows.sort_key("shop", "VirtualService", "web")])
    assert (row["status"], row["reason"]) == ("unhealthy", "KIA1102")

    out.changes.clear()
    assert state.validate() == 0 and not out.changes  # nothing changed: nothing written
    state.event(mesh.SERVICES, "DELETED", SVC)
    state.event("Gateway", "ADDED", GW)
    state.validate()
    row = status_of(
        {c.identity: c.member for c in out.changes}[rows.sort_key("shop", "VirtualService", "web")]
    )
    assert row["status"] == "healthy" and row["warnings"] == 1 and "KIA1101" in row["message"]


def test_a_relist_replaces_that_kind_whole() -> None:
    out = Out()
    state = listed_state(out)
    state.validate()
    out.replaced.clear()
    state.replace("VirtualService", [])
    state.validate()
    assert out.replaced == {"VirtualService": []} and not out.changes


def test_unlistable_services_leave_istio_rows_not_validated() -> None:
    out = Out()
    state = MeshState("c1", [(k, k.api_version()) for k in KINDS], 0.0, out.replace, out.change)
    for k in KINDS:
        state.replace(k.key, [VS] if k.kind == "VirtualService" else [])
    state.replace(mesh.NAMESPACES, [NS])
    assert not state.complete
    state.unavailable(mesh.SERVICES)
    assert state.complete
    state.validate()
    row = status_of(out.replaced["VirtualService"][0])
    assert (row["status"], row["reason"]) == ("unknown", "NotChecked")


K8S_GW = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "metadata": {"namespace": "edge", "name": "public", "generation": 1},
    "spec": {"gatewayClassName": "istio", "listeners": []},
}
VS_TO_K8S_GW = obj(
    "VirtualService",
    "shop",
    "api",
    {
        "hosts": ["api.example.com"],
        "gateways": ["edge/public"],
        "http": [{"route": [{"destination": {"host": "web"}}]}],
    },
)


def test_a_virtualservice_naming_a_gateway_api_gateway_is_resolved_by_the_sync() -> None:
    # The full sync's path (collector.sync.collect holds these kinds and builds them together).
    held_kinds = {k.key: k for k in REG if mesh.held(k)}
    assert "K8sGateway" in held_kinds  # held, so the checks see it beside the Istio kinds
    vs_kind, gw_kind = held_kinds["VirtualService"], held_kinds["K8sGateway"]
    held = [mesh.Held(vs_kind, "networking.istio.io/v1", VS_TO_K8S_GW)]
    alone = mesh.members("c1", held, [SVC], ["shop", "edge"])
    assert status_of(alone[0])["reason"] == "KIA1102"  # no such gateway: a real finding
    held.append(mesh.Held(gw_kind, "gateway.networking.k8s.io/v1", K8S_GW))
    members = {rows.identity(m): m for m in mesh.members("c1", held, [SVC], ["shop", "edge"])}
    vs = status_of(members[rows.sort_key("shop", "VirtualService", "api")])
    assert (vs["status"], vs["reason"]) == ("healthy", ""), vs
    # The Gateway API Gateway keeps its own row and status rule (not Istio's Gateway checks).
    gw = status_of(members[rows.sort_key("edge", "K8sGateway", "public")])
    assert gw["status"] == "progressing", gw  # no conditions: waiting for its controller


def test_the_watcher_revalidates_virtualservices_when_a_gateway_api_gateway_changes() -> None:
    out = Out()
    kinds = [k for k in REG if mesh.validated(k) or k.key in mesh.CONTEXT_KINDS]
    state = MeshState("c1", [(k, k.api_version()) for k in kinds], 0.0, out.replace, out.change)
    for k in kinds:
        items = {"VirtualService": [VS_TO_K8S_GW], "K8sGateway": [K8S_GW]}.get(k.key, [])
        state.replace(k.key, items)
    state.replace(mesh.SERVICES, [SVC])
    state.replace(mesh.NAMESPACES, [NS, {"metadata": {"name": "edge"}}])
    state.validate()
    (vs,) = out.replaced["VirtualService"]
    assert status_of(vs)["status"] == "healthy", status_of(vs)
    state.event("K8sGateway", "DELETED", K8S_GW)
    state.validate()
    by_id = {c.identity: c.member for c in out.changes}
    row = status_of(by_id[rows.sort_key("shop", "VirtualService", "api")])
    assert (row["status"], row["reason"]) == ("unhealthy", "KIA1102")


def test_a_slimmed_packed_object_builds_the_row_of_the_raw_object() -> None:
    """The watcher builds Istio rows from slimmed, packed objects and takes their labels field
    as it is: every held kind of a generated cluster gives the raw object's row, labels cut,
    coded, or naming the object included."""
    import orjson

    from collector.watch.packed import pack, unpack
    from kubesim.catalog import Catalog
    from kubesim.gen.fleet import generate_fleet

    by_resource = {(k.group, k.plural): k for k in REG if mesh.held(k)}
    extra = {"app": "web", "team": "shop", "x/inst": "", "Bad Key": "v", "app.kubernetes.io/x": ""}
    seen: set[str] = set()
    for res, _ns, _name, raw in generate_fleet(1, 40, seed=5).objects(0, Catalog.default()):
        kind = by_resource.get((res.group, res.plural))
        if kind is None:
            continue
        o = orjson.loads(raw)
        meta = o["metadata"]
        extra["x/inst"] = f"{meta['name']}-{meta.get('namespace', '')}"
        extra["app.kubernetes.io/x"] = meta["name"]
        meta["labels"] = {
            **(meta.get("labels") or {}),
            **extra,
            **{f"k{i}": "v" for i in range(40)},
        }
        api_version = kind.api_version(res.version)
        slimmed = unpack(pack(mesh.slim(kind, o)))
        assert rows.member("c1", kind, api_version, slimmed) == rows.member(
            "c1", kind, api_version, o
        )
        seen.add(kind.key)
    assert len(seen) >= 8
