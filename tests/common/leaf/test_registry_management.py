"""The cluster registry's sources on a management cluster, against kubesim over HTTPS with the
real kubernetes client: GitopsCluster (secretRef with `value`/`value.yaml`, capiClusterRef,
Ready=False), Cluster API (control plane ready or not), Argo CD (in-cluster skipped unless
asked), fleetscope's Secrets; names; the versions discovery serves; a group not served; an
unreachable management cluster; what each source reads (and nothing when all are off); and
the k8s/components RBAC granting exactly what the sources read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from common.index import keys
from common.index.registry_record import Record, read_problems
from common.leaf import claims, registry
from common.rbac.authorizer import service_account_user
from kubesim.catalog import Catalog, Resource
from kubesim.server import KubeSim
from tests.support import mgmtsim
from tests.support.mgmtsim import MGMT
from tests.support.paths import REPO

ROOT = REPO


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = mgmtsim.start(tmp_path)
    yield s
    s.stop()


def _claims(sim: KubeSim, tmp_path: Path, token: str = "", **on: Any) -> claims.Claims:
    return registry.load_claims(mgmtsim.management_settings(sim, tmp_path, token, **on))


def _by_name(claims: claims.Claims) -> dict[str, claims.Claim]:
    return {c.name: c for c in claims.claims}


def _paths(sim: KubeSim) -> list[str]:
    return [r.path for r in sim.request_log(MGMT)]


def test_nothing_is_read_from_the_management_cluster_when_every_source_is_off(
    sim: KubeSim, tmp_path: Path, r: redis.Redis
) -> None:
    from collector.clusters import ClusterSource

    sim.apply(MGMT, mgmtsim.gitopscluster("gc", secret_ref="gc-kc"))
    settings = mgmtsim.management_settings(sim, tmp_path, clusters_dir=str(sim.kubeconfig_dir))
    sim.clear_request_log()
    claims = registry.load_claims(settings)
    registry.reconcile(r, claims)
    source = ClusterSource(settings, r=r)
    assert sorted(source.configs(refresh=True)) == ["cluster-000", "cluster-001"]
    source.close()
    assert sorted(registry.load_cluster_configs(settings)) == ["cluster-000", "cluster-001"]
    assert sim.request_log(MGMT) == []


@pytest.mark.parametrize(
    ("switch", "expected"),
    [
        ("cluster_secrets", {"/api/v1/namespaces/fleetscope/secrets"}),
        ("argocd_clusters", {"/api/v1/namespaces/argocd/secrets"}),
        (
            "gitopsclusters",
            {
                "/apis/gitops.weave.works",
                "/apis/gitops.weave.works/v1alpha1/namespaces/fleet/gitopsclusters",
                "/api/v1/namespaces/fleet/secrets",
            },
        ),
        (
            "capi_clusters",
            {
                "/apis/cluster.x-k8s.io",
                "/apis/cluster.x-k8s.io/v1beta1/namespaces/fleet/clusters",
                "/api/v1/namespaces/fleet/secrets",
            },
        ),
    ],
)
def test_each_source_reads_only_what_it_needs(
    sim: KubeSim, tmp_path: Path, switch: str, expected: set[str]
) -> None:
    for source in ("gitopscluster", "capi", "argocd", "secret"):
        mgmtsim.Registration(sim, source, "cluster-000").apply(sim.collector_token)
    sim.clear_request_log()
    claims = _claims(sim, tmp_path, **{switch: True})
    assert len(claims.claims) == 1 and claims.problems == []
    assert set(_paths(sim)) == expected
    assert len(_paths(sim)) == len(expected)  # one list per resource and namespace per round
    if switch == "argocd_clusters":
        assert sim.request_log(MGMT)[0].query["labelSelector"] == (
            "argocd.argoproj.io/secret-type=cluster"
        )


def test_gitopsclusters_by_secret_or_capi_reference(sim: KubeSim, tmp_path: Path) -> None:
    apply = lambda obj: sim.apply(MGMT, obj)  # noqa: E731
    apply(mgmtsim.kubeconfig_secret(sim, "cluster-000", "a-kc"))
    apply(mgmtsim.gitopscluster("a", secret_ref="a-kc"))
    apply(mgmtsim.kubeconfig_secret(sim, "cluster-001", "b-kc", key="value.yaml"))
    apply(mgmtsim.gitopscluster("b", secret_ref="b-kc", ready=None))  # no controller yet
    apply(mgmtsim.capi_secret(sim, "cluster-001", "c-capi"))
    apply(mgmtsim.capi_cluster("c-capi"))
    apply(mgmtsim.gitopscluster("c", capi_ref="c-capi", reason="ControlPlaneReadyStatus"))
    apply(mgmtsim.capi_cluster("d-capi", ready=False))
    apply(mgmtsim.gitopscluster("d", capi_ref="d-capi", ready=None))
    apply(mgmtsim.gitopscluster("e", secret_ref="missing", ready=None))
    apply(
        mgmtsim.gitopscluster(
            "f", secret_ref="missing", ready="False", reason="WaitingForSecret",
            message='failed to get secret "fleet/missing": secrets "missing" not found',
        )
    )  # fmt: skip
    apply(mgmtsim.gitopscluster("g", ready=None))
    apply(mgmtsim.gitopscluster("h", capi_ref="nope", ready=None))
    labels = {"fleetscope.io/cluster-name": "edge-7"}
    apply(mgmtsim.gitopscluster("i", secret_ref="a-kc", labels=labels))
    apply(mgmtsim.gitopscluster("x" * 60, secret_ref="a-kc"))
    claims = _claims(sim, tmp_path, gitopsclusters=True, cluster_name_label_namespaces=("fleet",))
    got = _by_name(claims)
    ready = sorted(n for n, c in got.items() if c.ready)
    assert ready == ["edge-7", "fleet.a", "fleet.b", "fleet.c"]
    assert got["fleet.b"].config is not None
    assert got["fleet.b"].config.server == sim.url("cluster-001")  # key `value.yaml`
    assert got["fleet.c"].credentials == "secret fleet/c-capi-kubeconfig"
    assert got["fleet.d"].not_ready.startswith("control plane not ready")
    assert got["fleet.d"].server == "https://d-capi.example.internal:6443"
    assert got["fleet.e"].not_ready == "its kubeconfig secret fleet/missing does not exist"
    assert got["fleet.f"].not_ready.startswith("Ready=False (WaitingForSecret): failed to get")
    assert "neither secretRef nor capiClusterRef" in got["fleet.g"].not_ready
    assert got["fleet.h"].not_ready == "its Cluster API cluster fleet/nope does not exist"
    assert [p.type for p in claims.problems] == ["invalid-name"]
    assert claims.problems[0].origins == ("gitopscluster fleet/" + "x" * 60,)
    # each ready claim really reaches its leaf (the kubernetes client's own loader)
    assert got["fleet.a"].config is not None
    assert got["fleet.a"].config.configuration().host == sim.url("cluster-000")


def test_capi_clusters_need_a_ready_control_plane(sim: KubeSim, tmp_path: Path) -> None:
    sim.apply(MGMT, mgmtsim.capi_secret(sim, "cluster-000", "up"))
    sim.apply(MGMT, mgmtsim.capi_cluster("up"))
    sim.apply(MGMT, mgmtsim.capi_cluster("booting", ready=False))
    sim.apply(MGMT, mgmtsim.capi_cluster("no-secret"))
    got = _by_name(_claims(sim, tmp_path, capi_clusters=True))
    assert got["fleet.up"].ready and got["fleet.up"].revision
    assert got["fleet.booting"].not_ready == (
        "control plane not ready: ControlPlaneReady=False (WaitingForControlPlane): 0 of 3 ready"
    )
    assert got["fleet.no-secret"].not_ready == (
        "its kubeconfig secret fleet/no-secret-kubeconfig does not exist"
    )


def test_gitopscluster_and_capi_on_the_same_cluster_register_it_once(
    sim: KubeSim, tmp_path: Path, r: redis.Redis
) -> None:
    sim.apply(MGMT, mgmtsim.capi_secret(sim, "cluster-000", "prod"))
    sim.apply(MGMT, mgmtsim.capi_cluster("prod"))
    sim.apply(MGMT, mgmtsim.gitopscluster("prod", capi_ref="prod"))
    claims = _claims(sim, tmp_path, gitopsclusters=True, capi_clusters=True)
    assert len(claims.claims) == 2
    result = registry.reconcile(r, claims)
    assert result.added == ["fleet.prod"] and read_problems(r) == []


def test_argocd_in_cluster_entry_only_when_asked(sim: KubeSim, tmp_path: Path) -> None:
    sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-000", "c0", "prod-0"))
    in_cluster = mgmtsim.argocd_secret(
        sim, "cluster-000", "in", "in-cluster", server="https://kubernetes.default.svc", config={}
    )
    sim.apply(MGMT, in_cluster)
    assert sorted(_by_name(_claims(sim, tmp_path, argocd_clusters=True))) == ["prod-0"]
    got = _by_name(_claims(sim, tmp_path, argocd_clusters=True, argocd_include_in_cluster=True))
    assert sorted(got) == ["in-cluster", "prod-0"]
    config = got["in-cluster"].config
    assert config is not None and config.configuration().host == sim.url(MGMT)


def test_versions_are_the_ones_discovery_serves(tmp_path: Path) -> None:
    catalog = Catalog.default()
    catalog.add(Resource("gitops.weave.works", "v1beta1", "GitopsCluster", "gitopsclusters"))
    catalog.add(Resource("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"))
    with mgmtsim.start(tmp_path, catalog=catalog) as sim:
        sim.apply(MGMT, mgmtsim.kubeconfig_secret(sim, "cluster-000", "a-kc"))
        sim.apply(MGMT, mgmtsim.gitopscluster("a", secret_ref="a-kc", version="v1beta1"))
        sim.apply(MGMT, mgmtsim.capi_secret(sim, "cluster-001", "b"))
        b = mgmtsim.capi_cluster("b", version="v1beta2")
        b["status"] = {"initialization": {"controlPlaneInitialized": True}}
        sim.apply(MGMT, b)
        got = _by_name(_claims(sim, tmp_path, gitopsclusters=True, capi_clusters=True))
        assert sorted(n for n, c in got.items() if c.ready) == ["fleet.a", "fleet.b"]
        paths = set(_paths(sim))
        assert "/apis/gitops.weave.works/v1beta1/namespaces/fleet/gitopsclusters" in paths
        assert "/apis/cluster.x-k8s.io/v1beta2/namespaces/fleet/clusters" in paths


def test_a_group_not_served_is_reported_and_registers_nothing(tmp_path: Path) -> None:
    catalog = Catalog()
    for res in Catalog.default():
        if res.group not in ("gitops.weave.works", "cluster.x-k8s.io"):
            catalog.add(res)
    with mgmtsim.start(tmp_path, catalog=catalog) as sim:
        claims = _claims(sim, tmp_path, gitopsclusters=True, capi_clusters=True)
    assert claims.claims == [] and claims.failed == set()
    assert sorted(p.message for p in claims.problems) == [
        "capi: the management cluster does not serve cluster.x-k8s.io (is Cluster API installed?)",
        "gitopscluster: the management cluster does not serve gitops.weave.works "
        "(is Weave GitOps installed?)",
    ]


def test_an_unreachable_management_cluster_drops_nothing(
    sim: KubeSim, tmp_path: Path, r: redis.Redis
) -> None:
    mgmtsim.Registration(sim, "argocd", "cluster-000").apply(sim.collector_token)
    settings = mgmtsim.management_settings(sim, tmp_path, argocd_clusters=True, leaf_timeout_s=2)
    assert registry.reconcile(r, registry.load_claims(settings)).added == ["argo-x"]
    sim.set_fault(MGMT, down=True)
    claims = registry.load_claims(settings)
    assert claims.failed == {"argocd"}
    assert "cannot reach the management cluster" in claims.problems[0].message
    assert not registry.reconcile(r, claims).changed
    assert Record.decode(r.hget(keys.CLUSTERS, "argo-x")).source == "argocd"
    assert [p.type for p in read_problems(r)] == ["source-error"]
    sim.set_fault(MGMT)
    assert registry.reconcile(r, registry.load_claims(settings)).changed is False
    assert read_problems(r) == []


# -- RBAC: k8s/components grant what the sources read, nothing else -------------------------


def _manifests(*paths: str) -> list[dict[str, Any]]:
    docs = []
    for path in paths:
        docs += [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    return docs


def _install_rbac(sim: KubeSim, components: list[str]) -> str:
    """fleetscope's management RBAC (the base Role plus `components`) on the management
    cluster; a token of the `fleetscope` service account, which kubesim authorizes by it."""
    objects = _manifests("k8s/base/serviceaccount.yaml")
    objects += _manifests(*(f"k8s/components/{c}/rbac.yaml" for c in components))
    for obj in objects:
        if obj["kind"] in ("Role", "RoleBinding", "ServiceAccount"):
            obj["metadata"].setdefault("namespace", "fleetscope")
        sim.apply(MGMT, obj)
    sa = service_account_user("fleetscope", "fleetscope")
    return sim.token_for(sa.name, sa.groups)


@pytest.mark.parametrize(
    ("component", "switch", "names"),
    [
        ("", "cluster_secrets", ["secret-x"]),  # the base's Role
        ("gitopsclusters", "gitopsclusters", ["fleet.gc-x", "fleet.via-gc"]),
        ("capi-clusters", "capi_clusters", ["fleet.capi-x", "fleet.via-gc"]),
        ("argocd-clusters", "argocd_clusters", ["argo-x"]),
    ],
)
def test_each_component_grants_what_its_source_reads(
    sim: KubeSim, tmp_path: Path, component: str, switch: str, names: list[str]
) -> None:
    for source in ("gitopscluster", "capi", "argocd", "secret"):
        mgmtsim.Registration(sim, source, "cluster-000").apply(sim.collector_token)
    sim.apply(MGMT, mgmtsim.capi_secret(sim, "cluster-001", "via-gc"))
    sim.apply(MGMT, mgmtsim.capi_cluster("via-gc"))
    sim.apply(MGMT, mgmtsim.gitopscluster("via-gc", capi_ref="via-gc"))
    token = _install_rbac(sim, [component] if component else [])
    sim.clear_request_log()
    claims = _claims(sim, tmp_path, token, **{switch: True})
    assert claims.failed == set() and claims.problems == []
    assert sorted(_by_name(claims)) == names
    assert {r.status for r in sim.request_log(MGMT)} == {200}


def test_without_its_component_a_source_is_refused_and_says_so(
    sim: KubeSim, tmp_path: Path
) -> None:
    token = _install_rbac(sim, [])  # the base only: Secrets in fleetscope's namespace
    everything = {"gitopsclusters": True, "capi_clusters": True, "argocd_clusters": True}
    claims = _claims(sim, tmp_path, token, **everything)
    assert claims.failed == {"gitopscluster", "capi", "argocd"}
    messages = sorted(p.message for p in claims.problems)
    assert messages[0] == (
        "argocd: the management cluster refused to list secrets in namespace argocd "
        "(HTTP 403): check fleetscope's RBAC there (docs/operations.md)"
    )
    assert "gitopsclusters in namespace fleet (HTTP 403)" in messages[2]
