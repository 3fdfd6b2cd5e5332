"""The generated fleet (deterministic, realistic status mix, RBAC matching the users file),
manifests mode, and the `fleetscope kubesim` command."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from common.kinds.status import evaluate, is_suspended
from common.rbac.authorizer import UserInfo
from kubesim.catalog import Catalog
from kubesim.gen.fleet import generate_fleet, preset_fleet
from kubesim.gen.users import fleet_users
from kubesim.manifests import ManifestFleet
from kubesim.server import KubeSim
from kubesim.store import ClusterStore
from tests.support import sims


def _load(fleet: object, name: str) -> ClusterStore:
    store = ClusterStore(name, Catalog.default())
    fleet.load(name, store)  # type: ignore[attr-defined]
    return store


def test_same_seed_same_objects() -> None:
    a = _load(generate_fleet(2, 30, seed=5), "cluster-001")
    b = _load(generate_fleet(2, 30, seed=5), "cluster-001")
    c = _load(generate_fleet(2, 30, seed=6), "cluster-001")
    assert {k: t.items for k, t in a.tables.items()} == {k: t.items for k, t in b.tables.items()}
    assert {k: t.items for k, t in a.tables.items()} != {k: t.items for k, t in c.tables.items()}


def test_status_mix_is_mostly_healthy_with_some_of_each() -> None:
    """Flux and Istio rows through fleetscope's status rules, the Istio ones with the cluster's
    validation findings; suspension apart from health."""
    import json

    from common.kinds import istio_checks

    fleet = generate_fleet(1, 2000, seed=1)
    store = _load(fleet, "cluster-000")

    def objects(res) -> list[dict]:
        table = store.tables.get(res.key)
        return [json.loads(raw) for raw in table.items.values()] if table else []

    istio = {
        res.kind: objects(res)
        for res in store.catalog
        if res.status_rule == "istio" and res.kind in istio_checks.CHECKED_KINDS
    }
    by_name = {res.resource: res for res in store.catalog}
    findings = istio_checks.validate(
        istio,
        objects(by_name["services"]),
        [n["metadata"]["name"] for n in objects(by_name["namespaces"])],
    )
    counts: dict[str, int] = {}
    suspended = 0
    for res in store.catalog:
        if res.status_rule not in ("flux", "static", "istio"):
            continue
        for obj in objects(res):
            meta = obj["metadata"]
            found = findings.get((meta.get("namespace", ""), res.kind, meta["name"]))
            status = evaluate(res.status_rule, obj, found).status
            counts[status] = counts.get(status, 0) + 1
            suspended += is_suspended(res.status_rule, obj)
    total = sum(counts.values())
    assert 3.0 * 2000 < total < 3.5 * 2000
    assert counts["healthy"] / total > 0.95
    assert counts.get("unhealthy", 0) and counts.get("progressing", 0) and suspended


def test_users_file_matches_rbac(kubesim: KubeSim) -> None:
    fleet = kubesim.fleet
    for user in fleet_users(fleet):  # type: ignore[arg-type]
        for cluster in kubesim.clusters:
            authz = kubesim._cluster(cluster).authz
            info = UserInfo(user.name, (*user.groups, "system:authenticated"))
            namespaces = [n["metadata"]["name"] for n in kubesim.list(cluster, "Namespace")]
            allowed = [
                ns
                for ns in namespaces
                if authz.allowed(info, "list", "kustomize.toolkit.fluxcd.io", "kustomizations", ns)
            ]
            expected = user.namespaces(cluster)
            assert allowed == (namespaces if expected == "*" else expected), (user.name, cluster)


def test_manifests_mode(tmp_path: Path) -> None:
    (tmp_path / "edge-1").mkdir()
    (tmp_path / "edge-1" / "objects.yaml").write_text(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
        "metadata: {name: apps, namespace: shop}\nspec: {path: ./shop}\n"
        "status: {conditions: [{type: Ready, status: 'False', reason: BuildFailed, message: bad}]}\n"
        "---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: shop}\n"
    )
    with sims.start(ManifestFleet(tmp_path)) as sim:
        assert sim.clusters == ["edge-1"]
        ks = sim.get("edge-1", "Kustomization", "shop", "apps")
        assert ks is not None and ks["status"]["conditions"][0]["message"] == "bad"
        assert [w["metadata"]["name"] for w in sim.list("edge-1", "widgets.example.com")] == ["w"]
        assert sim.get("edge-1", "Namespace", "", "shop") is not None


def test_cli_serves_and_writes_kubeconfigs(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "fleetscope.cli",
        "kubesim",
        "--clusters",
        "2",
        "--namespaces",
        "3",
    ]
    cmd += ["--kubeconfig-dir", str(tmp_path / "clusters")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline()  # type: ignore[union-attr]
        assert ready.startswith("kubesim ready: 2 clusters"), proc.stderr.read()  # type: ignore[union-attr]
        assert sorted(p.name for p in (tmp_path / "clusters").iterdir()) == [
            "cluster-000.yaml",
            "cluster-001.yaml",
        ]
        assert (tmp_path / "kubesim-users.json").exists()
    finally:
        proc.terminate()
        proc.communicate(timeout=20)  # closes the pipes
    assert proc.returncode == 0


def test_fleet_xl_is_fleet_l_with_five_times_the_clusters() -> None:
    """Issue #41's XL: 1,000 clusters of L's 2,000 namespaces (named without generating)."""
    xl, big = preset_fleet("XL"), preset_fleet("L")
    assert len(xl.cluster_names) == 1000 and xl.cluster_names[-1] == "cluster-999"
    assert xl.namespace_names() == big.namespace_names()
    assert xl.spec == dataclasses.replace(big.spec, clusters=1000)
