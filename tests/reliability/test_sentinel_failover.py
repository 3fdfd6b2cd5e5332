"""The whole stack on a Sentinel-managed Redis (one primary, one replica, three Sentinels): a real
Celery worker and beat on the `sentinel://` broker, gunicorn on `redis+sentinel://`. Under list
load the primary is killed: every answer during the failover is a 200 or a 503 with a JSON
body, never another 5xx; once the replica is promoted everything answers again without a
restart, a walk holds every row once, and syncs go on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesim.server import KubeSim
from tests.reliability.stack import (
    primary_killed_under_load,
)
from tests.support.sentinel import SentinelSet, start_sentinel_set


@pytest.fixture
def sentinels() -> Iterator[SentinelSet]:
    s = start_sentinel_set()
    yield s
    s.stop()


def test_primary_killed_under_load(sim: KubeSim, sentinels: SentinelSet, tmp_path: Path) -> None:
    assert sim.kubeconfig_dir is not None
    old = sentinels.primary.port
    primary_killed_under_load(
        sim.kubeconfig_dir,
        tmp_path,
        sentinels.url,
        sentinels.broker_url,
        kill=lambda _rows: sentinels.primary.process.kill(),
        promoted=lambda: sentinels.master_port() not in (None, old),
    )
