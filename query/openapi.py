"""The OpenAPI 3 document of the query API, built here (kinds come from the registry), served
at `/api/v1/openapi.json`; `markdown()` renders docs/api.md from it (a test keeps them equal).
"""

from __future__ import annotations

import textwrap
from typing import Any

from common.index.keys import CLUSTER_NAME_RE
from common.index.read.facets import LABEL_KEYS_MAX, LABEL_VALUES_TOP
from common.index.registry_record import PROBLEM_TYPES
from common.kinds.registry import KindRegistry
from common.kinds.relations import RELATIONS
from common.kinds.status import STATUSES
from common.labels import MAX_SELECTOR_LEN
from query.params import (
    BY,
    DEFAULT_CLUSTER_LIMIT,
    DEFAULT_DEPTH,
    DEFAULT_LIMIT,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    MAX_DEPTH,
    MAX_LIMIT,
    MAX_VALUE_LEN,
    NAME_SUBSTRING,
    SORTS,
)

S = dict[str, Any]


def _ref(name: str) -> S:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(props: S, required: list[str] | None = None) -> S:
    return {"type": "object", "properties": props, "required": required or list(props)}


_STR, _INT, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_NSTR = {"type": "string", "nullable": True}
# The same patterns query.params enforces, so the document is exactly as strict as the service.
_CLUSTER = {"type": "string", "pattern": CLUSTER_NAME_RE.pattern}
# A namespace, or `_` for cluster-scoped objects (their rows have an empty namespace).
_NAMESPACE = {"type": "string", "pattern": f"^_$|{DNS_LABEL.pattern}"}
_OBJECT_NAME = {"type": "string", "pattern": DNS_SUBDOMAIN.pattern, "maxLength": MAX_VALUE_LEN}
_CLUSTER_REF = _obj({"cluster": _STR})

_STATUS = {"type": "string", "enum": list(STATUSES)}
_ROW = {
    "cluster": _STR,
    "namespace": _STR,
    "kind": _STR,
    "apiVersion": _STR,
    "name": _STR,
    "status": _STATUS,
    "suspended": _BOOL,
    "reason": _STR,
    "message": _STR,
    "warnings": {"type": "integer", "minimum": 0},
    "lastTransitionTime": _NSTR,
    "revision": _STR,
    "uiUrl": _NSTR,
    # the start of the current run of non-healthy statuses (null when healthy); the row's
    # recorded transitions in the last 24 hours (at most FLEETSCOPE_HISTORY_MAX)
    "failingSince": _NSTR,
    "transitions24h": {"type": "integer", "minimum": 0},
    # the object's labels (valid ones, at most 32 and 512 bytes stored: see `labelsTruncated`)
    "labels": {"type": "object", "additionalProperties": _STR},
}
_EDGE = {
    "relation": {"type": "string", "enum": list(RELATIONS)},
    "cluster": _STR,
    "namespace": _STR,
    "kind": _STR,
    "name": _STR,
    "sectionName": _STR,
    "exists": _BOOL,
    "status": {**_STATUS, "nullable": True},
    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH},
}


def _list(name: str) -> S:
    return {"type": "array", "items": _ref(name)}


def _page_of(name: str) -> S:
    """A page's fields: its items, the next page's token and the freshness block."""
    return {"items": _list(name), "continue": _NSTR, "freshness": _ref("Freshness")}


# What every group reports beside its key: clusters, clusters per status, suspended clusters.
_GROUP = {
    "total": _INT,
    "statuses": _obj({s: _INT for s in STATUSES}),
    "suspended": _INT,
}

_OBJECT_KEY = {"namespace": _STR, "kind": _STR, "name": _STR}

# Version drift (object groups): the distinct non-empty revisions of the group's clusters, most
# clusters first, then by revision; five listed, the rest summed (common.index.revisions).
_REVISIONS = {
    "revisions": {
        "type": "array",
        "items": _obj({"revision": _STR, "clusters": _INT}, ["revision", "clusters"]),
    },
    "otherRevisions": _obj({"revisions": _INT, "clusters": _INT}, ["revisions", "clusters"]),
}

