"""Query parameters: parsed and validated before any Redis or leaf work.

Unknown parameters, unknown filter values, out-of-range limits and over-long values are 400s
naming the parameter and what it accepts. Names follow Kubernetes: namespaces and names are
DNS-1123 (labels / subdomains) with their length limits. Patterns are applied with `fullmatch`:
with `match`, `$` also matches before a final newline, and `apps\n` would pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from werkzeug.datastructures import MultiDict

from common import labels
from common.errors import InvalidInput, NotFound
from common.index import keys
from common.index.read import filter_values
from common.index.read.facets import LABEL_KEYS_MAX
from common.index.read.filter_values import CLUSTER_SCOPED as CLUSTER_SCOPED
from common.index.read.filter_values import DNS_LABEL as DNS_LABEL
from common.index.read.filter_values import NAME_SUBSTRING as NAME_SUBSTRING
from common.index.read.filter_values import check_kind as check_kind
from common.index.read.filter_values import check_namespace as check_namespace
from common.index.read.reader import Filters
from common.kinds.registry import Kind, KindRegistry

DEFAULT_LIMIT, MAX_LIMIT = 50, 500
MAX_VALUES = 100  # values per repeatable filter
MAX_VALUE_LEN = 253
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

LIST_PARAMS = (
    "cluster",
    "namespace",
    "kind",
    "status",
    "suspended",
    "name",
    "limit",
    "continue",
    "sort",
    "flapping",
    "labelSelector",
)
SORTS = ("lastTransitionTime", "-lastTransitionTime")
"""`sort` values: by the Ready condition's lastTransitionTime, oldest or (`-`) newest first."""
GROUP_PARAMS = (
    *(p for p in LIST_PARAMS if p != "sort"),
    "by",
    "clusterLimit",
    "drift",
)
GROUP_DETAIL_PARAMS = (
    "cluster",
    "kind",
    "status",
    "suspended",
    "limit",
    "continue",
    "labelSelector",
)
BY = ("object", "namespace")
"""`by` values of `/api/v1/groups`: one group per object (namespace, kind, name) or namespace."""
DEFAULT_CLUSTER_LIMIT = 10
FACET_PARAMS = (
    "cluster",
    "namespace",
    "kind",
    "status",
    "suspended",
    "name",
    "by",
    "flapping",
    "labelSelector",
    "labelKeys",
)
RELATIONS_PARAMS = ("depth",)
DEFAULT_DEPTH, MAX_DEPTH = 1, 5
_DEPTHS = frozenset(str(d) for d in range(1, MAX_DEPTH + 1))


