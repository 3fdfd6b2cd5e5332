"""The alert state in Redis (keys: common.index.keys, the `{alerts}` tag): its field names and
JSON values, one place.

- `cand:<cluster>`: field `rule NUL namespace NUL kind NUL name`, value `Candidate` (a row
  matching a rule now, since when, whether it has matched for the rule's `for`);
- `due`: members `cluster NUL <cand field>`, scored by when `for` elapses (unripe only);
- `ripe`: field `rule NUL namespace NUL kind NUL name` (cross-cluster rules), value
  `{cluster: row}` of the clusters whose row matched long enough;
- `firing` / `resolved`: field = alert id, value `Alert` (`endsAt` set once resolved).
An alert id is `rule NUL cluster NUL namespace NUL kind NUL name`, the cluster empty for
cross-cluster rules.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

import orjson

SEP = "\x00"


class Candidate(TypedDict):
    since: float
    ripe: bool
    row: dict[str, Any]


class Alert(TypedDict, total=False):
    rule: str
    severity: str
    cluster: str
    clusters: list[str]
    namespace: str
    kind: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    startsAt: str
    endsAt: str
    generatorURL: str
    status: str
    reason: str
    message: str


def cand_field(rule: str, ns: str, kind: str, name: str) -> str:
    return SEP.join((rule, ns, kind, name))


def split_cand(field: str) -> tuple[str, str, str, str]:
    rule, ns, kind, name = field.split(SEP, 3)
    return rule, ns, kind, name


def due_member(cluster: str, field: str) -> str:
    return f"{cluster}{SEP}{field}"


def split_due(member: str) -> tuple[str, str]:
    cluster, field = member.split(SEP, 1)
    return cluster, field


def alert_id(rule: str, cluster: str, ns: str, kind: str, name: str) -> str:
    return SEP.join((rule, cluster, ns, kind, name))


def rule_of(alert_or_field: str) -> str:
    return alert_or_field.split(SEP, 1)[0]


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def loads(raw: bytes | str) -> Any:
    return orjson.loads(raw)


def iso(epoch: float) -> str:
    """RFC 3339 with milliseconds, as Alertmanager's API writes times."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))
    return f"{whole}.{int((epoch % 1) * 1000):03d}Z"