SCHEMAS: S = {
    "Error": _obj({"error": _STR, "message": _STR}),
    # `blockedBy`: only when the row has one and the caller may list that node.
    # `labelsTruncated`: only (true) when some labels were cut (invalid, or past the caps).
    "Row": _obj(
        {**_ROW, "blockedBy": _ref("Blocker"), "labelsTruncated": {"type": "boolean"}},
        list(_ROW),
    ),
    "Blocker": _obj(
        {"cluster": _STR, "namespace": _STR, "kind": _STR, "name": _STR, "exists": _BOOL}
    ),
    # `sectionName`: only when the reference names a listener.
    "Edge": _obj(_EDGE, [f for f in _EDGE if f != "sectionName"]),
    "Relations": _obj(
        {
            "object": _ref("Row"),
            "upstream": {"type": "array", "items": _ref("Edge")},
            "downstream": {"type": "array", "items": _ref("Edge")},
            "hidden": {"type": "integer", "minimum": 0},
        }
    ),
    "Freshness": _obj(
        {
            "degraded": _BOOL,
            "state": {"type": "string", "enum": ["ready", "rebuilding", "degraded"]},
            "message": _STR,
            "collected": _INT,
            "total": _INT,
            "stale": {"type": "array", "items": _obj({"cluster": _STR, "lastSuccess": _NSTR})},
            "notCollected": {"type": "array", "items": _obj({"cluster": _STR, "state": _STR})},
            "hiddenStaleRbac": {
                "type": "array",
                "items": _obj({"cluster": _STR, "rbacSyncedAt": _NSTR}),
            },
        }
    ),
    "ObjectList": _obj(
        {
            "items": {"type": "array", "items": _ref("Row")},
            "continue": _NSTR,
            "resourceVersion": {
                "type": "string",
                "description": "the fleet position the page was read at: watch from it",
            },
            "freshness": _ref("Freshness"),
        }
    ),
    "Facets": _obj(
        {
            "total": _INT,
            "clusters": {"type": "object", "additionalProperties": _INT},
            "kinds": {"type": "object", "additionalProperties": _INT},
            "statuses": {"type": "object", "additionalProperties": _INT},
            "suspended": _obj({"true": _INT, "false": _INT}),
            # objects per namespace (`_` for cluster-scoped objects, as the filter takes it);
            # not with `by`
            "namespaces": {"type": "object", "additionalProperties": _INT},
            # with `labelKeys`: per key, its most common values with their objects
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "object", "additionalProperties": _INT},
            },
            # with `labelKeys`: per key with more values than shown, the values and objects left
            "labelsOmitted": {
                "type": "object",
                "additionalProperties": _obj({"values": _INT, "rows": _INT}),
            },
            "freshness": _ref("Freshness"),
        },
        ["total", "clusters", "kinds", "statuses", "suspended", "freshness"],
    ),
    "ClusterStatus": _obj(
        {
            "cluster": _STR,
            "state": {"type": "string", "enum": ["pending", "syncing", "ok", "error"]},
            "collected": _BOOL,
            "stale": _BOOL,
            "lastSuccess": _NSTR,
            "lastAttempt": _NSTR,
            "lastError": _NSTR,
            "objects": _INT,
            "rbacAgeS": {"type": "number", "nullable": True},
            "rbacFresh": _BOOL,
            "source": _STR,
            "ready": _BOOL,
            "notReadyReason": _NSTR,
            "registryError": _NSTR,
        }
    ),
    "RegistryProblem": _obj(
        {
            "type": {"type": "string", "enum": list(PROBLEM_TYPES)},
            "message": _STR,
            "cluster": _STR,
            "source": _STR,
            "origins": {"type": "array", "items": _STR},
        }
    ),
    "Registry": _obj(
        {
            "notReady": {
                "type": "array",
                "items": _obj({"cluster": _STR, "source": _STR, "reason": _STR}),
            },
            "problems": {"type": "array", "items": _ref("RegistryProblem")},
            "hidden": _INT,
        }
    ),
    "Status": _obj(
        {
            "state": {"type": "string", "enum": ["ready", "rebuilding", "degraded"]},
            "message": _STR,
            "collected": _INT,
            "total": _INT,
            "clusters": {"type": "array", "items": _ref("ClusterStatus")},
            "registry": _ref("Registry"),
        }
    ),
    "Clusters": _obj({"clusters": {"type": "array", "items": _ref("ClusterStatus")}}),
    "Access": _obj(
        {
            "user": _obj({"name": _STR, "groups": {"type": "array", "items": _STR}}),
            "clusters": {
                "type": "array",
                "items": _obj(
                    {
                        "cluster": _STR,
                        "rbacFresh": _BOOL,
                        "clusterWide": {"type": "array", "items": _STR},
                        "namespaces": {
                            "type": "object",
                            "additionalProperties": {"type": "array", "items": _STR},
                        },
                        "grants": {
                            "type": "array",
                            "items": _obj(
                                {
                                    "namespace": _STR,
                                    "kinds": {"type": "array", "items": _STR},
                                    "binding": _STR,
                                    "subject": _STR,
                                }
                            ),
                        },
                    }
                ),
            },
        }
    ),
    "GroupCluster": _obj(
        {
            "cluster": _STR,
            "status": _STATUS,
            "suspended": _BOOL,
            "objects": _INT,
            "statuses": {"type": "object", "additionalProperties": _INT},
            "revision": _STR,
        },
        ["cluster", "status", "suspended"],
    ),
    # `kind`, `name`, `revisions`, `otherRevisions`, a cluster's `revision`: object groups;
    # `objects`: namespace groups.
    "Group": _obj(
        {
            **_OBJECT_KEY,
            **_GROUP,
            **_REVISIONS,
            "objects": _INT,
            "clusters": _list("GroupCluster"),
        },
        ["namespace", "total", "statuses", "suspended", "clusters"],
    ),
    "GroupList": _obj({"items": _list("Group"), "continue": _NSTR, "freshness": _ref("Freshness")}),
    "ObjectGroup": _obj({**_OBJECT_KEY, **_GROUP, **_REVISIONS, **_page_of("Row")}),
    "NamespaceGroup": _obj(
        {"namespace": _STR, **_GROUP, "objects": _INT, **_page_of("GroupCluster")}
    ),
    "Detail": _obj({"cluster": _STR, "object": {"type": "object"}}),
    "Transition": _obj(
        {
            "at": _STR,
            "status": _STATUS,
            "suspended": _BOOL,
            "reason": _STR,
            "message": _STR,
            "revision": _STR,
            "source": {"type": "string", "enum": ["watch", "sync", "created", "deleted"]},
            "position": _INT,
        }
    ),
    "History": _obj(
        {
            # null when the object was deleted (its history is kept for the retention window)
            "object": {
                **_obj({**_ROW, "blockedBy": _ref("Blocker")}, list(_ROW)),
                "nullable": True,
            },
            "items": _list("Transition"),
            "continue": _NSTR,
        }
    ),
    "Health": _obj({"status": _STR}),
}

