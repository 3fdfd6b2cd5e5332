"""The row model: one normalized row per collected object, and its compact Redis encoding.

A row is stored as one member of its cluster's lexicographic sorted set (see common.index.keys):

    <namespace> NUL <kind key> NUL <name> NUL <status code> NUL <reason> NUL <message>
                NUL <lastTransitionTime epoch s> NUL <revision> NUL <apiVersion> NUL <uiUrl>
                NUL <warnings> NUL <edges> NUL <blockedBy> NUL <recent> NUL <labels>

The status code is one byte: the health (`h` healthy, `u` unhealthy, `p` progressing, `k`
unknown), upper-case when the object is suspended, so one code filter selects any mix of health
and suspension. Cluster-scoped objects have an empty namespace (they sort first). `warnings` is
empty for none. `edges` (what the object depends on) and `blockedBy` (the nearest failing node
upstream) are in common.index.edges' format; a member stored before they existed reads as
having none. `recent` is written by the writer from the row's transitions (common.index.history):
`<failingSince epoch s>` then `,<epoch s>` per transition of the last day, newest first; empty
for a row that has not transitioned (most rows). `failingSince` and `transitions24h` are
computed from it when a row is served (`transitions24h` slides with time: `transitions_24h`).
`labels` is the object's labels in common.index.label_field's compact form (valid ones only,
capped; a leading `!` when some were cut).

The first three fields are the sort key (namespace, kind, name), so ZRANGEBYLEX walks rows in
the list order and one command returns a whole page with its data. NUL sorts before every other
byte, so `a` < `a-b` holds for the prefixes too. Text fields never contain NUL (stripped), and
a message repeating the revision stores a one-byte placeholder for it (saves ~50 bytes a row).
The built-in apiVersions, the common reasons and the common messages are stored as `~` + a hex
code (`API_VERSION_CODES`, `REASON_CODES`, `MESSAGE_CODES`).
"""

from __future__ import annotations

import bisect
import calendar
import functools
import json
import time
from collections.abc import Collection, Iterable, Sequence
from typing import Any, NotRequired, TypedDict

from common.index import edges as edge_codec
from common.index import keys, label_field
from common.kinds import relations
from common.kinds import status as status_rules
from common.kinds.registry import Kind
from common.kinds.status import Finding

