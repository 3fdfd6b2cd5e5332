"""An index for the alert tests: rows written by the real writer (common.index.write.store), clusters
registered, and an evaluator with a rules file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import redis

from common.alerts.evaluate import Evaluator
from common.alerts.source import RulesSource
from common.index import keys, rows
from common.index.write import store
from common.kinds.registry import builtin_registry
from tests.support import rowfactory

REG = builtin_registry()


def row(
    cluster: str,
    ns: str,
    kind: str,
    name: str,
    status: str = "healthy",
    message: str = "",
    reason: str = "",
    ago_s: float | None = None,
) -> rows.Row:
    since = time.gmtime(time.time() - ago_s) if ago_s is not None else None
    return rowfactory.row(
        cluster,
        ns,
        kind,
        name,
        status,
        message=message,
        reason=reason,
        lastTransitionTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", since) if since else None,
    )


def put(r: redis.Redis, cluster: str, *cluster_rows: rows.Row) -> None:
    """Make these the cluster's rows (a sync), registering the cluster."""
    r.hset(keys.CLUSTERS, cluster, json.dumps({"source": "dir"}))
    store.replace_rows(r, cluster, [rows.encode(x) for x in cluster_rows])


def rules_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return path


class Harness:
    """An evaluator over `r` with the rules in `path` (plain calls, no Celery)."""

    def __init__(self, r: redis.Redis, path: Path, external_url: str = "http://fs.example") -> None:
        self.r = r
        self.path = path
        self.source = RulesSource(str(path), REG)
        self.evaluator = Evaluator(r, REG.keys(), external_url)

    def run(self, now: float | None = None):  # type: ignore[no-untyped-def]
        return self.evaluator.run(self.source.current(self.r), None, now)

    def firing(self) -> dict[str, dict]:
        raw = self.r.hgetall(keys.ALERT_FIRING)
        return {k.decode(): json.loads(v) for k, v in raw.items()}

    def resolved(self) -> dict[str, dict]:
        raw = self.r.hgetall(keys.ALERT_RESOLVED)
        return {k.decode(): json.loads(v) for k, v in raw.items()}