# Fleet alerts (`GET /api/v1/alerts`): `cluster` on a row's alert, `clusters` (the ones the
# caller may list it on) on a cross-cluster (`minClusters`) alert.
_STRINGS = {"type": "object", "additionalProperties": _STR}
SCHEMAS["Alert"] = _obj(
    {
        "rule": _STR,
        "severity": _STR,
        "cluster": _STR,
        "clusters": {"type": "array", "items": _STR},
        "namespace": _STR,
        "kind": _STR,
        "name": _STR,
        "status": _STR,
        "reason": _STR,
        "message": _STR,
        "labels": _STRINGS,
        "annotations": _STRINGS,
        "startsAt": _STR,
        "generatorURL": _STR,
    },
    ["rule", "severity", "namespace", "kind", "name", "labels", "annotations", "startsAt"],
)
SCHEMAS["AlertList"] = _obj(
    {
        "items": _list("Alert"),
        "rules": _obj({"count": _INT, "lastEvaluation": _NSTR, "error": _NSTR}),
        "freshness": _ref("Freshness"),
    },
    ["items", "rules", "freshness"],
)


def _param(name: str, desc: str, schema: S, where: str = "query", **extra: Any) -> S:
    return {"name": name, "in": where, "description": desc, "schema": schema, **extra}


def _list_param(name: str, desc: str, items: S) -> S:
    schema = {"type": "array", "items": items}
    return _param(name, desc + " (repeatable or comma-separated)", schema, explode=True)


def _filters(registry: KindRegistry) -> list[S]:
    return [
        _list_param("cluster", "only these clusters", _CLUSTER),
        _list_param("namespace", "only these namespaces (`_`: cluster-scoped objects)", _NAMESPACE),
        _list_param("kind", "only these kinds", {"type": "string", "enum": registry.keys()}),
        _list_param("status", "only these statuses", {"type": "string", "enum": list(STATUSES)}),
        _param(
            "suspended",
            "only suspended objects (`true`) or only those not suspended (`false`)",
            {"type": "string", "enum": ["true", "false"]},
        ),
        _param(
            "name",
            "object name contains this (case-insensitive)",
            {"type": "string", "pattern": NAME_SUBSTRING.pattern},
        ),
        _LABEL_SELECTOR,
    ]