SEP = "\x00"
REV_MARK = "\x01"
FIELDS = (
    "namespace",
    "kind",
    "name",
    "status",
    "reason",
    "message",
    "lastTransitionTime",
    "revision",
    "apiVersion",
    "uiUrl",
    "warnings",
    "edges",
    "blockedBy",
    "recent",
    "labels",
)
"""The member's fields in order. The first three are the identity (the sort key); the status code
(one byte) follows it: common.index.read.lua relies on exactly that (checked at its import)."""
_REVISION = FIELDS.index("revision")
STATUS_CODES = {"healthy": "h", "unhealthy": "u", "progressing": "p", "unknown": "k"}
"""The code of each health when not suspended; suspended rows use the upper-case code."""
LEGACY_SUSPENDED = "s"
"""The code rows written before suspension left the statuses carry (health unknown): read as
unknown and suspended until the next full sync rewrites them."""
CODE_STATUS = {
    **{v: k for k, v in STATUS_CODES.items()},
    **{v.upper(): k for k, v in STATUS_CODES.items()},
    LEGACY_SUSPENDED: "unknown",
}
_EDGES, _BLOCKED = FIELDS.index("edges"), FIELDS.index("blockedBy")
_LTT, _RECENT = FIELDS.index("lastTransitionTime"), FIELDS.index("recent")
_LABELS = FIELDS.index("labels")
_WHOLE = len(FIELDS) - 1  # separators in a member with every field
MAX_LABELS, MAX_LABELS_BYTES = label_field.MAX_LABELS, label_field.MAX_LABELS_BYTES
SLIM_LABELS = ("fleetscope", "labels")
"""Where a slimmed object (collector.mesh.slim, held by the watcher) keeps its row's labels
field in its metadata: a tuple key, which no object parsed from JSON can hold."""
capped_labels = label_field.capped
labels_field = label_field.encode
parse_labels = label_field.decode
label_needles = label_field.needles
DAY_S = 86400
API_VERSION_CODES = {
    a: f"~{i:x}"
    for i, a in enumerate(
        (
            "kustomize.toolkit.fluxcd.io/v1",
            "kustomize.toolkit.fluxcd.io/v1beta2",
            "helm.toolkit.fluxcd.io/v2",
            "helm.toolkit.fluxcd.io/v2beta2",
            "helm.toolkit.fluxcd.io/v2beta1",
            "source.toolkit.fluxcd.io/v1",
            "source.toolkit.fluxcd.io/v1beta2",
            "image.toolkit.fluxcd.io/v1",
            "image.toolkit.fluxcd.io/v1beta2",
            "notification.toolkit.fluxcd.io/v1beta3",
            "notification.toolkit.fluxcd.io/v1beta2",
            "notification.toolkit.fluxcd.io/v1",
            "networking.istio.io/v1",
            "networking.istio.io/v1beta1",
            "networking.istio.io/v1alpha3",
            "security.istio.io/v1",
            "security.istio.io/v1beta1",
            "security.istio.io/v1alpha3",
            "telemetry.istio.io/v1",
            "telemetry.istio.io/v1beta1",
            "telemetry.istio.io/v1alpha3",
            "gateway.networking.k8s.io/v1",
            "gateway.networking.k8s.io/v1beta1",
            "gateway.networking.k8s.io/v1alpha2",
            "gateway.networking.k8s.io/v1alpha3",
            "kuadrant.io/v1",
            "kuadrant.io/v1beta3",
            "kuadrant.io/v1beta2",
            "kuadrant.io/v1alpha1",
        )
    )
}
"""The built-in kinds' apiVersions are stored as a short code (`~` + hex index: ~25 bytes a row
saved). Append only: a stored code must keep its meaning. Any other apiVersion is stored as is
(none starts with `~`)."""
API_VERSION_OF = {v: k for k, v in API_VERSION_CODES.items()}
REASON_CODES = {
    r: f"~{i:x}"
    for i, r in enumerate(
        (
            # Flux (fluxcd/pkg apis/meta and the controllers' own)
            "ReconciliationSucceeded",
            "ReconciliationFailed",
            "Succeeded",
            "Failed",
            "Progressing",
            "ProgressingWithRetry",
            "Suspended",
            "DependencyNotReady",
            "ArtifactFailed",
            "BuildFailed",
            "HealthCheckFailed",
            "ArtifactInStorage",
            "NewArtifact",
            "GitOperationFailed",
            "StorageOperationFailed",
            "URLInvalid",
            "AuthenticationFailed",
            "SourceManagerFailed",
            "OCIPullFailed",
            "ChartPullSucceeded",
            "ChartPullError",
            "ChartPackageSucceeded",
            "ChartPackageError",
            "InstallSucceeded",
            "InstallFailed",
            "UpgradeSucceeded",
            "UpgradeFailed",
            "TestSucceeded",
            "TestFailed",
            "RollbackSucceeded",
            "UninstallSucceeded",
            "ArtifactOutdated",
            "InvalidPolicy",
            "ValidationFailed",
            "PruneFailed",
            # fleetscope's own (common.kinds.status)
            "LatestGenerationNotObserved",
            "Terminating",
            "Stalled",
            # Gateway API
            "Accepted",
            "Programmed",
            "Pending",
            "Invalid",
            "NoResources",
            "AddressNotAssigned",
            "InvalidParameters",
            "UnsupportedAddress",
            "ResolvedRefs",
            "InvalidCertificateRef",
            "InvalidRouteKinds",
            "RefNotPermitted",
            "ProtocolConflict",
            "HostnameConflict",
            "NotAllowedByListeners",
            "NoMatchingListenerHostname",
            "NoMatchingParent",
            "UnsupportedValue",
            "InvalidKind",
            "BackendNotFound",
            "UnsupportedProtocol",
            # Kuadrant
            "Enforced",
            "Overridden",
            "TargetNotFound",
            "Conflicted",
            "MissingDependency",
            "Unknown",
        )
    )
}
"""Common condition reasons are stored as a short code (`~` + hex index: most rows carry one of
them), as are the common messages below once the revision in them is replaced by its mark.
Append only: a stored code must keep its meaning. Any other value is stored as is, with one more
`~` in front when it starts with `~` (so a stored value starting with `~` is always a code or
escaped)."""
REASON_OF = {v: k for k, v in REASON_CODES.items()}
MESSAGE_CODES = {
    m: f"~{i:x}"
    for i, m in enumerate(
        (
            f"Applied revision: {REV_MARK}",  # kustomize-controller
            f"stored artifact for revision '{REV_MARK}'",  # source-controller (Git, Bucket)
            f"stored artifact: revision '{REV_MARK}'",  # source-controller (Helm)
            f"stored artifact for digest '{REV_MARK}'",  # source-controller (OCI)
            "Reconciliation in progress",
            "reconciliation in progress",
            "Fulfilling prerequisites",
            "Resource accepted",
            "Handled by Istio controller",
            "AuthPolicy has been successfully enforced",  # Kuadrant
            "RateLimitPolicy has been successfully enforced",
            "DNSPolicy has been successfully enforced",
            "TLSPolicy has been successfully enforced",
        )
    )
}
MESSAGE_OF = {v: k for k, v in MESSAGE_CODES.items()}
SUSPENDED_CODES = frozenset(c for c in CODE_STATUS if c.isupper() or c == LEGACY_SUSPENDED)
UI_URL_ANNOTATION = "fleetscope.io/ui-url"
_esc = json.encoder.encode_basestring_ascii  # in C; quotes and escapes as json.dumps does


