"""A Celery worker SIGKILLed in the middle of an object sync (a real worker process, a slowed
kubesim leaf): readers only ever see the old snapshot, never part of the new one; the cluster
lock expires by itself after its TTL; the next worker's sync completes with the leaf's state."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import redis

from collector.app import create_celery
from collector.jobs import Collector, collect_once
from collector.tasks import SYNC_OBJECTS
from common.index import keys, syncstatus
from common.settings import Settings
from fleetscope.supervisor import Supervisor
from kubesim.server import KubeSim
from tests.reliability.stack import stack_env, start_worker
from tests.support import topology
from tests.support.small_fleet import rows_of
from tests.support.waiting import wait_for

VICTIM = "cluster-000"


def test_sigkill_mid_sync_loses_nothing(
    sim: KubeSim,
    collector: Collector,
    settings: Settings,
    r: redis.Redis,
    broker_url: str,
    tmp_path: Path,
) -> None:
    assert all(o.ok for o in collect_once(collector))
    old = rows_of(r, VICTIM)
    obj = sim.list(VICTIM, "Kustomization")[0]["metadata"]
    sim.delete(VICTIM, "Kustomization", obj["namespace"], obj["name"])
    sim.set_fault(VICTIM, latency_s=0.1)  # ~40 slow requests: seconds of sync to kill into
    sim.clear_request_log()

    env = stack_env(
        settings.redis_url,
        Path(settings.clusters_dir),
        tmp_path,
        lock_ttl_s=2,
        broker_url=broker_url,
    )
    celery = create_celery(Settings.from_env({k: v for k, v in env.items() if "FLEET" in k}))
    sup = Supervisor(tmp_path, env)
    seen: list[frozenset[str]] = []
    stop = threading.Event()

    def watch_snapshots() -> None:
        reader = topology.client(settings.redis_url, decode_responses=True)
        while not stop.is_set():
            seen.append(frozenset(reader.zrange(keys.rows(VICTIM), 0, -1)))
        reader.close()

    watcher = threading.Thread(target=watch_snapshots)
    watcher.start()
    try:
        worker = start_worker(sup, "worker-1")
        celery.send_task(SYNC_OBJECTS, (VICTIM,))
        wait_for(lambda: len(sim.request_log(VICTIM)) >= 10, 60, "the sync to be under way")
        assert r.exists(keys.lock(VICTIM, "objects")) and r.pttl(keys.lock(VICTIM, "objects")) > 0
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(10)
        sim.set_fault(VICTIM)
        start_worker(sup, "worker-2")  # starts while the dead worker's lock runs out
        assert rows_of(r, VICTIM) == old, "nothing of the killed sync was written"
        wait_for(lambda: not r.exists(keys.lock(VICTIM, "objects")), 10, "the lock to expire")
        celery.send_task(SYNC_OBJECTS, (VICTIM,))  # what beat sends every interval
        wait_for(lambda: syncstatus.read_all(r, [VICTIM])[VICTIM].state == "ok", 60, "resync")
    finally:
        stop.set()
        watcher.join()
        sup.stop_all()
        celery.close()
    new = rows_of(r, VICTIM)
    assert len(new) == len(old) - 1, "the deletion on the leaf arrived"
    assert all(s in (old, new) for s in seen), "readers saw only whole snapshots"
    assert seen.count(new) < len(seen)