_LABEL_SELECTOR = _param(
    "labelSelector",
    "only objects whose labels match, in Kubernetes' syntax: `k=v`, `k==v`, `k!=v`, "
    "`k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`, comma = AND (`!=` and `notin` "
    "also match objects without the key). A malformed selector is a 400 with the message "
    "kube-apiserver gives and the position where parsing stopped. Tested on each visible row "
    "read; with `sort`, a page may hold fewer than `limit` rows while `continue` is set; on "
    "facets and groups, counted from the matching rows (at most 100,000 for groups)",
    {"type": "string", "maxLength": MAX_SELECTOR_LEN},
)
_LABEL_KEYS = _param(
    "labelKeys",
    f"count objects by the values of these label keys (`labels`: the {LABEL_VALUES_TOP} values "
    f"with most objects per key; `labelsOmitted`: the rest), at most {LABEL_KEYS_MAX} keys; "
    "not with `by` or `flapping`. Counted from the visible rows, remembered per cluster until "
    "it is written",
    {"type": "array", "items": _STR},
    explode=True,
)


def _group_filters(registry: KindRegistry, kind: bool) -> list[S]:
    """The filters one group's routes take: cluster, status, suspended (and kind for a
    namespace group)."""
    keep = {"cluster", "status", "suspended", "labelSelector"} | ({"kind"} if kind else set())
    return [p for p in _filters(registry) if p["name"] in keep]


def _responses(ok: str, desc: str, *codes: int) -> S:
    out: S = {"200": {"description": desc, "content": {"application/json": {"schema": _ref(ok)}}}}
    texts = {
        400: "invalid parameter (the message names it and what it accepts)",
        401: "missing or invalid credentials",
        403: "the leaf cluster refused the caller",
        404: "unknown cluster, kind or object",
        429: "the service serves as many watch streams as it may (FLEETSCOPE_WATCH_STREAMS_MAX)",
        502: "the leaf cluster answered with an error or is unreachable",
        503: "the index (Redis) is not reachable",
        504: "the leaf cluster did not answer in time",
    }
    for code in codes:
        content = {"application/json": {"schema": _ref("Error")}}
        out[str(code)] = {"description": texts[code], "content": content}
    return out


def _csv(item: S) -> S:
    """A list route that also answers `Accept: text/csv` (see the Export tag)."""
    op = item["get"]
    op["responses"]["200"]["content"]["text/csv"] = {"schema": {"type": "string"}}
    op["responses"]["422"] = {
        "description": "the CSV export would exceed FLEETSCOPE_EXPORT_MAX_ROWS",
        "content": {"application/json": {"schema": _ref("Error")}},
    }
    op.setdefault("tags", []).append("Export")
    return item


def _get(
    summary: str,
    params: list[S],
    ok: str,
    desc: str,
    *codes: int,
    auth: bool = True,
    tag: str = "",
) -> S:
    op: S = {"summary": summary, "parameters": params, "responses": _responses(ok, desc, *codes)}
    if tag:
        op["tags"] = [tag]
    if not auth:
        op["security"] = []
    return {"get": op}


_RELATIONS = """\
`GET /api/v1/objects/{cluster}/{namespace}/{kind}/{name}/relations` answers from the index what
an object depends on (`upstream`: the targets of its references, such as sources, `dependsOn`,
parent Gateways, policy targets, the Kustomization or HelmRelease that applied it) and what
depends on it (`downstream`), level by level up to `depth`; each edge says the `depth` it was
reached at. A node appears once per direction (a `dependsOn` cycle ends), with one edge per
relation (and `sectionName`) naming it. `exists: false` is a dangling reference; a `Service` is
a route backend, not a row; both have `status` null and are not followed further. Related
objects the caller may not list are never named, missing or not: each adds 1 to `hidden` and is
not followed. An object the caller may not list is a 404, as an unknown one is. Rows (the
object's here, and list rows) carry `blockedBy`, the nearest failing or missing object upstream,
when there is one and the caller may list it."""

_FLAPPING = _param(
    "flapping",
    "`true`: only objects with at least `FLEETSCOPE_FLAPPING_THRESHOLD` (default 4) recorded "
    "transitions in the last 24 hours (`transitions24h`); also with `sort`, on groups (the "
    "groups of the flapping rows) and on facets' `by`",
    {"type": "string", "enum": ["true"]},
)

_SORT = _param(
    "sort",
    "`-lastTransitionTime`: newest transition first; `lastTransitionTime`: oldest first (rows "
    "without one sort as the oldest); omitted: by cluster, namespace, kind, name. Pages are "
    "keyset-paginated like the default order: a walk shows each row at most once, and every row "
    "whose transition did not move during the walk exactly once",
    {"type": "string", "enum": list(SORTS)},
)