class Row(TypedDict):
    """A row as the API returns it."""

    cluster: str
    namespace: str
    kind: str
    apiVersion: str
    name: str
    status: str
    suspended: bool
    reason: str
    message: str
    warnings: int
    lastTransitionTime: str | None
    revision: str
    uiUrl: str | None
    failingSince: NotRequired[str | None]
    """Served rows only (from the stored `recent` field), as `transitions24h`."""
    transitions24h: NotRequired[int]
    blockedBy: NotRequired[edge_codec.Blocker]
    labels: NotRequired[dict[str, str]]
    """The object's labels (valid ones, at most MAX_LABELS / MAX_LABELS_BYTES)."""
    labelsTruncated: NotRequired[bool]
    """Present (true) only when labels were cut: invalid, or past the caps."""


def member(
    cluster: str,
    kind: Kind,
    api_version: str,
    obj: dict[str, Any],
    findings: Sequence[Finding] | None = None,
    extra_refs: Iterable[relations.Ref] = (),
    services: Collection[tuple[str, str]] | None = None,
) -> str:
    """The encoded row of one raw object with its edges (`relations.extract`, then
    `extra_refs`: the ones that need the cluster's other objects); `services` as
    common.index.edges.encode has it. `blockedBy` is left empty: the writer fills it in.

    `encode(build_row(...), edges)` without the Row in between: this runs once per collected
    object (tests/common/index/test_rows.py holds the two equal)."""
    meta = obj.get("metadata") or {}
    rule = kind.status_rule
    st = status_rules.evaluate(rule, obj, findings)
    namespace = str(meta.get("namespace") or "") if kind.namespaced else ""
    name = str(meta.get("name") or "")
    key = kind.key
    held = meta.get(SLIM_LABELS)
    if isinstance(held, str):  # a slimmed object (collector.mesh.slim): its labels field,
        labels_text = held  # made for this name and namespace (not decoded to encode again)
    else:
        labels_text = label_field.of_object(meta.get("labels"), name, namespace)
    refs = relations.extract(kind, obj)
    if extra_refs:
        refs = list(dict.fromkeys([*refs, *extra_refs]))
    if refs:
        # A self-reference (the flux-system Kustomization's own labels) is no dependency.
        refs = [r for r in refs if r.name != name or r.kind != key or r.namespace != namespace]
    return _join(
        namespace,
        key,
        name,
        st.status,
        status_rules.is_suspended(rule, obj),
        st.reason,
        st.message,
        st.last_transition_time or None,
        status_rules.revision(obj),
        api_version,
        _ui_url(cluster, kind, api_version, meta, namespace, name),
        st.warnings,
        edge_codec.encode(namespace, refs, services) if refs else "",
        "",
        labels_text,
    )


def members(
    cluster: str, kind: Kind, api_version: str, objects: Iterable[dict[str, Any]]
) -> list[str]:
    """The encoded rows of objects of a kind that needs nothing else (`member` of each)."""
    return [member(cluster, kind, api_version, o) for o in objects]


