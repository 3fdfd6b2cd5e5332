"""The small fleet the time-order tests share: 12 clusters of 40 rows whose transition times
spread over 20 days from T0 (some without one), every seventh unhealthy."""

from __future__ import annotations

import calendar
import time

from common.index import rows
from common.index.write import store
from tests.support.index_fleet import KINDS
from tests.support.rowfactory import row

CLUSTERS = [f"c{i:02d}" for i in range(12)]
DAY = 86400
T0 = calendar.timegm((2026, 11, 1, 0, 0, 0))


def member(cluster: str, i: int, status: str = "", at: int | None = None) -> str:
    status = status or ("unhealthy" if i % 7 == 0 else "healthy")
    r = row(cluster, f"team-{i % 3:02d}", KINDS[i % len(KINDS[:-1])], f"app-{i}", status)
    when = T0 + (i * 5077 + len(cluster) * 131 + int(cluster[1:]) * 977) % (20 * DAY)
    if at is not None:
        when = at
    r["lastTransitionTime"] = None if i % 11 == 5 else iso(when)
    return rows.encode(r)


def iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def write_fleet(r: object) -> None:
    """Every cluster's 40 rows, through the full sync's writer."""
    for c in CLUSTERS:
        store.replace_rows(r, c, [member(c, i) for i in range(40)])  # type: ignore[arg-type]