_GROUPS = """\
`GET /api/v1/groups` answers "where else does this fail": one entry per object (`by=object`:
namespace, kind, name) or per namespace (`by=namespace`) across the caller's clusters, over the
rows the caller may list that pass the list filters. `total` is the number of clusters where the
group appears, `statuses` how many of them report each status (for a namespace: hold at least one
object with it), `suspended` how many hold a suspended one, and `clusters` the first
`clusterLimit` of them, worst status first (unhealthy, progressing, unknown, healthy), then by
name. Groups are ordered by `statuses.unhealthy` (most first), then by namespace, kind and name.
A team member's counts are over their own clusters and namespaces only. Pages are
keyset-paginated with signed tokens: a walk never shows a group twice, and every group whose
objects did not transition during the walk exactly once (a group that changed may move, and is
then skipped). `GET /api/v1/groups/{namespace}/{kind}/{name}` lists every cluster of an object
group with its row there, and `GET /api/v1/groups/{namespace}` every cluster of a namespace
group with its objects by status, both worst first and paginated. `GET /api/v1/facets?by=object`
(or `namespace`) counts groups instead of objects: per cluster, kind, status and suspension, the
groups that value's filter would return.

Version drift: an object group carries `revisions`, the distinct revisions its clusters (those
it counts) run, each with `clusters` running it, most clusters first, then by revision text
(bytewise), at most five; `otherRevisions` counts the rest (`revisions` more, on `clusters`
clusters). The revision is the row's `revision` (Flux's applied revision): an empty one (a kind
without revisions, an object not yet applied) is no revision, so such clusters never make a
group drift. Each of a group's `clusters` carries its `revision`. `drift=true` keeps only the
object groups with two or more revisions, in the same order, with the same RBAC and tokens
(bound to `drift`); with `by=namespace` it is a 400. A revision never moves a group in the order,
so a drift walk shows no group twice: a group whose revisions change during the walk is shown
(once) when it drifts as its page is read. A drift page makes at most 250,000 lookups (groups
examined x your clusters: 1,250 groups on 200 clusters): past that it holds fewer than `limit`
(possibly none) with a `continue`, as Kubernetes lists may. With `Accept: text/csv` the export
limit is checked against every object group of the filters, drifting or not.
`GET /api/v1/groups/{namespace}/{kind}/{name}?revision=R` lists only the clusters running `R`
(the counts stay the whole group's)."""

_EXPORT = """\
`Accept: text/csv` on `GET /api/v1/objects` and `GET /api/v1/groups` streams every page of the
same query (the filters, `sort`, `by`, `clusterLimit`; from `continue` when given; `limit` is
ignored) as RFC 4180 CSV: a header line naming the columns, CRLF line ends, fields quoted when
they hold a comma, a quote or a line break. The rows are those the JSON walk yields to the same
caller, each once. Objects: `cluster`, `namespace`, `kind`, `apiVersion`, `name`, `status`,
`suspended` (`true`/`false`), `reason`, `message`, `warnings`, `lastTransitionTime`, `revision`,
`blockedBy` (`cluster/namespace/kind/name`, when the caller may list it), `uiUrl`. Groups:
`namespace`, `kind`, `name`, `total`, `unhealthy`, `progressing`, `unknown`, `healthy` (clusters
with each status), `suspended`, `objects` (namespace groups), `clusters` (the first
`clusterLimit` as `cluster=status`, space-separated), `revisions` (object groups, as
`revision=clusters`, space-separated, most first, then `+N=M` for N more revisions on M
clusters). Columns may be added at the end: read them
by name. JSON's null is an empty field; a field starting with `=`, `+`, `-`, `@`, a tab or a
carriage return is prefixed with `'` so that spreadsheets do not run it as a formula. Past
`FLEETSCOPE_EXPORT_MAX_ROWS` rows (or groups), counted before the first byte, the answer is 422
`export_too_large`."""
_HISTORY = """\
`GET /api/v1/objects/{cluster}/{namespace}/{kind}/{name}/history` answers the object's recorded
transitions, newest first: a change of `status`, `reason`, suspension or `revision`, and its
appearing (`source: created`) and disappearing (`deleted`). `at` is the leaf's
lastTransitionTime when the change moved it, else when fleetscope observed the change; `source`
says which writer saw it (`watch`, or `sync` for a full sync, e.g. after a missed watch event);
`position` is the cluster's write generation that recorded it (higher is newer). Each object
keeps its last `FLEETSCOPE_HISTORY_MAX` transitions, none older than `FLEETSCOPE_HISTORY_DAYS`;
a deleted object's history stays readable for that window, with `object` null. The objects a
cluster's first sync finds (or a kind's first list) record no `created` entry. The answer is
visible exactly when the row would be: a caller who may not list the kind in that namespace
gets the same 404 as for an unknown object, deleted or not. Pages are keyset-paginated with
signed tokens."""

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "STATUS", "ERROR")