def _ui_url(
    cluster: str, kind: Kind, api_version: str, meta: dict[str, Any], namespace: str, name: str
) -> str | None:
    """The object's link: its `fleetscope.io/ui-url` annotation, else the kind's template."""
    annotations = meta.get("annotations") or {}
    ui_url = annotations.get(UI_URL_ANNOTATION) if isinstance(annotations, dict) else None
    if not (isinstance(ui_url, str) and ui_url) and kind.ui_url_template:
        ui_url = kind.ui_url(cluster, namespace, name, api_version)
    return ui_url if isinstance(ui_url, str) and ui_url else None


def build_row(
    cluster: str,
    kind: Kind,
    api_version: str,
    obj: dict[str, Any],
    findings: Sequence[Finding] | None = None,
) -> Row:
    """Normalize one raw object (as listed from the leaf) into a row. `findings`: fleetscope's
    own validation of the object (common.kinds.istio_checks), None when its kind has no check."""
    meta = obj.get("metadata") or {}
    st = status_rules.evaluate(kind.status_rule, obj, findings)
    namespace = str(meta.get("namespace") or "") if kind.namespaced else ""
    name = str(meta.get("name") or "")
    held = meta.get(SLIM_LABELS)
    if isinstance(held, str):  # a slimmed object (collector.mesh.slim): its labels field
        labels, cut = parse_labels(held, name, namespace)
    else:
        labels, cut = capped_labels(meta.get("labels"))
    row = Row(
        cluster=cluster,
        namespace=namespace,
        kind=kind.key,
        apiVersion=api_version,
        name=name,
        status=st.status,
        suspended=status_rules.is_suspended(kind.status_rule, obj),
        reason=st.reason,
        message=st.message,
        warnings=st.warnings,
        lastTransitionTime=st.last_transition_time or None,
        revision=status_rules.revision(obj),
        uiUrl=_ui_url(cluster, kind, api_version, meta, namespace, name),
        labels=labels,
    )
    if cut:
        row["labelsTruncated"] = True
    return row


def labels_of(member: str | bytes) -> dict[str, str]:
    """The labels of an encoded member (what selectors match), without decoding the rest."""
    if isinstance(member, bytes):
        member = member.decode()
    parts = member.split(SEP)
    if len(parts) <= _LABELS or not parts[_LABELS]:
        return {}
    return parse_labels(parts[_LABELS], parts[2], parts[0])[0]


def status_code(status: str, suspended: bool) -> str:
    """The one-byte code of a health and suspension."""
    code = STATUS_CODES[status]
    return code.upper() if suspended else code


def codes_for(statuses: Iterable[str], suspended: bool | None) -> str:
    """The codes of rows with one of `statuses` (any when empty) and that suspension (either
    when None), in a stable order; legacy suspended rows count as unknown and suspended."""
    wanted = set(statuses) or set(STATUS_CODES)
    flags = (False, True) if suspended is None else (suspended,)
    out = [status_code(h, f) for h in STATUS_CODES if h in wanted for f in flags]
    if suspended is not False and "unknown" in wanted:
        out.append(LEGACY_SUSPENDED)
    return "".join(out)


def sort_key(namespace: str, kind: str, name: str) -> str:
    """The member prefix that orders rows: namespace, kind, name."""
    return f"{namespace}{SEP}{kind}{SEP}{name}{SEP}"


def identity_of(namespace: str, kind: str, name: str) -> str:
    """The identity (`sort_key`) of the row of an object with this namespace and name, both
    cleaned as its member has them (`_join`): what a deletion that carries only the object
    must remove."""
    return sort_key(_clean(namespace), kind, _clean(name))


def encode(row: Row, edges: str = "", blocked: str = "") -> str:
    """A row as its sorted-set member (the cluster is implied by the key); `edges` and
    `blocked` (the blockedBy field) in common.index.edges' format; `recent` empty (the writer
    fills it in from the stored row and its transitions)."""
    return _join(
        row["namespace"],
        row["kind"],
        row["name"],
        row["status"],
        row["suspended"],
        row["reason"],
        row["message"],
        row["lastTransitionTime"],
        row["revision"],
        row["apiVersion"],
        row["uiUrl"],
        row["warnings"],
        edges,
        blocked,
        labels_field(
            row.get("labels") or {},
            row["name"],
            row["namespace"],
            bool(row.get("labelsTruncated")),
        ),
    )


