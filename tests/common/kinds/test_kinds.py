"""Kind registry: the built-in kinds, extra kinds from FLEETSCOPE_KINDS_FILE (every status rule,
cluster-scoped kinds, relation extractors), entries that set a built-in kind's ui_url_template,
Kind.ui_url, and errors that name the entry and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.kinds.registry import (
    BUILTIN_KINDS,
    RELATION_EXTRACTORS,
    STATUS_RULES,
    UI_URL_FIELDS,
    Kind,
    KindRegistry,
    builtin_registry,
    load_registry,
    parse_kind,
)
from tests.support.paths import REPO

GW = "gateway.networking.k8s.io"


def load(tmp_path: Path, content: str) -> KindRegistry:
    f = tmp_path / "kinds.yaml"
    f.write_text(content)
    return load_registry(str(f))


def test_builtin_kinds() -> None:
    reg = builtin_registry()
    groups = [k.group for k in reg]
    assert sum(g.endswith("toolkit.fluxcd.io") for g in groups) == 13
    assert sum(g.endswith("istio.io") for g in groups) == 10
    assert groups.count(GW) == 7 and groups.count("kuadrant.io") == 4
    policy = reg.get("ImagePolicy")
    assert policy is not None and policy.plural == "imagepolicies"
    assert reg.by_resource("networking.istio.io", "serviceentries") is reg.get("ServiceEntry")
    assert all(k.status_rule in STATUS_RULES and not k.ui_url_template for k in reg)
    assert all(k.relations and set(k.relations) <= set(RELATION_EXTRACTORS) for k in reg)


def test_builtin_gateway_api_and_kuadrant_kinds() -> None:
    reg = builtin_registry()
    gateway_class, k8s_gateway, istio_gateway = (
        reg.get(k) for k in ("GatewayClass", "K8sGateway", "Gateway")
    )
    assert gateway_class is not None and gateway_class.namespaced is False
    assert k8s_gateway is not None and (k8s_gateway.group, k8s_gateway.kind) == (GW, "Gateway")
    assert istio_gateway is not None and istio_gateway.group == "networking.istio.io"
    rules = {k.key: k.status_rule for k in reg if k.group in (GW, "kuadrant.io")}
    assert rules == {
        "GatewayClass": "gateway",
        "K8sGateway": "gateway",
        "HTTPRoute": "route",
        "GRPCRoute": "route",
        "TLSRoute": "route",
        "TCPRoute": "route",
        "ReferenceGrant": "static",
        "AuthPolicy": "policy",
        "RateLimitPolicy": "policy",
        "DNSPolicy": "policy",
        "TLSPolicy": "policy",
    }
    assert [k.plural for k in reg if k.group == "kuadrant.io"] == [
        "authpolicies",
        "ratelimitpolicies",
        "dnspolicies",
        "tlspolicies",
    ]


def test_extra_kinds_use_every_rule_and_scope(tmp_path: Path) -> None:
    reg = load(
        tmp_path,
        "- {group: gateway.networking.x-k8s.io, versions: [v1alpha1], kind: XListenerSet,\n"
        "   plural: xlistenersets, status_rule: gateway}\n"
        "- {group: gateway.networking.k8s.io, versions: v1alpha2, kind: UDPRoute,"
        "   plural: udproutes, status_rule: route}\n"
        "- {group: extensions.kuadrant.io, versions: [v1alpha1], kind: PlanPolicy,"
        "   plural: planpolicies, status_rule: policy}\n"
        "- {group: example.io, versions: [v1], kind: Widget, plural: widgets}\n"
        "- {group: example.io, versions: [v1], kind: Fleet, plural: fleets, namespaced: false,"
        "   key: ExampleFleet, ui_url_template: 'https://ui/{cluster}/{kind}/{name}'}\n",
    )
    assert len(reg) == len(BUILTIN_KINDS) + 5
    assert reg.keys()[: len(BUILTIN_KINDS)] == [k.key for k in BUILTIN_KINDS]
    rules = [reg.get(k).status_rule for k in ("XListenerSet", "UDPRoute", "PlanPolicy", "Widget")]  # type: ignore[union-attr]
    assert rules == ["gateway", "route", "policy", "conditions"]
    fleet = reg.get("ExampleFleet")
    assert fleet is not None and fleet.namespaced is False and fleet.versions == ("v1",)
    assert reg.get("Widget").namespaced is True  # type: ignore[union-attr]
    assert reg.by_resource("example.io", "fleets") is fleet


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        (
            "{key: HelmRelease, ui_url_template: 'https://weave/{cluster}/{namespace}/{name}'}",
            "HelmRelease",
        ),
        # By `kind` when it equals a built-in key: `Gateway` is Istio's.
        (
            "{kind: Gateway, ui_url_template: 'https://kiali/{cluster}/{namespace}/{name}'}",
            "Gateway",
        ),
        (
            "{key: K8sGateway, kind: Gateway, group: gateway.networking.k8s.io, plural: gateways,"
            " versions: [v1, v1beta1], status_rule: gateway, namespaced: true,"
            " ui_url_template: 'https://ui/{cluster}/{namespace}/{name}'}",
            "K8sGateway",
        ),
        # Versions given must be ones the built-in serves (an older file listing only v1 loads).
        (
            "{group: gateway.networking.k8s.io, versions: [v1], kind: HTTPRoute, plural: httproutes,"
            " ui_url_template: 'https://argo/{cluster}/{namespace}/{name}'}",
            "HTTPRoute",
        ),
        (
            "{kind: GatewayClass, namespaced: false, ui_url_template: 'https://ui/{cluster}/{name}'}",
            "GatewayClass",
        ),
    ],
)
def test_an_entry_naming_a_builtin_sets_its_ui_url_template(
    tmp_path: Path, entry: str, key: str
) -> None:
    reg = load(tmp_path, f"- {entry}\n")
    builtin = builtin_registry()
    assert reg.keys() == builtin.keys()
    kind, before = reg.get(key), builtin.get(key)
    assert kind is not None and before is not None
    assert kind.ui_url_template.startswith("https://")
    assert (kind.group, kind.versions, kind.plural, kind.status_rule, kind.namespaced) == (
        before.group,
        before.versions,
        before.plural,
        before.status_rule,
        before.namespaced,
    )
    assert [k for k in reg if k.ui_url_template] == [kind]
    assert reg.by_resource(kind.group, kind.plural) is kind


@pytest.mark.parametrize(
    ("relations", "expected"),
    [
        ("", ("managedBy",)),  # not given: linked to the Kustomization / HelmRelease applying it
        ("relations: []", ()),
        ("relations: [gateway-parents, gateway-backends]", ("gateway-parents", "gateway-backends")),
        ("relations: [managedBy, flux-dependsOn]", ("managedBy", "flux-dependsOn")),
    ],
)
def test_extra_kinds_choose_their_relation_extractors(
    tmp_path: Path, relations: str, expected: tuple[str, ...]
) -> None:
    entry = "{group: example.io, versions: [v1], kind: Widget, plural: widgets"
    reg = load(tmp_path, f"- {entry}{', ' + relations if relations else ''}}}\n")
    assert reg.get("Widget").relations == expected  # type: ignore[union-attr]


def test_an_override_may_repeat_the_builtin_relations(tmp_path: Path) -> None:
    reg = load(
        tmp_path,
        "- {key: HTTPRoute, relations: [gateway-parents, gateway-backends, managedBy],"
        " ui_url_template: 'https://ui/{name}'}\n",
    )
    assert reg.get("HTTPRoute").relations == builtin_registry().get("HTTPRoute").relations  # type: ignore[union-attr]


def test_overrides_and_new_kinds_together(tmp_path: Path) -> None:
    reg = load(
        tmp_path,
        "- {group: example.io, versions: [v1], kind: Widget, plural: widgets}\n"
        "- {kind: Kustomization, ui_url_template: 'https://weave/{cluster}/{name}'}\n",
    )
    assert reg.keys() == [*builtin_registry().keys(), "Widget"]
    assert reg.get("Kustomization").ui_url_template == "https://weave/{cluster}/{name}"  # type: ignore[union-attr]


def kind(template: str, key: str = "", group: str = GW) -> Kind:
    return Kind(group, ("v1", "v1beta1"), "Gateway", "gateways", "gateway", key, template)


@pytest.mark.parametrize(
    ("template", "args", "url"),
    [
        (
            "https://ui.example/{cluster}/{namespace}/{name}",
            ("prod-eu", "shop", "web"),
            "https://ui.example/prod-eu/shop/web",
        ),
        # Each value is quoted as encodeURIComponent does (the browser fills the same template).
        (
            "https://ui.example/c/{cluster}?ns={namespace}&o={name}",
            ("prod eu/1", "a&b", "x?y#z"),
            "https://ui.example/c/prod%20eu%2F1?ns=a%26b&o=x%3Fy%23z",
        ),
        ("https://ui/{cluster}/{name}", ("c!'()*~._-", "", "ü"), "https://ui/c!'()*~._-/%C3%BC"),
        # Cluster-scoped: the namespace is empty.
        (
            "https://ui/{cluster}/ns/{namespace}/{name}",
            ("c", "", "istio"),
            "https://ui/c/ns//istio",
        ),
        # {kind} is the row's kind (the key); {apiVersion} the preferred one by default.
        (
            "https://ui/{kind}/{apiVersion}/{name}",
            ("c", "n", "gw"),
            "https://ui/K8sGateway/gateway.networking.k8s.io%2Fv1/gw",
        ),
    ],
)
def test_ui_url_fills_the_template(template: str, args: tuple[str, str, str], url: str) -> None:
    assert kind(template, "K8sGateway").ui_url(*args) == url


def test_ui_url_takes_the_served_version_and_is_none_without_template() -> None:
    k = kind("https://ui/{apiVersion}", "K8sGateway")
    assert k.ui_url("c", "n", "gw", "gateway.networking.k8s.io/v1beta1") == (
        "https://ui/gateway.networking.k8s.io%2Fv1beta1"
    )
    assert kind("").ui_url("c", "n", "gw") is None


def test_template_placeholders_are_the_ones_the_ui_fills() -> None:
    """query/static/links.js fills exactly these row fields; the server must agree."""
    js = (REPO / "query" / "static" / "links.js").read_text()
    fields = re.search(r"const FIELDS = \[([^\]]*)\]", js)
    assert fields is not None
    assert tuple(re.findall(r'"(\w+)"', fields[1])) == UI_URL_FIELDS
    template = "https://ui/" + "/".join(f"{{{f}}}" for f in UI_URL_FIELDS)
    parsed = parse_kind(
        {
            "group": "x.io",
            "versions": ["v1"],
            "kind": "A",
            "plural": "as",
            "ui_url_template": template,
        }
    )
    assert parsed.ui_url("c", "n", "a") == "https://ui/c/n/A/a/x.io%2Fv1"


def test_parse_kind_checks_against_the_given_builtins() -> None:
    builtins = KindRegistry((kind("", "K8sGateway"),))
    entry = {"key": "K8sGateway", "ui_url_template": "https://ui/{name}"}
    assert parse_kind(entry, 0, builtins).ui_url_template == "https://ui/{name}"
    with pytest.raises(ConfigError, match="missing field"):
        parse_kind({"key": "HelmRelease", "ui_url_template": "https://ui/{name}"}, 0, builtins)


GOOD = "- {group: example.io, versions: [v1], kind: Widget, plural: widgets}\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{a: 1}", "must hold a YAML list"),
        ("- [", "cannot be read"),
        (GOOD + "- {group: x.io, kind: A}", "entry 1: missing field 'plural'"),
        (GOOD + "- 7", "entry 1 must be a mapping"),
        ("- {group: x.io, versions: [], kind: A, plural: as}", "entry 0: versions must be"),
        ("- {group: x.io, versions: [1], kind: A, plural: as}", "entry 0: versions must be"),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, status_rule: magic}",
            "entry 0: status_rule",
        ),
        ("- {group: X_, versions: [v1], kind: A, plural: as}", "entry 0: group 'X_'"),
        ("- {group: x.io, versions: [v1], kind: A, plural: As}", "entry 0: plural 'As'"),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, key: a-b}",
            "entry 0: kind/key 'a-b'",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, colour: red}",
            "entry 0: unknown field.s. colour",
        ),
        # namespaced is a bool.
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, namespaced: 'false'}",
            "entry 0: namespaced must be true or false",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, namespaced: 0}",
            "entry 0: namespaced must be true or false",
        ),
        # ui_url_template: http(s), and only the placeholders the UI fills.
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, ui_url_template: 'ftp://x/{name}'}",
            "entry 0: ui_url_template must be an http",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, ui_url_template: 'https://x/{ns}/{name}'}",
            r"entry 0: ui_url_template has an unknown placeholder \{ns\}",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, ui_url_template: 'https://x/{Name}'}",
            r"unknown placeholder \{Name\}",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, ui_url_template: 'https://x/{name'}",
            "entry 0: ui_url_template has an unmatched brace",
        ),
        (
            "- {kind: HelmRelease, ui_url_template: 'https://x/{cluster}}'}",
            "entry 0: ui_url_template has an unmatched brace",
        ),
        # relations: a list of known extractor names, each once.
        (
            GOOD + "- {group: x.io, versions: [v1], kind: A, plural: as, relations: [flux-sauce]}",
            "entry 1: relations has an unknown extractor 'flux-sauce'; known are flux-source, ",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, relations: managedBy}",
            r"entry 0: relations must be a list of extractor names \(flux-source, ",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, relations: [1]}",
            "entry 0: relations must be a list",
        ),
        (
            "- {group: x.io, versions: [v1], kind: A, plural: as, relations: [managedBy, managedBy]}",
            "entry 0: relations lists 'managedBy' twice",
        ),
        (
            "- {kind: Alert, relations: [managedBy], ui_url_template: 'https://x/{name}'}",
            r"entry 0: .*whose relations are \['flux-provider', 'managedBy'\], not \['managedBy'\]",
        ),
        # An entry naming a built-in kind only sets its ui_url_template.
        (
            "- {group: gateway.networking.k8s.io, versions: [v1], kind: Gateway, plural: gateways}",
            "entry 0: names the built-in kind 'Gateway' .gateways.networking.istio.io., whose group is 'networking.istio.io'",
        ),
        (
            "- {kind: HelmRelease}",
            "entry 0: names the built-in kind 'HelmRelease' .* sets no ui_url_template",
        ),
        (
            GOOD
            + "- {key: HTTPRoute, status_rule: conditions, ui_url_template: 'https://x/{name}'}",
            "entry 1: .*whose status_rule is 'route', not 'conditions'",
        ),
        (
            "- {kind: GatewayClass, namespaced: true, ui_url_template: 'https://x/{name}'}",
            "entry 0: .*whose namespaced is False",
        ),
        (
            "- {kind: HTTPRoute, versions: [v1, v2], ui_url_template: 'https://x/{name}'}",
            r"entry 0: .*whose versions are \['v1', 'v1beta1'\]",
        ),
        (
            "- {kind: HTTPRoute, plural: routes, ui_url_template: 'https://x/{name}'}",
            "entry 0: .*whose plural is 'httproutes'",
        ),
        (
            "- {key: K8sGateway, kind: Gateway, group: networking.istio.io, ui_url_template: 'https://x'}",
            "entry 0: .*K8sGateway.*whose group is 'gateway.networking.k8s.io'",
        ),
        (
            "- {kind: HelmRelease, ui_url_template: 'https://a/{name}'}\n"
            "- {key: HelmRelease, ui_url_template: 'https://b/{name}'}\n",
            r"entry 1: sets ui_url_template of built-in kind 'HelmRelease' again \(entry 0",
        ),
        # A new kind colliding with a built-in or with another entry.
        (
            "- {group: gateway.networking.k8s.io, versions: [v1], kind: HTTPRoute, plural: httproutes, key: Routes}",
            "entry 0: httproutes.gateway.networking.k8s.io is the built-in kind 'HTTPRoute'.*key: HTTPRoute",
        ),
        (GOOD + GOOD, "entry 1: key 'Widget' is used by entry 0"),
        (
            GOOD + "- {group: example.io, versions: [v2], kind: Widget, plural: widgets, key: W2}",
            "entry 1: resource 'widgets.example.io' is used by entry 0",
        ),
    ],
)
def test_bad_kinds_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, content)


def test_a_registry_holds_each_key_and_resource_once() -> None:
    a = Kind("x.io", ("v1",), "A", "as", "conditions")
    with pytest.raises(ConfigError, match="used twice"):
        KindRegistry((a, Kind("y.io", ("v1",), "A", "bs", "conditions")))
    with pytest.raises(ConfigError, match=r"as\.x\.io is collected twice"):
        KindRegistry((a, Kind("x.io", ("v1",), "A", "as", "conditions", key="B")))