_WATCH = """\
`GET /api/v1/watch` is a Server-Sent Events stream (`text/event-stream`) of the changes to the
rows the caller may list that pass the list filters, as Kubernetes' list-then-watch works. Each
event has `event: <TYPE>`, `id: <resourceVersion>` and `data: {"type": <TYPE>, "object": ...}`:
`ADDED`, `MODIFIED`, `DELETED` carry the row exactly as `/api/v1/objects` shows it to the caller
(`blockedBy` included only when the caller may list it). A row that changes into the filters is
`ADDED`; one that changes out of them is `DELETED`, shown as it was (as Kubernetes' filtered
watches do). `BOOKMARK` (every `FLEETSCOPE_WATCH_BOOKMARK_S`, default 15 s) carries
`object.resourceVersion`; `STATUS` carries the caller's freshness block (the lists'), sent at the
start and whenever it changes (a cluster stale, the index rebuilding, RBAC data too old).
`resourceVersion` (a list answer's, or an event's `id`; also the `Last-Event-ID` header) resumes
right after that position: no gap, no duplicate. Absent, empty or `0`: the rows the caller may
list first, as `ADDED` (at most 10,000: more is a 400; list and watch from the list's
`resourceVersion`), then the changes. A position older than the change feeds keep
(`FLEETSCOPE_WATCH_FEED_MAX` per cluster) is one `ERROR` event, a Kubernetes Status with `code:
410` and `reason: Expired`, and the stream ends: list again (an open stream gets the same when a
burst of writes on one cluster passes the feed's retention before the service reads them). Events
follow the caller's current
access: a revoked grant stops them as it stops list rows. The stream ends when the client
disconnects; clients reconnect with the last `id`."""

TAGS = [
    {"name": "Watch", "description": " ".join(_WATCH.split())},
    {"name": "Relations", "description": " ".join(_RELATIONS.split())},
    {"name": "History", "description": " ".join(_HISTORY.split())},
    {"name": "Groups", "description": " ".join(_GROUPS.split())},
    {"name": "Export", "description": " ".join(_EXPORT.split())},
]
"""Topics the docs explain once, in their own section (OpenAPI tags with a description)."""