def _join(
    namespace: str,
    kind: str,
    name: str,
    status: str,
    suspended: bool,
    reason: str,
    message: str,
    last_transition_time: str | None,
    revision: str,
    api_version: str,
    ui_url: str | None,
    warnings: int,
    edges: str,
    blocked: str,
    labels: str,
) -> str:
    """The member of a row's values (FIELDS order; `recent` empty): the one place that writes it."""
    rev = _clean(revision)
    message = _clean(message)
    if rev and len(rev) > 8 and rev in message:
        message = message.replace(rev, REV_MARK)
    return SEP.join(
        (
            _clean(namespace),  # no API server takes a NUL in a name, but a leaf is not trusted
            kind,
            _clean(name),
            status_code(status, suspended),
            _code(_clean(reason), REASON_CODES),
            _code(message, MESSAGE_CODES),
            _epoch(last_transition_time),
            rev,
            API_VERSION_CODES.get(api_version, api_version),
            _clean(ui_url or ""),
            str(warnings) if warnings else "",
            edges,
            blocked,
            "",
            labels,
        )
    )


def _fields(member: str) -> list[str]:
    """The member's fields; fields added since a member was written (`warnings`, `edges`,
    `blockedBy`, `recent`) read as empty."""
    parts = member.split(SEP)
    if len(parts) < len(FIELDS):
        parts.extend([""] * (len(FIELDS) - len(parts)))
    return parts


def split_member(member: str) -> list[str]:
    """Every field of an encoded member (FIELDS order), fields it predates empty."""
    return _fields(member)


def edges_of(member: str) -> str:
    """The `edges` field of an encoded member."""
    return _fields(member)[_EDGES]


def blocked_of(member: str) -> str:
    """The `blockedBy` field of an encoded member ("" when not blocked)."""
    return _fields(member)[_BLOCKED]


def with_blocked(member: str, blocked: str) -> str:
    """The member with its `blockedBy` field set to `blocked`."""
    parts = _fields(member)
    parts[_BLOCKED] = blocked
    return SEP.join(parts)


def recent_of(member: str) -> str:
    """The `recent` field of an encoded member ("" when it has not transitioned)."""
    return _fields(member)[_RECENT]


def with_recent(member: str, recent: str) -> str:
    """The member with its `recent` field set."""
    parts = _fields(member)
    parts[_RECENT] = recent
    return SEP.join(parts)


def without_recent(member: str) -> str:
    """The member as the leaf's object alone makes it (its `recent` field empty, every field
    present): what a full sync's snapshot holds. Run on every stored row per sync: most have
    no `recent`, and are returned as they are without splitting every field."""
    if member.count(SEP) == _WHOLE:
        head, recent, labels = member.rsplit(SEP, 2)
        return member if not recent else f"{head}{SEP}{SEP}{labels}"
    return with_recent(member, "")


def has_recent(member: str) -> bool:
    """Whether an encoded member has a `recent` field (it transitioned lately)."""
    if member.count(SEP) == _WHOLE:
        return bool(member.rsplit(SEP, 2)[1])
    return bool(recent_of(member))


def bare(member: str) -> str:
    """The member without what the writer adds (`blockedBy`, `recent`): what a watch event or
    a list builds from the object alone, to compare with."""
    parts = _fields(member)
    parts[_BLOCKED] = parts[_RECENT] = ""
    return SEP.join(parts)


def recent_times(recent: str) -> tuple[str, list[int]]:
    """(failingSince epoch text or "", the transition times) of a `recent` field."""
    if not recent:
        return "", []
    since, *times = recent.split(",")
    return since, [int(t) for t in times if t.isdigit()]


def transitions_24h(recent: str, now: float | None = None) -> int:
    """Transitions within the last 24 hours, as of `now`."""
    if not recent:
        return 0
    return within_24h(sorted(recent_times(recent)[1]), time.time() if now is None else now)


def within_24h(times: Sequence[int], now: float) -> int:
    """How many of the sorted transition `times` are within the 24 hours before `now` (one at
    exactly 24 hours counts): for a caller that keeps a row's times parsed (query.body)."""
    return len(times) - bisect.bisect_left(times, now - DAY_S)


def failing_since(code: str, ltt: str, recent: str) -> str | None:
    """The start of the current run of non-healthy statuses (RFC 3339), None when healthy: as
    the writer recorded it, else (a row that has not transitioned since fleetscope first saw
    it) its lastTransitionTime."""
    if CODE_STATUS[code] == "healthy":
        return None
    since = recent.split(",", 1)[0] if recent else ""
    return _iso(since or ltt)


