"""Chart rollouts in the generated fleet (kubesim.gen.rollouts): the same HelmRelease runs one chart
version everywhere but for a few releases mid-rollout, whose clusters run the new version
mostly and the old one on some; sources serve one commit to every cluster but for a few just
updated; both are hashes, no draw from a cluster's random stream."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from common.kinds.status import revision
from kubesim.catalog import Catalog
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.rollouts import CHARTS, chart_version, commit


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


def test_versions_and_commits_are_hashes_of_the_seed_object_and_cluster() -> None:
    """No draw from the cluster's random stream: each version and commit is what
    kubesim.gen.rollouts computes from the seed, the object and the cluster alone."""
    a = _objects(generate_fleet(3, 60, seed=4), 1)
    assert a == _objects(generate_fleet(3, 60, seed=4), 1)
    releases = gits = 0
    for (kind, ns, name), obj in a.items():
        if kind == "HelmRelease":
            assert obj["status"]["lastAttemptedRevision"] == chart_version(4, 1, ns, name)
            releases += 1
        if kind == "GitRepository" and "artifact" in obj["status"]:
            want = commit(4, 1, ns, "GitRepository", name)
            assert obj["status"]["artifact"]["revision"] == f"main@sha1:{want}"
            gits += 1
    assert releases > 5 and gits > 5