def document(registry: KindRegistry) -> S:
    limit = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
    page = [
        _param("limit", f"rows per page, 1..{MAX_LIMIT}", limit),
        _param("continue", "the `continue` of the previous page, with the same filters", _STR),
    ]
    path_params = [
        _param("cluster", "cluster name", _CLUSTER, "path", required=True),
        _param(
            "namespace",
            "namespace (DNS-1123 label); `_` for a cluster-scoped kind",
            _NAMESPACE,
            "path",
            required=True,
        ),
        _param(
            "kind", "kind key", {"type": "string", "enum": registry.keys()}, "path", required=True
        ),
        _param("name", "object name (DNS-1123 subdomain)", _OBJECT_NAME, "path", required=True),
    ]
    common_codes = (400, 401, 503)
    return {
        "openapi": "3.0.3",
        "info": {"title": "fleetscope query API", "version": "1"},
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "tags": TAGS,
        "paths": {
            "/api/v1/objects": _csv(
                _get(
                    "Visible objects, filtered, in (cluster, namespace, kind, name) order or by "
                    "lastTransitionTime (`sort`), one page (every page as CSV with "
                    "`Accept: text/csv`)",
                    [*_filters(registry), _FLAPPING, _SORT, *page],
                    "ObjectList",
                    "a page of rows",
                    *common_codes,
                )
            ),
            "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}": _get(
                "The live object from its leaf cluster, read as the caller (impersonation)",
                path_params,
                "Detail",
                "the object, without metadata.managedFields",
                400,
                401,
                403,
                404,
                502,
                503,
                504,
            ),
            "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}/relations": _get(
                "What the object depends on and what depends on it, from the index",
                [
                    *path_params,
                    _param(
                        "depth",
                        f"levels to follow each way, 1..{MAX_DEPTH}",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_DEPTH,
                            "default": DEFAULT_DEPTH,
                        },
                    ),
                ],
                "Relations",
                "the object's row and its edges",
                400,
                401,
                404,
                503,
                tag="Relations",
            ),
            "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}/history": _get(
                "The object's recorded transitions, newest first, from the index",
                [
                    *path_params,
                    _param("limit", f"transitions per page, 1..{MAX_LIMIT}", limit),
                    page[1],
                ],
                "History",
                "the object's row (null when deleted) and a page of its transitions",
                400,
                401,
                404,
                503,
                tag="History",
            ),
            "/api/v1/groups": _csv(
                _get(
                    "The same object (or namespace) across the caller's clusters, with how many "
                    "report each status, most unhealthy first, one page (every page as CSV with "
                    "`Accept: text/csv`)",
                    [
                        *_filters(registry),
                        _FLAPPING,
                        _param(
                            "by",
                            "`object` (namespace, kind, name) or `namespace`",
                            {"type": "string", "enum": list(BY), "default": "object"},
                        ),
                        _param(
                            "clusterLimit",
                            f"clusters shown per group (worst first), 0..{MAX_LIMIT}",
                            {
                                "type": "integer",
                                "minimum": 0,
                                "maximum": MAX_LIMIT,
                                "default": DEFAULT_CLUSTER_LIMIT,
                            },
                        ),
                        _param(
                            "drift",
                            "`true`: only object groups whose clusters run two or more "
                            "revisions (version drift; empty revisions are none); by=object only",
                            {"type": "string", "enum": ["true", "false"]},
                        ),
                        _param("limit", f"groups per page, 1..{MAX_LIMIT}", limit),
                        page[1],
                    ],
                    "GroupList",
                    "a page of groups",
                    *common_codes,
                    tag="Groups",
                )
            ),
            "/api/v1/groups/{namespace}/{kind}/{name}": _get(
                "One object group: every cluster where the caller may list it, with its row, "
                "worst status first",
                [
                    *path_params[1:],
                    *_group_filters(registry, kind=False),
                    _param(
                        "revision",
                        "only the clusters running this revision (exact; empty: those without "
                        "one); the counts stay the whole group's",
                        _STR,
                    ),
                    *page,
                ],
                "ObjectGroup",
                "the group's counts and a page of its rows",
                400,
                401,
                404,
                503,
                tag="Groups",
            ),
            "/api/v1/groups/{namespace}": _get(
                "One namespace group: every cluster where the caller may list objects in it, "
                "with their counts by status, worst first",
                [path_params[1], *_group_filters(registry, kind=True), *page],
                "NamespaceGroup",
                "the group's counts and a page of its clusters",
                400,
                401,
                404,
                503,
                tag="Groups",
            ),
            "/api/v1/facets": _get(
                "Counts of visible objects (or, with `by`, of their groups) by cluster, kind, "
                "status and suspension under the filters",
                [
                    *_filters(registry),
                    _FLAPPING,
                    _param(
                        "by",
                        "count the groups `/api/v1/groups` lists with the same `by` instead of "
                        "objects: per value, the groups that value's filter returns (per status: "
                        "groups with an object of that status on some cluster); omitted: objects",
                        {"type": "string", "enum": list(BY)},
                    ),
                    _LABEL_KEYS,
                ],
                "Facets",
                "counts",
                *common_codes,
            ),
            "/api/v1/watch": _watch(registry),
            "/api/v1/status": _get(
                "Overall state and the caller's clusters' sync status",
                [],
                "Status",
                "state",
                *common_codes,
            ),
            "/api/v1/clusters": _get(
                "The clusters the caller can see, with their sync state",
                [],
                "Clusters",
                "clusters",
                *common_codes,
            ),
            "/api/v1/access": _get(
                "The caller's own effective access per cluster, and the bindings behind it",
                [],
                "Access",
                "access",
                *common_codes,
            ),
            "/api/v1/alerts": _get(
                "Firing fleet alerts on objects the caller may list, and the rules' state "
                "(`rules.error`: a refused rules file; the previous rules keep running)",
                [],
                "AlertList",
                "alerts",
                *common_codes,
            ),
            "/api/v1/openapi.json": {
                "get": {
                    "summary": "This document",
                    "security": [],
                    "responses": {"200": {"description": "OpenAPI 3 document"}},
                }
            },
            "/healthz": _get("Alive", [], "Health", "alive", auth=False),
            "/readyz": _get("Redis reachable", [], "Health", "ready", 503, auth=False),
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "security": [],
                    "responses": {"200": {"description": "Prometheus text format"}},
                }
            },
        },
    }


