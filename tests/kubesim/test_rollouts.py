"""Chart rollouts in the generated fleet (kubesim.rollouts): the same HelmRelease runs one chart
version everywhere but for a few releases mid-rollout, whose clusters run the new version
mostly and the old one on some; the draws change no other object."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from common.kinds.status import revision
from kubesim.catalog import Catalog
from kubesim.fleet import generate_fleet
from kubesim.rollouts import CHARTS


def _objects(fleet: Any, index: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for _res, ns, name, body in fleet.objects(index, Catalog.default()):
        obj = json.loads(body)
        out[(obj["kind"], ns, name)] = obj
    return out


def test_some_releases_run_two_versions_across_the_fleet() -> None:
    fleet = generate_fleet(12, 120, seed=3)
    per: dict[tuple[str, str], Counter[str]] = {}
    for i in range(12):
        for (kind, ns, name), obj in _objects(fleet, i).items():
            if kind == "HelmRelease":
                rev = revision(obj)  # what fleetscope reads as the row's revision
                assert rev in CHARTS[name]
                ready = obj["status"]["conditions"][-1]
                if ready["reason"] in ("UpgradeSucceeded", "UpgradeFailed"):
                    assert f"{name}@{rev}" in ready["message"]
                per.setdefault((ns, name), Counter())[rev] += 1
    drifting = {k: c for k, c in per.items() if len(c) > 1}
    assert drifting and len(drifting) < len(per) / 2, (len(drifting), len(per))
    # mid-rollout, the new version runs on most of a release's clusters, summed over the fleet
    new = sum(c[CHARTS[k[1]][1]] for k, c in drifting.items())
    old = sum(c[CHARTS[k[1]][0]] for k, c in drifting.items())
    assert new > old > 0


def test_same_seed_same_versions_and_the_rest_unchanged() -> None:
    a = _objects(generate_fleet(3, 60, seed=4), 1)
    b = _objects(generate_fleet(3, 60, seed=4), 1)
    assert a == b
    # everything but the HelmReleases' chart version is what it was before rollouts existed:
    # the version is no draw from the cluster's random stream (no other object moved)
    for key, obj in a.items():
        if key[0] == "HelmRelease":
            assert obj["status"]["lastAttemptedRevision"] in CHARTS[key[2]]
    assert sum(1 for k in a if k[0] == "HelmRelease") > 5