def decode(cluster: str, member: str | bytes) -> Row:
    """The inverse of `encode`."""
    if isinstance(member, bytes):
        member = member.decode()
    (
        ns,
        kind,
        name,
        code,
        reason,
        message,
        ltt,
        rev,
        api_version,
        ui_url,
        warn,
        _,
        blocked,
        recent,
        labels_text,
    ) = _fields(member)
    labels, cut = parse_labels(labels_text, name, ns)
    row = Row(
        cluster=cluster,
        namespace=ns,
        kind=kind,
        apiVersion=API_VERSION_OF.get(api_version, api_version),
        name=name,
        status=CODE_STATUS[code],
        suspended=code in SUSPENDED_CODES,
        reason=_reason(reason),
        message=_message(message, rev),
        warnings=int(warn or 0),
        lastTransitionTime=_iso(ltt),
        revision=rev,
        uiUrl=ui_url or None,
        failingSince=failing_since(code, ltt, recent),
        transitions24h=transitions_24h(recent),
        labels=labels,
    )
    if cut:
        row["labelsTruncated"] = True
    if blocked:
        row["blockedBy"] = edge_codec.decode_blocker(cluster, blocked)  # type: ignore[typeddict-item]
    return row


def decode_page(rows: list[tuple[str, bytes]]) -> list[Row]:
    """`decode` of each (cluster, member) of a page (`Page.rows`: the alert evaluation and the
    tests; the query service formats served rows straight to JSON with `timeless_row_json`)."""
    out: list[Row] = []
    append, codes, iso, susp = out.append, CODE_STATUS, _iso, SUSPENDED_CODES
    api_versions, reason_of, message = API_VERSION_OF, _reason, _message
    now = time.time()
    for cluster, member in rows:
        (
            ns,
            kind,
            name,
            code,
            reason,
            msg,
            ltt,
            rev,
            api_version,
            ui_url,
            warn,
            _,
            blocked,
            rec,
            lab,
        ) = _fields(member.decode())
        labels, cut = parse_labels(lab, name, ns) if lab else ({}, False)
        row: Any = {
            "cluster": cluster,
            "namespace": ns,
            "kind": kind,
            "apiVersion": api_versions.get(api_version, api_version),
            "name": name,
            "status": codes[code],
            "suspended": code in susp,
            "reason": reason_of(reason),
            "message": message(msg, rev),
            "warnings": int(warn or 0),
            "lastTransitionTime": iso(ltt),
            "revision": rev,
            "uiUrl": ui_url or None,
            "failingSince": failing_since(code, ltt, rec),
            "transitions24h": transitions_24h(rec, now) if rec else 0,
            "labels": labels,
        }
        if cut:
            row["labelsTruncated"] = True
        if blocked:
            row["blockedBy"] = edge_codec.decode_blocker(cluster, blocked)
        append(row)
    return out


def row_json(cluster: str, member: bytes, now: float | None = None) -> str:
    """`decode(cluster, member)` as compact JSON text (ASCII, keys in Row order), formatted
    directly: json.dumps builds a new encoder per call, costlier than the row's encoding.
    Without `blockedBy`."""
    text = timeless_row_json(cluster, member)
    count = transitions_24h(recent_of(member.decode()), now)
    return f'{text[:-1]},"transitions24h":{count}}}'


def timeless_row_json(cluster: str, member: bytes) -> str:
    """`row_json` without `transitions24h`, which slides with time (query.body caches this and
    adds the count per request)."""
    ns, kind, name, code, reason, msg, ltt, rev, api_version, ui_url, warn, _, _, rec, lab = (
        _fields(member.decode())
    )
    e = _esc
    msg, reason = _message(msg, rev), _reason(reason)
    at = _iso(ltt)
    since = failing_since(code, ltt, rec)
    suspended = "true" if code in SUSPENDED_CODES else "false"
    return (
        f'{{"cluster":{e(cluster)},"namespace":{e(ns)},"kind":{e(kind)},'
        f'"apiVersion":{e(API_VERSION_OF.get(api_version, api_version))},"name":{e(name)},"status":"{CODE_STATUS[code]}",'
        f'"suspended":{suspended},"reason":{e(reason)},"message":{e(msg)},'
        f'"warnings":{int(warn or 0)},"lastTransitionTime":{e(at) if at else "null"},"revision":{e(rev)},'
        f'"uiUrl":{e(ui_url) if ui_url else "null"},'
        f'"failingSince":{e(since) if since else "null"},"labels":{_labels_json(lab, name, ns)}}}'
    )


