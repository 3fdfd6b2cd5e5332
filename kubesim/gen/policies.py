"""The Kuadrant policies of one Gateway API namespace, and what they make the controllers add to
the Gateway's and routes' status (Kuadrant's policy discoverability conditions).

Policies: AuthPolicy `gateway-auth` on the Gateway (`defaults` or `overrides`), AuthPolicy
`web-auth` and RateLimitPolicy `web-rlp` on the `web` HTTPRoute, DNSPolicy `dns` and
TLSPolicy `tls` on the Gateway. A Gateway-level `defaults` policy with a route-level one beside
it is partially enforced (or overridden, when `web` is the Gateway's only route); `overrides`
override the route-level one. Failures: a missing target, a second DNSPolicy on the same
Gateway (Conflicted), a TLSPolicy whose issuer is gone (Invalid), components out of sync, DNS
records not ready, no status yet, conditions judged at an older generation (stale).
"""

from __future__ import annotations

import random
from functools import partial

from kubesim.gen.gateway_shapes import Affected
from kubesim.gen.plan import LABELS, ClusterPlan, NamespacePlan, Planned
from kubesim.gen.policy_shapes import Target, policy

SHARES = {"gateway-auth": 0.5, "web-auth": 0.4, "web-rlp": 0.5, "dns": 0.3, "tls": 0.3}
FORCED = {
    "policy-target-missing": ("web-rlp", "target-not-found"),
    "policy-out-of-sync": ("web-rlp", "out-of-sync"),
    "policy-unknown": ("web-rlp", "unknown"),
    "policy-failing": ("dns", "failing"),
    "policy-invalid": ("tls", "invalid"),
    "policy-conflicted": ("dns", "enforced"),
    "policy-overridden": ("web-auth", "enforced"),
    "policy-partial": ("web-auth", "enforced"),
    "policy-stale": ("tls", "stale"),
}
KINDS = {
    "gateway-auth": "AuthPolicy",
    "web-auth": "AuthPolicy",
    "web-rlp": "RateLimitPolicy",
    "dns": "DNSPolicy",
    "dns-secondary": "DNSPolicy",
    "tls": "TLSPolicy",
}
ACCEPTED = ("enforced", "partial", "overridden", "out-of-sync", "failing", "no-routes", "stale")
KIND_ORDER = ("AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy")


def _failures(name: str, b: float) -> tuple[tuple[str, float], ...]:
    if name == "dns":
        return (("failing", b), ("unknown", b / 2))
    if name == "tls":
        return (("invalid", b), ("unknown", b / 2))
    if name == "web-rlp":
        return (("target-not-found", b), ("out-of-sync", b), ("unknown", b / 2))
    return (("target-not-found", b), ("out-of-sync", b))


def _draw(failures: tuple[tuple[str, float], ...], rng: random.Random) -> str:
    u = rng.random()
    for variant, share in failures:
        if u < share:
            return variant
        u -= share
    return "enforced"


def _target(name: str, variant: str) -> Target:
    missing = variant == "target-not-found"
    if name.startswith("web-"):
        return ("HTTPRoute", "web-v1" if missing else "web", "")
    return ("Gateway", "gateway-old" if missing else "gateway", "https" if name == "tls" else "")


def namespace_policies(
    plan: ClusterPlan, ns: NamespacePlan, paths: tuple[bool, bool], rng: random.Random
) -> tuple[list[Planned], dict[str, Affected]]:
    """The policies, and the policy kinds affecting the Gateway (`gateway`), the `web` route
    (`web`) and its other HTTP/gRPC routes (`route`). `paths`: whether `web` is attached to the
    Gateway, whether other routes are (for the auth and rate-limit policies to apply to)."""
    item = ns.item
    web_attached, other_routes = paths
    has = {name: rng.random() < share for name, share in SHARES.items()}
    variants = {name: _draw(_failures(name, plan.breakage), rng) for name in SHARES}
    overrides = item == "policy-overridden" or (item != "policy-partial" and rng.random() < 0.3)
    if item in FORCED:
        name, variant = FORCED[item]
        has[name], variants[name] = True, variant
    if item in ("policy-overridden", "policy-partial"):
        has["gateway-auth"], variants["gateway-auth"] = True, "enforced"
    dup = has["dns"] and (item == "policy-conflicted" or rng.random() < plan.breakage)
    others = {"web-auth": "", "gateway-auth": ""}
    for name in ("web-auth", "web-rlp", "gateway-auth"):
        reachable = web_attached or (name == "gateway-auth" and other_routes)
        if variants[name] in ACCEPTED and not reachable:
            variants[name] = "no-routes"
    if has["gateway-auth"] and has["web-auth"] and web_attached:
        both = variants["gateway-auth"] in ACCEPTED and variants["web-auth"] in ACCEPTED
        if both and overrides:
            variants["web-auth"], others["web-auth"] = "overridden", "gateway-auth"
        elif both:
            partial_ = other_routes or item == "policy-partial"
            variants["gateway-auth"] = "partial" if partial_ else "overridden"
            others["gateway-auth"] = "" if partial_ else "web-auth"
    objects = []
    for name in SHARES:
        if has[name]:
            mode = ("overrides" if overrides else "defaults") if name == "gateway-auth" else ""
            other = others.get(name, "")
            objects.append(_planned(plan, ns, name, variants[name], mode, other))
    if dup:
        variants["dns-secondary"] = "conflicted"
        objects.append(_planned(plan, ns, "dns-secondary", "conflicted", "", "dns"))
    return objects, _affected({name: variants[name] for name in SHARES if has[name]})


def _planned(
    plan: ClusterPlan, ns: NamespacePlan, name: str, variant: str, mode: str, other: str
) -> Planned:
    kind = KINDS[name]
    target = _target(name, variant)
    make = partial(policy, plan.api_version(kind), kind, target, variant, LABELS, mode, other)
    key = (kind, target, variant, mode, other)
    dangling = "spec.targetRef" if variant == "target-not-found" else ""
    return Planned(kind, ns.name, name, key, make, {}, dangling=dangling)


def _affected(variants: dict[str, str]) -> dict[str, Affected]:
    """Accepted policies by kind, as Kuadrant lists them on the objects in their path."""
    gateway: dict[str, list[str]] = {}
    web: dict[str, list[str]] = {}
    for name, variant in variants.items():
        if variant not in ACCEPTED:
            continue
        who = f"@@ns@@/{name}"
        if not name.startswith("web-"):
            gateway.setdefault(KINDS[name], []).append(who)
        web.setdefault(KINDS[name], []).append(who)

    def listed(by_kind: dict[str, list[str]]) -> Affected:
        return tuple((k, " ".join(sorted(by_kind[k]))) for k in KIND_ORDER if k in by_kind)

    return {"gateway": listed(gateway), "web": listed(web), "route": listed(gateway)}
