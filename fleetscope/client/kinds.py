"""KIND arguments as kubectl takes them: the kind, its plural or a short name, any case, several
at once (`ks,hr`), resolved to the kind keys the server lists in its OpenAPI document.

Short names are those the projects' CRDs define (Flux, Istio, Gateway API); the API does not
publish them, so they live here. Kinds the server adds from a kinds file still resolve by kind
and plural.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetscope.client.errors import BadInput

SHORT_NAMES: dict[str, tuple[str, ...]] = {
    # Flux (kubebuilder `shortName` markers of each controller's API)
    "Kustomization": ("ks",),
    "HelmRelease": ("hr",),
    "GitRepository": ("gitrepo",),
    "HelmRepository": ("helmrepo",),
    "OCIRepository": ("ocirepo",),
    "HelmChart": ("hc",),
    "ImageRepository": ("imgrepo", "imagerepo"),
    "ImagePolicy": ("imgpol", "imagepol"),
    "ImageUpdateAutomation": ("iua", "imgupd", "imgauto"),
    # Istio (shortNames in istio/api's CRDs)
    "VirtualService": ("vs",),
    "DestinationRule": ("dr",),
    "Gateway": ("gw",),
    "ServiceEntry": ("se",),
    "WorkloadEntry": ("we",),
    "WorkloadGroup": ("wg",),
    "AuthorizationPolicy": ("ap",),
    "PeerAuthentication": ("pa",),
    "RequestAuthentication": ("ra",),
    # Gateway API (the server keys its Gateway `K8sGateway`: Istio's Gateway is `Gateway`)
    "K8sGateway": ("gtw",),
    "GatewayClass": ("gc",),
    "ReferenceGrant": ("refgrant",),
    "BackendTLSPolicy": ("btlspolicy",),
}

# What the client assumes when a server publishes no OpenAPI document: the built-in kinds.
DEFAULT_KINDS = (
    *SHORT_NAMES.keys(),
    "Bucket",
    "Alert",
    "Provider",
    "Receiver",
    "Sidecar",
    "Telemetry",
    "HTTPRoute",
    "GRPCRoute",
    "TLSRoute",
    "TCPRoute",
    "AuthPolicy",
    "RateLimitPolicy",
    "DNSPolicy",
    "TLSPolicy",
)


def plural(kind: str) -> str:
    """English plural as CRDs spell it: GitRepository -> gitrepositories, ServiceEntry -> ..."""
    k = kind.lower()
    if k.endswith("y") and k[-2:-1] not in ("a", "e", "o", "u"):
        return k[:-1] + "ies"
    if k.endswith(("s", "x", "ch", "sh")):
        return k + "es"
    return k + "s"


def aliases(key: str) -> tuple[str, ...]:
    """Every lower-case name that means `key`: kind, plural, short names."""
    return (key.lower(), plural(key), *SHORT_NAMES.get(key, ()))


def resolve(names: Iterable[str], known: Iterable[str]) -> list[str]:
    """KIND arguments (each maybe comma-separated) as kind keys, in order, without repeats."""
    known = tuple(known) or DEFAULT_KINDS
    table: dict[str, list[str]] = {}
    for key in known:
        for alias in aliases(key):
            if key not in table.setdefault(alias, []):
                table[alias].append(key)
    out: dict[str, None] = {}
    for arg in names:
        for name in (n.strip() for n in arg.split(",")):
            if name:
                out[_one(name, table, known)] = None
    return list(out)


def _one(name: str, table: dict[str, list[str]], known: tuple[str, ...]) -> str:
    if name in known:
        return name  # the exact key wins over any alias
    found = table.get(name.lower(), [])
    if len(found) == 1:
        return found[0]
    if found:
        raise BadInput(f"kind {name!r} is ambiguous: {', '.join(found)}; use one of those")
    raise BadInput(f"unknown kind {name[:80]!r}; this server knows {', '.join(known)}")


def completions(known: Iterable[str]) -> list[str]:
    """Names to offer when completing a KIND: lower-case kinds and short names."""
    out: list[str] = []
    for key in tuple(known) or DEFAULT_KINDS:
        out += [key.lower(), *SHORT_NAMES.get(key, ())]
    return out
