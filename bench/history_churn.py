"""The history benchmark's churn model (used by bench.memory): a day of transitions written
through the real writer (common.index.write.store_events, as the watcher writes them).

Every simulated hour `pct` % of each cluster's rows transition: half of them are rows that
fail (healthy -> unhealthy, a new lastTransitionTime within that hour), the other half the rows
that failed the hour before, recovering. A row fails at most once over the run, so after a day
at 1 %/h 12 % of the rows hold a history of two entries and the fleet's unhealthy share stays
where it was (an incident model; `distinct=True` instead flips 1 %/h of distinct rows once each,
24 % of rows with one entry: the worst case for per-object keys, and a fleet left ~25 %
unhealthy, whose status indexes grow too). One watch batch per cluster and hour.
"""

from __future__ import annotations

import random
import time
from typing import Any

from common.index import keys, rows
from common.index.write import store_events
from common.redis_client import text

SEP = "\x00"


def flipped(member: str, at: int) -> str:
    """The member with its health flipped and its transition time `at` (no blockedBy: the
    writer fills it in)."""
    parts = rows.split_member(rows.with_blocked(member, ""))
    code = parts[3]
    health = "unhealthy" if rows.CODE_STATUS[code] == "healthy" else "healthy"
    parts[3] = rows.status_code(health, code in rows.SUSPENDED_CODES)
    parts[6] = str(at)
    return SEP.join(parts)


def churn(r: Any, pct: float, hours: int, distinct: bool = False, seed: int = 1) -> dict[str, Any]:
    """Apply the model to every cluster in Redis; transitions written and the wall time."""
    rng = random.Random(seed)
    now = int(time.time())
    started = time.monotonic()
    written = 0
    for cluster in sorted(text(c) for c in r.hkeys(keys.CLUSTERS)):
        members = [text(m) for m in r.zrange(keys.rows(cluster), 0, -1)]
        members = [m for m in members if rows.status_of(m) == "healthy"]
        per_hour = max(1, round(len(members) * pct / 100))
        failing = per_hour if distinct else max(1, per_hour // 2)
        order = rng.sample(members, min(len(members), failing * hours))
        failed: list[str] = []
        for hour in range(hours):
            at = now - (hours - hour) * 3600 + rng.randrange(3600)
            batch = order[hour * failing : (hour + 1) * failing]
            fail = [flipped(m, at) for m in batch]
            recover = [] if distinct else [flipped(m, at + 1) for m in failed]
            changes = [store_events.Change.of(m) for m in fail + recover]
            failed = fail
            if changes:
                written += store_events.apply_changes(r, cluster, changes).updated
    return {
        "churn_pct_per_hour": pct,
        "churn_hours": hours,
        "churn_model": "distinct" if distinct else "fail-and-recover",
        "transitions": written,
        "churn_s": round(time.monotonic() - started, 1),
    }
