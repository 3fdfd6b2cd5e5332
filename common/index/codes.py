"""The stored codes of the built-in kinds: one character each, one table for every stored format
that shortens a kind key (edges and `dependents`, per-namespace counts, the time index, history
keys). A code is fixed forever once written; a new built-in kind gets a new character (tests
keep every built-in kind coded, each code once). Each format frames the code its own way:
edges and `dependents` as `~` + code (common.index.edges), the time index and history keys as
`^` + code (common.index.timeline), per-namespace counts as the bare code (common.index.nscounts).

Until this table, the time index and history keys had a second encoding, `~` + the kind's
position in a list of their own, in hex (`LEGACY_TIME_CODES`). The table keeps the letters
that edges, `dependents` and counts store (edges are inside row members: respelling them would
rewrite every row with an edge and flood the change feed); the time index and history keys
move, the least data to respell and all of it rebuildable or short-lived. Their new mark `^`
tells the two spellings apart (`~a`, `~c`, `~d` are codes in both). What the old one stored
stays readable, with no migration to run (one at startup would rewrite every cluster's windows
and rename every history key while watchers write, in each process that starts):

- time index entries parse in both spellings; an index written before is not `READY`
  (common.index.timeline), so the cluster's next full sync rebuilds it whole in its
  transaction; until then the writer also removes an entry's old spelling and the time sort
  looks an entry up in it when the new one is missing;
- a history written before stays under its old key (common.index.history.legacy_key), read
  after the new one's entries until it expires, `FLEETSCOPE_HISTORY_DAYS` after its last entry.
Once every cluster has had a full sync and the history window has passed, the legacy reads
can go.
"""

from __future__ import annotations

KIND_CODES = {
    "Kustomization": "K",
    "HelmRelease": "H",
    "GitRepository": "G",
    "HelmRepository": "R",
    "OCIRepository": "O",
    "Bucket": "B",
    "HelmChart": "C",
    "ImageRepository": "I",
    "ImagePolicy": "P",
    "ImageUpdateAutomation": "U",
    "Alert": "A",
    "Provider": "p",
    "Receiver": "r",
    "VirtualService": "V",
    "DestinationRule": "D",
    "Gateway": "g",
    "ServiceEntry": "E",
    "Sidecar": "S",
    "WorkloadEntry": "W",
    "AuthorizationPolicy": "Z",
    "PeerAuthentication": "a",
    "RequestAuthentication": "q",
    "Telemetry": "T",
    "GatewayClass": "c",
    "K8sGateway": "k",
    "HTTPRoute": "h",
    "GRPCRoute": "x",
    "TLSRoute": "t",
    "TCPRoute": "u",
    "ReferenceGrant": "F",
    "AuthPolicy": "z",
    "RateLimitPolicy": "l",
    "DNSPolicy": "d",
    "TLSPolicy": "s",
    "Service": "v",
}
"""The built-in kind keys (and Service, an edge's external node) and their stored codes."""
KIND_OF = {v: k for k, v in KIND_CODES.items()}

LEGACY_TIME_CODES = (
    "Kustomization",
    "HelmRelease",
    "GitRepository",
    "HelmRepository",
    "OCIRepository",
    "Bucket",
    "HelmChart",
    "ImageRepository",
    "ImagePolicy",
    "ImageUpdateAutomation",
    "Alert",
    "Provider",
    "Receiver",
    "VirtualService",
    "DestinationRule",
    "Gateway",
    "ServiceEntry",
    "Sidecar",
    "WorkloadEntry",
    "AuthorizationPolicy",
    "PeerAuthentication",
    "RequestAuthentication",
    "Telemetry",
    "GatewayClass",
    "K8sGateway",
    "HTTPRoute",
    "GRPCRoute",
    "TLSRoute",
    "TCPRoute",
    "ReferenceGrant",
    "AuthPolicy",
    "RateLimitPolicy",
    "DNSPolicy",
    "TLSPolicy",
)
"""Read only: the time index's and history keys' former codes, `~` + the position here in hex."""
LEGACY_TIME_SPELLING = {k: f"~{i:x}" for i, k in enumerate(LEGACY_TIME_CODES)}


def marked(kind: str, mark: str) -> str:
    """A kind as a format stores it: `mark` + its code when built in, else its key (kind keys
    are CamelCase names: they never start with a mark)."""
    code = KIND_CODES.get(kind)
    return mark + code if code else kind


def unmarked(stored: str, mark: str) -> str:
    """The kind key of what `marked` wrote."""
    return KIND_OF[stored[1]] if stored[:1] == mark else stored