def _labels_json(field: str, name: str, namespace: str) -> str:
    """The `labels` object (and `labelsTruncated` when cut) of a stored labels field, as JSON."""
    if not field:
        return "{}"
    labels, cut = parse_labels(field, name, namespace)
    text = "{" + ",".join(f"{_esc(k)}:{_esc(v)}" for k, v in labels.items()) + "}"
    return text + ',"labelsTruncated":true' if cut else text


def head(member: str) -> list[str]:
    """[namespace, kind, name, status code, the rest] of an encoded member: its identity and
    status code without splitting the other fields."""
    return member.split(SEP, 4)


def head_to_time(member: str) -> list[str]:
    """[namespace, kind, name, status code, reason, message, lastTransitionTime (epoch text or
    ""), the rest] of an encoded member: what places its time-index entry (common.index.timeline)."""
    return member.split(SEP, _LTT + 1)


# Stored members as Redis returns them (bytes), for the readers' hot paths: each accessor is the
# one split the inline code did (no decode, nothing else allocated). An identity (`sort_key`,
# encoded) starts as a member does, so the identity fields read the same from both.


def member_head(member: bytes) -> list[bytes]:
    """[namespace, kind, name, status code, the rest] of a stored member."""
    return member.split(b"\x00", 4)


def member_ns_kind(member: bytes) -> list[bytes]:
    """[namespace, kind, the rest] of a stored member or an identity."""
    return member.split(b"\x00", 2)


def member_name(member: bytes) -> bytes:
    """The name of a stored member or an identity."""
    return member.split(b"\x00", 3)[2]


def member_namespace_key(member: bytes) -> bytes:
    """`namespace NUL` of a stored member or an identity (what `namespace_prefix` makes)."""
    return member[: member.index(b"\x00") + 1]


def member_status_code(member: bytes) -> bytes:
    """The one-byte status code of a stored member."""
    return member.split(b"\x00", 4)[3]


def member_unlabelled(member: bytes) -> bool:
    """Whether a stored member has no labels (its last field, `labels`, is empty)."""
    return member[-1:] == b"\x00"


def identity(member: str | bytes) -> str:
    """The sort-key prefix (namespace, kind, name) of an encoded member."""
    if isinstance(member, bytes):
        member = member.decode()
    ns, kind, name, _ = member.split(SEP, 3)
    return sort_key(ns, kind, name)


def split_identity(identity: str) -> tuple[str, str, str]:
    """(namespace, kind, name) of an identity (`sort_key`)."""
    ns, kind, name, _ = identity.split(SEP, 3)
    return ns, kind, name


def identity_bytes(member: bytes) -> bytes:
    """The identity prefix of a stored member, as bytes (readers resume after it)."""
    ns_end = member.index(b"\x00")
    kind_end = member.index(b"\x00", ns_end + 1)
    return member[: member.index(b"\x00", kind_end + 1) + 1]


def namespace_prefix(namespace: str) -> bytes:
    """Every member of a namespace starts with this (a range's lower bound)."""
    return namespace.encode() + b"\x00"


def kind_prefix(namespace: str, kind: str) -> bytes:
    """Every member of one kind in a namespace starts with this."""
    return f"{namespace}{SEP}{kind}{SEP}".encode()


def kind_of(member: str) -> str:
    """The kind key of an encoded member."""
    return member.split(SEP, 2)[1]


def name_entry(member: str) -> tuple[str, str]:
    """(name, `namespace NUL kind NUL`) of an encoded member: the name index's key and entry."""
    ns, kind, name, _ = member.split(SEP, 3)
    return name, f"{ns}{SEP}{kind}{SEP}"


def is_member(raw: bytes) -> bool:
    """Whether a stored value looks like an encoded member (it has the separators)."""
    return 9 <= raw.count(b"\x00") <= len(FIELDS) - 1  # from the first layout (10 fields) on