def _watch(registry: KindRegistry) -> S:
    rv = _param(
        "resourceVersion",
        "resume right after this position (a list's `resourceVersion` or an event's `id`; the "
        "`Last-Event-ID` header works too); absent, empty or `0`: the current rows as ADDED "
        "first",
        _STR,
    )
    item = _get(
        "The caller's visible row changes as Server-Sent Events (ADDED, MODIFIED, DELETED, "
        "BOOKMARK, STATUS, ERROR)",
        [
            *_filters(registry),
            _FLAPPING,
            rv,
            _param(
                "timeoutSeconds",
                "end the stream after this many seconds, 1..3600 (default: a random time "
                "between 1800 and 3600, as kube-apiserver does; the client resumes from its "
                "last event's id and is authenticated again)",
                {"type": "integer", "minimum": 1, "maximum": 3600},
            ),
        ],
        "Error",
        "an event stream",
        400,
        401,
        429,
        503,
        tag="Watch",
    )
    # Each event of the stream, as OpenAPI 3.2's `itemSchema` for text/event-stream describes it
    # (the fields of one SSE event; `data` is the JSON text described above).
    event = {
        "type": "object",
        "properties": {
            "event": {"type": "string", "enum": list(EVENT_TYPES)},
            "id": {"type": "string"},
            "data": {"type": "string"},
            "retry": {"type": "integer"},
        },
        "required": ["event", "data"],
    }
    item["get"]["responses"]["200"]["content"] = {"text/event-stream": {"schema": event}}
    item["get"]["responses"]["503"]["description"] = (
        "the index (Redis) is not reachable, or the service's stream process is not (it is "
        "started again within seconds: retry from the same position)"
    )
    return item


def markdown(doc: S) -> str:
    """docs/api.md: every route with its parameters and responses, from the document."""
    lines = [
        "# HTTP API",
        "",
        "The query service serves `/api/v1` (JSON). The OpenAPI 3 document at",
        "`/api/v1/openapi.json` is the reference; this page is generated from it",
        "(`python -m query.openapi > docs/api.md`) and a test keeps the two equal.",
        "",
        'Errors are `{"error": "<code>", "message": "..."}` with the status below.',
        "List answers carry a `freshness` block (degraded, state, collected/total, and the",
        "caller's clusters that are stale, not yet collected, or hidden for stale RBAC data).",
        "",
        "Serving: `fleetscope serve [--bind HOST:PORT]` runs exactly",
        "`gunicorn --config python:query.gunicorn_conf query.wsgi:app` (workers and threads from",
        "`FLEETSCOPE_QUERY_WORKERS` / `FLEETSCOPE_QUERY_THREADS`). Set `FLEETSCOPE_METRICS_DIR`",
        "so `/metrics` adds up every gunicorn worker (exported as `PROMETHEUS_MULTIPROC_DIR`).",
        "",
        "Every answer carries `X-Content-Type-Options: nosniff` and `Cache-Control: no-store`.",
        "On any route: a request line over 8190 bytes is a 414 (`uri_too_long`), more than 100",
        "header fields or one over 8190 bytes a 431 (`request_header_fields_too_large`); in",
        "`header` and `anonymous` modes a `Host` not in `FLEETSCOPE_ALLOWED_HOSTS` is a 400",
        "(`invalid_host`) (docs/security.md#edges).",
        "",
    ]
    for path, item in doc["paths"].items():
        op = item["get"]
        lines += [f"## `GET {path}`", "", op["summary"] + ".", ""]
        for tag in op.get("tags", ()):
            lines += [f"See [{tag}](#{tag.lower()}).", ""]
        if op.get("security") == []:
            lines += ["No authentication.", ""]
        if op.get("parameters"):
            lines += ["| parameter | in | schema | description |", "|---|---|---|---|"]
            for p in op["parameters"]:
                lines.append(
                    f"| `{p['name']}` | {p['in']} | {_schema_text(p['schema'])} | {p['description']} |"
                )
            lines.append("")
        lines += ["| status | meaning |", "|---|---|"]
        for code, resp in op["responses"].items():
            schema = resp.get("content", {}).get("application/json", {}).get("schema")
            shape = f" (`{schema['$ref'].rsplit('/', 1)[1]}`)" if schema else ""
            if "text/csv" in resp.get("content", {}):
                shape += "; `text/csv` with `Accept: text/csv`"
            lines.append(f"| {code} | {resp['description']}{shape} |")
        lines.append("")
    for tag in doc.get("tags", ()):
        text = textwrap.wrap(tag["description"], 100, break_on_hyphens=False)
        lines += [f"## {tag['name']}", "", *text, ""]
    lines += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        required = schema.get("required", ())
        props = ", ".join(
            f"`{p}`" + ("" if p in required else " (optional)")
            for p in schema.get("properties", {})
        )
        lines.append(f"- **{name}**: {props}")
    return "\n".join(lines) + "\n"


def _schema_text(schema: S) -> str:
    if schema.get("type") == "array":
        inner = schema["items"]
        return "list of " + (
            "one of the kinds" if len(inner.get("enum", [])) > 8 else _schema_text(inner)
        )
    if "enum" in schema:
        if len(schema["enum"]) > 8:
            return "one of the registered kinds"
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return str(schema.get("type", "any"))


if __name__ == "__main__":
    from common.kinds.registry import builtin_registry

    print(markdown(document(builtin_registry())), end="")
