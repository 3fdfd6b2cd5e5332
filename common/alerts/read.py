"""Firing alerts as a caller may see them: a row's alert when they may `list` its kind in its
namespace on its cluster (as for rows); a cross-cluster alert narrowed to the clusters they may
list it on, and without its labels and annotations beyond the identity ones unless they see
every cluster (templates may name the others: `.clusterNames`, `.message`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import redis

from common import redis_client
from common.alerts import state
from common.alerts.rules import IDENTITY_LABELS
from common.alerts.state import Alert
from common.index import keys
from common.rbac.grants import Access


class AlertsView:
    """The firing set, re-read only when an evaluation wrote (`evaluations` in the meta hash)."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self._lock = threading.Lock()
        self._seq: Any = None
        self._alerts: list[Alert] = []
        self._meta: dict[str, str] = {}

    def read(self) -> tuple[list[Alert], dict[str, str]]:
        meta_raw, seq = redis_client.pipelined(
            self.r,
            [
                ("HMGET", keys.ALERT_META, "error", "ruleCount", "evaluatedAt", "errorAt"),
                ("HGET", keys.ALERT_META, "evaluations"),
            ],
        )
        meta = {
            k: redis_client.text(v)
            for k, v in zip(("error", "ruleCount", "evaluatedAt", "errorAt"), meta_raw, strict=True)
            if v is not None
        }
        with self._lock:
            if seq != self._seq or seq is None:
                raw = self.r.hgetall(keys.ALERT_FIRING)
                self._alerts = sorted(
                    (state.loads(v) for v in raw.values()),
                    key=lambda a: (
                        a["rule"],
                        a.get("cluster", ""),
                        a["namespace"],
                        a["kind"],
                        a["name"],
                    ),
                )
                self._seq = seq
            return self._alerts, meta


def visible(alerts: list[Alert], access: Mapping[str, Access]) -> list[Alert]:
    out: list[Alert] = []
    for a in alerts:
        ns, kind = a["namespace"], a["kind"]
        if "cluster" in a:
            acc = access.get(a["cluster"])
            if acc is not None and acc.may_list(ns, kind):
                out.append(a)
            continue
        clusters = a.get("clusters", [])
        mine = [
            c for c in clusters if (acc := access.get(c)) is not None and acc.may_list(ns, kind)
        ]
        if not mine:
            continue
        if len(mine) == len(clusters):
            out.append(a)
            continue
        shown = Alert(**a)
        shown["clusters"] = mine
        shown["labels"] = {k: v for k, v in a["labels"].items() if k in IDENTITY_LABELS}
        shown["annotations"] = {}
        shown["reason"] = shown["message"] = ""
        out.append(shown)
    return out
