"""What the cluster registry stores in Redis, and who may see it: the `fs:clusters` record of a
registered cluster and the `fs:registry-problems` list. Written by `common.leaf.registry.reconcile`,
read by the collector (is a cluster ready to sync?) and the query service (`/api/v1/status`).

Never credentials: a record holds where a cluster comes from (source, origin), its API server
URL without user info, whether it is ready (and why not), a name conflict or refused credentials, and the
resourceVersion of what holds its credentials (so a rotated token changes the record).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from common.index import keys
from common.redis_client import text

PROBLEM_TYPES = ("conflict", "invalid-name", "source-error", "refused-credentials")


@dataclass(frozen=True)
class Record:
    """One registered cluster in `fs:clusters`."""

    source: str = ""  # dir | secret | gitopscluster | capi | argocd
    origin: str = ""  # the file or object that registers it
    server: str = ""
    ready: bool = True
    reason: str = ""  # why it is not ready ("" when ready)
    conflict: str = ""  # another source claims the same name: refused until resolved
    revision: str = ""  # resourceVersion(s) of the objects holding its credentials
    error: str = ""  # its credentials were refused (names the field; never a value)

    def encode(self) -> str:
        """JSON; fields at their default are left out (old records read the same)."""
        data: dict[str, Any] = {"source": self.source, "origin": self.origin}
        data["server"] = self.server
        for name in ("ready", "reason", "conflict", "revision", "error"):
            value = getattr(self, name)
            if value != getattr(Record, name):
                data[name] = value
        return json.dumps(data)

    @classmethod
    def decode(cls, raw: str | bytes | None) -> Record:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        return cls(
            source=str(data.get("source", "")),
            origin=str(data.get("origin", "")),
            server=str(data.get("server", "")),
            ready=data.get("ready", True) is not False,
            reason=str(data.get("reason", "")),
            conflict=str(data.get("conflict", "")),
            revision=str(data.get("revision", "")),
            error=str(data.get("error", "")),
        )


@dataclass(frozen=True)
class Problem:
    """Something the registry could not register as configured (see PROBLEM_TYPES)."""

    type: str
    message: str
    cluster: str = ""  # the fleetscope name concerned ("" for a whole source)
    source: str = ""
    origins: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["origins"] = list(self.origins)
        return data


def encode_problems(problems: Iterable[Problem]) -> str:
    ordered = sorted(problems, key=lambda p: (p.cluster, p.source, p.type, p.message))
    return json.dumps([p.as_json() for p in ordered])


def decode_problems(raw: str | bytes | None) -> list[Problem]:
    try:
        data = json.loads(raw) if raw else []
    except ValueError:
        return []
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict):
            out.append(
                Problem(
                    type=str(item.get("type", "")),
                    message=str(item.get("message", "")),
                    cluster=str(item.get("cluster", "")),
                    source=str(item.get("source", "")),
                    origins=tuple(str(o) for o in item.get("origins") or ()),
                )
            )
    return out


def read_problems(r: redis.Redis) -> list[Problem]:
    return decode_problems(r.get(keys.REGISTRY_PROBLEMS))


def read_records(r: redis.Redis) -> dict[str, Record]:
    """Every registered cluster's record, by name."""
    return {text(k): Record.decode(v) for k, v in r.hgetall(keys.CLUSTERS).items()}


def read_record(r: redis.Redis, cluster: str) -> Record | None:
    """The record of a registered cluster; None when it is not registered."""
    raw = r.hget(keys.CLUSTERS, cluster)
    return None if raw is None else Record.decode(raw)


def registry_view(
    problems: list[Problem],
    not_ready: dict[str, Record],
    in_scope: set[str],
    fleet_wide: bool,
) -> dict[str, Any]:
    """The `registry` block of `/api/v1/status`. Cluster names are shown only to callers who see
    them anyway (in scope) or who see every collected cluster (fleet-wide callers: the
    platform team); the rest is counted in `hidden`."""

    def shown(cluster: str) -> bool:
        return fleet_wide or (bool(cluster) and cluster in in_scope)

    out_problems = [p.as_json() for p in problems if shown(p.cluster)]
    out_not_ready = [
        {"cluster": c, "source": rec.source, "reason": rec.reason}
        for c, rec in sorted(not_ready.items())
        if shown(c)
    ]
    hidden = len(problems) + len(not_ready) - len(out_problems) - len(out_not_ready)
    return {"notReady": out_not_ready, "problems": out_problems, "hidden": hidden}
