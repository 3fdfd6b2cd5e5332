"""Attack test: a team member whose RoleBinding is deleted while a full RBAC sync of that
cluster is listing never gets the namespace back. The sync listed the binding before the
deletion; a newer store (a watcher's compile of the deletion, here a second sync) removed it;
the first sync's older snapshot, stored last, gave the access back until the next sync (the
twentieth L soak: a revocation effective after 60 s). It now stores nothing when the cluster's
grants generation moved during its lists (common.rbac.grants.store_grants)."""

from __future__ import annotations

import threading

from collector import sync
from collector.jobs import Collector
from collector.sync import Work
from kubesim.server import KubeSim
from tests.support.held_lists import HeldAfterBindings
from tests.support.http import raw_get
from tests.support.small_fleet import REG


def test_a_sync_listing_across_a_revocation_does_not_restore_it(
    collected: KubeSim, collector: Collector, host: str
) -> None:
    c = collected.clusters[0]
    binding = next(b for b in collected.list(c, "RoleBinding") if b["subjects"])
    ns = binding["metadata"]["namespace"]
    group = next(s["name"] for s in binding["subjects"] if s["kind"] == "Group")
    member = {"X-Remote-User": "dev-0", "X-Remote-Group": group}
    path = f"/api/v1/objects?cluster={c}&namespace={ns}"

    def visible() -> int:
        code, body = raw_get(host, path, member)
        assert code == 200, body
        return len(body["items"])

    assert visible() > 0
    held = HeldAfterBindings(collector.source.client(c))
    syncing = threading.Thread(target=sync.run, args=(collector.r, Work.RBAC, held, REG))
    syncing.start()
    try:
        assert held.listed.wait(30), "the sync did not list the RoleBindings"
        for b in collected.list(c, "RoleBinding"):
            if b["metadata"]["namespace"] == ns and group in {s["name"] for s in b["subjects"]}:
                collected.delete(c, "RoleBinding", ns, b["metadata"]["name"])
        sync.run(collector.r, Work.RBAC, collector.source.client(c), REG)  # the newer store
        assert visible() == 0
    finally:
        held.go.set()
        syncing.join(30)
    assert not syncing.is_alive()
    assert visible() == 0
