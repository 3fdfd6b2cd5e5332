"""The list filters' values, validated: one place for what `cluster`, `namespace`, `kind`,
`status`, `suspended`, `name` and `labelSelector` accept, shared by the query service's parameters
(query.params) and the alert rules' `match` (common.alerts.rules). A bad value is an
InvalidInput naming the filter and what it accepts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from common import labels
from common.errors import InvalidInput
from common.index import keys
from common.index.read.plan import Filters
from common.kinds.registry import KindRegistry
from common.kinds.status import STATUSES

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
NAME_SUBSTRING = re.compile(r"^[a-z0-9.-]{1,253}$")
CLUSTER_SCOPED = "_"
"""Stands for the empty namespace of cluster-scoped objects in paths and the namespace filter."""


def check_namespace(ns: str, param: str = "namespace") -> str:
    """A namespace name, or `_` (cluster-scoped objects) which becomes ""."""
    if ns == CLUSTER_SCOPED:
        return ""
    if not DNS_LABEL.fullmatch(ns):
        raise InvalidInput(
            param,
            f"{ns[:80]!r} is not a namespace name (DNS-1123 label, <= 63; `_` for "
            "cluster-scoped objects)",
        )
    return ns


def check_kind(kind: str, registry: KindRegistry, param: str = "kind") -> str:
    if registry.get(kind) is None:
        raise InvalidInput(
            param, f"unknown kind {kind[:80]!r}; accepts {', '.join(sorted(registry.keys()))}"
        )
    return kind


def check_status(status: str, param: str = "status") -> str:
    if status not in STATUSES:
        raise InvalidInput(param, f"unknown status {status[:40]!r}; accepts {', '.join(STATUSES)}")
    return status


def check_name_substring(name: str, param: str = "name") -> str:
    name = name.strip().lower()
    if name and not NAME_SUBSTRING.fullmatch(name):
        raise InvalidInput(param, "a substring of object names: lower-case letters, digits, '.-'")
    return name


def check_label_selector(text: str, param: str = "labelSelector") -> labels.Selector:
    """A label selector in Kubernetes' syntax; a malformed one is refused with upstream's
    message and the position where parsing stopped."""
    try:
        return labels.parse(text)
    except labels.SelectorError as e:
        raise InvalidInput(param, f"{e.message} (at position {e.position})") from e


def build(
    registry: KindRegistry,
    clusters: Iterable[str] = (),
    namespaces: Iterable[str] = (),
    kinds: Iterable[str] = (),
    statuses: Iterable[str] = (),
    name: str = "",
    suspended: bool | None = None,
    flapping: int = 0,
    label_selector: str = "",
) -> Filters:
    """Validated filters (values already split and deduplicated by the caller)."""
    return Filters(
        clusters=tuple(keys.check_cluster_name(c) for c in clusters),
        namespaces=tuple(check_namespace(ns) for ns in namespaces),
        kinds=tuple(check_kind(k, registry) for k in kinds),
        statuses=tuple(check_status(s) for s in statuses),
        name=check_name_substring(name),
        suspended=suspended,
        flapping=flapping,
        labels=check_label_selector(label_selector),
    )