def check_known(args: MultiDict[str, str], allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    for name in args:
        if name not in allowed:
            accepts = ", ".join(allowed) if allowed else "no parameters"
            raise InvalidInput(name[:40], f"unknown parameter; this route accepts {accepts}")


def values(args: MultiDict[str, str], name: str) -> tuple[str, ...]:
    """A repeatable or comma-separated parameter, deduplicated, in first-seen order."""
    out: dict[str, None] = {}
    for raw in args.getlist(name):
        if len(raw) > MAX_VALUE_LEN * 4:
            raise InvalidInput(name, "value too long")
        for part in raw.split(","):
            part = part.strip()
            if part:
                out[part] = None
    if len(out) > MAX_VALUES:
        raise InvalidInput(name, f"at most {MAX_VALUES} values")
    return tuple(out)


def suspended(args: MultiDict[str, str]) -> bool | None:
    """The `suspended` filter: `true`, `false`, or absent (either)."""
    raw = args.getlist("suspended")
    if not raw:
        return None
    if len(raw) > 1 or raw[0] not in ("true", "false"):
        raise InvalidInput("suspended", "`true` or `false` (once); omit it for either")
    return raw[0] == "true"


def flapping(args: MultiDict[str, str], threshold: int) -> int:
    """The `flapping` filter: `true` (at least `threshold` transitions in the last 24 hours),
    or absent; the threshold (0 when absent)."""
    raw = args.getlist("flapping")
    if not raw:
        return 0
    if len(raw) > 1 or raw[0] != "true":
        raise InvalidInput("flapping", "`true` (once); omit it for any")
    return threshold


def check_object_name(name: str, param: str = "name") -> str:
    if len(name) > MAX_VALUE_LEN or not DNS_SUBDOMAIN.fullmatch(name):
        raise InvalidInput(
            param, f"{name[:80]!r} is not an object name (DNS-1123 subdomain, <= 253)"
        )
    return name


def object_path(
    cluster: str, namespace: str, kind: str, name: str, registry: KindRegistry
) -> tuple[str, Kind]:
    """Validate an object's path segments (`_`: the namespace of cluster-scoped kinds); the
    namespace as stored ("" for `_`) and the kind. An unknown kind is a 404, as an unknown
    object would be."""
    keys.check_cluster_name(cluster)
    return object_key(namespace, kind, name, registry)


def object_key(namespace: str, kind: str, name: str, registry: KindRegistry) -> tuple[str, Kind]:
    """`object_path` without the cluster: an object's identity across clusters."""
    namespace = check_namespace(namespace)
    check_object_name(name)
    k = registry.get(kind)
    if k is None:
        raise NotFound(f"unknown kind {kind[:80]!r}; see /api/v1/openapi.json for the kinds")
    if k.namespaced != bool(namespace):
        why = "is cluster-scoped: its namespace is `_`" if namespace else "is namespaced"
        raise InvalidInput("namespace", f"kind {kind} {why}")
    return namespace, k


def depth(args: MultiDict[str, str]) -> int:
    """Levels of relations to follow each way (`depth`)."""
    raw = args.getlist("depth")
    if not raw:
        return DEFAULT_DEPTH
    if len(raw) > 1 or raw[0] not in _DEPTHS:
        raise InvalidInput(
            "depth", f"an integer from 1 to {MAX_DEPTH}, once (default {DEFAULT_DEPTH})"
        )
    return int(raw[0])


def filters(
    args: MultiDict[str, str], registry: KindRegistry, flapping_threshold: int = 4
) -> Filters:
    """The list/facet filters of a request (validated by common.index.read.filter_values;
    `flapping=true`: at least `flapping_threshold` transitions in the last 24 hours)."""
    return filter_values.build(
        registry,
        clusters=values(args, "cluster"),
        namespaces=values(args, "namespace"),
        kinds=values(args, "kind"),
        statuses=values(args, "status"),
        name=args.get("name", ""),
        suspended=suspended(args),
        flapping=flapping(args, flapping_threshold),
        label_selector=label_selector(args),
    )


def label_selector(args: MultiDict[str, str]) -> str:
    """The `labelSelector` parameter's text (once; "" when absent)."""
    raw = args.getlist("labelSelector")
    if len(raw) > 1:
        raise InvalidInput("labelSelector", "once; join requirements with `,` (AND)")
    return raw[0] if raw else ""


def label_keys(args: MultiDict[str, str]) -> tuple[str, ...]:
    """`labelKeys`: label keys whose values the facets count (comma-separated or repeated)."""
    got = values(args, "labelKeys")
    if len(got) > LABEL_KEYS_MAX:
        raise InvalidInput("labelKeys", f"at most {LABEL_KEYS_MAX} keys")
    for k in got:
        errs = labels.key_errors(k)
        if errs:
            raise InvalidInput("labelKeys", f"{k[:80]!r} is not a label key: {'; '.join(errs)}")
    return got


def sort(args: MultiDict[str, str]) -> str:
    """The `sort` parameter: "" (by cluster, namespace, kind, name) or one of `SORTS`."""
    return one_of(
        args, "sort", SORTS, "omit it for the default order (cluster, namespace, kind, name)"
    )


def one_of(args: MultiDict[str, str], name: str, allowed: tuple[str, ...], otherwise: str) -> str:
    """A parameter given at most once with one of `allowed`; "" when absent."""
    raw = args.getlist(name)
    if not raw or raw == [""]:
        return ""
    if len(raw) > 1 or raw[0] not in allowed:
        raise InvalidInput(name, f"one of {', '.join(allowed)} (once); {otherwise}")
    return raw[0]


def limit(args: MultiDict[str, str]) -> int:
    return bounded(args, "limit", 1, MAX_LIMIT, DEFAULT_LIMIT)


def bounded(args: MultiDict[str, str], name: str, low: int, high: int, default: int) -> int:
    """An integer parameter from `low` to `high`; `default` when absent."""
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    # isascii: "²".isdigit() holds, and int("²") raises (a 500 for bad input).
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise InvalidInput(name, f"an integer from {low} to {high} (default {default})")
    return int(raw)


def by(args: MultiDict[str, str]) -> str:
    """The `by` parameter of `/api/v1/groups`: `object` (the default) or `namespace`."""
    return one_of(args, "by", BY, "the default is object") or "object"


def facets_by(args: MultiDict[str, str]) -> str:
    """The `by` parameter of `/api/v1/facets`: count groups by `object` or `namespace` (as
    `/api/v1/groups` lists them); "" (absent) counts rows."""
    return one_of(args, "by", BY, "leave it out to count objects")


def revision(args: MultiDict[str, str]) -> str | None:
    """`revision=` on an object group: only the clusters running that revision (exact; an
    empty value: the clusters without one); None when absent."""
    raw = args.getlist("revision")
    if not raw:
        return None
    if len(raw) > 1 or len(raw[0]) > MAX_VALUE_LEN:
        raise InvalidInput("revision", f"one revision (once, at most {MAX_VALUE_LEN} characters)")
    return raw[0]


def drift(args: MultiDict[str, str], by: str) -> bool:
    """`drift=true` on `/api/v1/groups`: only object groups whose clusters run two or more
    revisions; absent (or `false`): every group. Namespace groups have no revision."""
    raw = args.getlist("drift")
    if not raw:
        return False
    if len(raw) > 1 or raw[0] not in ("true", "false"):
        raise InvalidInput("drift", "`true` or `false` (once); omit it for every group")
    if raw[0] == "true" and by != "object":
        raise InvalidInput(
            "drift",
            "only with by=object: a namespace group holds many objects and has no revision; "
            "drop `drift` or group by object",
        )
    return raw[0] == "true"


def cluster_limit(args: MultiDict[str, str]) -> int:
    """`clusterLimit`: how many of a group's clusters a group list shows."""
    return bounded(args, "clusterLimit", 0, MAX_LIMIT, DEFAULT_CLUSTER_LIMIT)