def count_field(member: str) -> str:
    """The `counts` hash field a member counts under (common.index.keys.counts_field)."""
    _ns, kind, _name, code, _ = member.split(SEP, 4)
    return keys.counts_field(kind, CODE_STATUS[code], code in SUSPENDED_CODES)


def parse_count_field(count_field: str | bytes) -> tuple[str, str, bool]:
    """(kind, status, suspended) of a `counts` field (as stored, or as the Lua count scripts
    return it)."""
    text = count_field.decode() if isinstance(count_field, bytes) else count_field
    kind, status, *flag = text.split(SEP)
    return kind, status, bool(flag)


def count_field_kind(count_field: str) -> str:
    return count_field.split(SEP, 1)[0]


def status_of(member: str | bytes) -> str:
    """The status (health) of an encoded member, without decoding the rest."""
    if isinstance(member, bytes):
        member = member.decode()
    return CODE_STATUS[member.split(SEP, 4)[3]]


def revision_of(member: str | bytes) -> str:
    """The revision of an encoded member ("" for none), without decoding the rest."""
    if isinstance(member, bytes):
        member = member.decode()
    return member.split(SEP, _REVISION + 1)[_REVISION] if member.count(SEP) > _REVISION else ""


def suspended_of(member: str | bytes) -> bool:
    """Whether an encoded member is suspended, without decoding the rest."""
    if isinstance(member, bytes):
        member = member.decode()
    return member.split(SEP, 4)[3] in SUSPENDED_CODES


_STATUS_PART = (3, FIELDS.index("reason"), _LTT, _REVISION, _RECENT, _LABELS)


def status_part(member: str) -> tuple[str, ...]:
    """What groups, facets and count tables read of a member besides its identity: the status
    code, reason, transition time, revision, transitions and labels (not the message, warnings,
    apiVersion, uiUrl, edges nor `blockedBy`): a write that changes only those leaves the
    cluster's status generation alone (common.index.keys.status_generation)."""
    f = member.split(SEP)
    return tuple(f[i] if i < len(f) else "" for i in _STATUS_PART)


def decode_reason(stored: str) -> str:
    """A reason as stored in a member (coded or escaped) made plain again."""
    return _reason(stored)


def decode_message(stored: str, rev: str) -> str:
    """A message as stored in a member (coded, escaped, its revision marked) made plain again."""
    return _message(stored, rev)


def _code(value: str, codes: dict[str, str]) -> str:
    """`value` as stored: its code, or itself (escaped with one more `~` if it starts with one)."""
    code = codes.get(value)
    if code is not None:
        return code
    return "~" + value if value[:1] == "~" else value


def _reason(stored: str) -> str:
    """The reason of a stored member: its code or escape undone."""
    return (REASON_OF.get(stored) or stored[1:]) if stored[:1] == "~" else stored


def _message(stored: str, rev: str) -> str:
    """The message of a stored member: its code or escape undone, the revision put back."""
    if stored[:1] == "~":
        stored = MESSAGE_OF.get(stored) or stored[1:]
    return stored.replace(REV_MARK, rev) if REV_MARK in stored else stored


def _clean(text: str) -> str:
    return text.replace(SEP, " ").replace(REV_MARK, " ") if text else ""


def _epoch(iso: str | None) -> str:
    if not iso:
        return ""
    # Sliced rather than strptime'd: this runs once per collected object.
    if len(iso) < 19 or iso[4] != "-" or iso[7] != "-" or iso[10] not in "Tt " or iso[13] != ":":
        return ""
    try:
        day = _day_s(iso[0:4], iso[5:7], iso[8:10])
        return str(day + int(iso[11:13]) * 3600 + int(iso[14:16]) * 60 + int(iso[17:19]))
    except ValueError:
        return ""


@functools.lru_cache(maxsize=4096)
def _day_s(year: str, month: str, day: str) -> int:
    """calendar.timegm of a date's midnight (timegm is linear in the time of day), cached: a
    cluster's times fall on a few hundred days."""
    return calendar.timegm((int(year), int(month), int(day), 0, 0, 0))


@functools.lru_cache(maxsize=65536)  # decoded for every row of every page; times repeat a lot
def _iso(epoch: str) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch))) if epoch else None


def clear_caches() -> None:
    """Forget the times decoded so far (a reader's sweep calls it: the rows read lately, not
    every row ever read, common.index.read.memo.on_sweep)."""
    _iso.cache_clear()
