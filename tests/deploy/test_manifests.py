"""k8s/: the kustomizations render, validate against the Kubernetes schemas, and say what
docs/operations.md promises (replicas, probes, non-root pods, least-privilege RBAC checked with
fleetscope's own RBAC engine, leaf role covering every built-in kind, known settings only).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from common.kinds.registry import builtin_registry
from common.rbac.authorizer import Authorizer, RbacObjects, UserInfo, service_account_user
from common.settings import SECRET_SETTINGS, Settings, env_name, setting_fields
from tests.deploy.render import K8S_VERSIONS, ROOT, find, kustomize

# Settings, and the files secrets may be read from (FLEETSCOPE_REDIS_URL_FILE, ...).
KNOWN_ENV = {env_name(f.name) for f in setting_fields()} | {
    env_name(name) + "_FILE" for name in SECRET_SETTINGS
}


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return kustomize("k8s/base")


@pytest.fixture(scope="module")
def leaf() -> list[dict[str, Any]]:
    return kustomize("k8s/leaf")


def _deployments(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


@pytest.mark.parametrize(
    "path", ["k8s/base", "k8s/leaf", "k8s/examples/managed-redis", "k8s/examples/registry-sources"]
)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schema(path: str, version: str) -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate not installed (.ci/validate-deploy)"
    )
    desired = kv.latest_version() if version == "latest" else version
    objects = kustomize(path)
    assert objects
    for obj in objects:
        kv.validate(obj, desired, strict=True)  # raises ValidationError with the path


def test_everything_lands_in_one_namespace_with_common_labels(base: list[dict[str, Any]]) -> None:
    for obj in base:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "fleetscope", obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fleetscope"


def test_query_has_two_replicas_probes_resources_service_and_pdb(
    base: list[dict[str, Any]],
) -> None:
    query = _deployments(base)["fleetscope-query"]
    assert query["spec"]["replicas"] == 2
    pod_labels = query["spec"]["template"]["metadata"]["labels"]
    c = _container(query)
    assert c["command"] == ["fleetscope", "serve", "--bind", "0.0.0.0:8080"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert "memory" in c["resources"]["limits"]
    pdb = find(base, "PodDisruptionBudget", "fleetscope-query")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service = find(base, "Service", "fleetscope-query")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_worker_beat_and_redis(base: list[dict[str, Any]]) -> None:
    deployments = _deployments(base)
    assert set(deployments) == {
        "fleetscope-query",
        "fleetscope-worker",
        "fleetscope-watcher",
        "fleetscope-beat",
        "fleetscope-redis",
    }
    worker, beat = deployments["fleetscope-worker"], deployments["fleetscope-beat"]
    assert _container(worker)["command"][:4] == ["celery", "-A", "collector", "worker"]
    assert _container(worker)["livenessProbe"]["tcpSocket"]["port"] == "metrics"
    assert _container(beat)["command"][:4] == ["celery", "-A", "collector", "beat"]
    assert beat["spec"]["replicas"] == 1  # two beats would schedule every sync twice
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    redis = deployments["fleetscope-redis"]
    args = _container(redis)["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    assert args[args.index("--save") + 1] == ""  # ephemeral: rebuilt from the clusters
    service = find(base, "Service", "fleetscope-redis")
    config = find(base, "ConfigMap", "fleetscope-config")
    assert "FLEETSCOPE_REDIS_URL" not in config["data"]
    assert config["data"]["FLEETSCOPE_REDIS_URL_FILE"] == "/var/run/secrets/fleetscope-redis/url"
    # The password: the init container creates the Secret (its URL names this Service), Redis
    # reads the config it writes, and the others mount the Secret's `url`.
    [init] = redis["spec"]["template"]["spec"]["initContainers"]
    cmd = init["command"]
    assert cmd[:3] == ["python", "-m", "common.redis_auth"]
    assert cmd[cmd.index("--secret") + 1] == "fleetscope-redis"
    host = f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert cmd[cmd.index("--host") + 1] == host
    assert args[0] == cmd[cmd.index("--config") + 1]  # redis-server's config file
    pod = redis["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False  # the token: init container only
    assert "token" not in {m["name"] for m in _container(redis)["volumeMounts"]}
    role = find(base, "Role", "fleetscope-redis")
    assert {"verbs": ["get"], "resourceNames": ["fleetscope-redis"]}.items() <= role["rules"][
        0
    ].items()
    for name in ("fleetscope-query", "fleetscope-worker", "fleetscope-beat", "fleetscope-watcher"):
        spec = deployments[name]["spec"]["template"]["spec"]
        [volume] = [v for v in spec["volumes"] if v["name"] == "redis-auth"]
        assert volume["secret"]["secretName"] == "fleetscope-redis"
        mounts = {m["name"]: m["mountPath"] for m in _container(deployments[name])["volumeMounts"]}
        assert mounts["redis-auth"] + "/url" == config["data"]["FLEETSCOPE_REDIS_URL_FILE"]


def test_watcher_has_two_replicas_probes_resources_metrics_and_pdb(
    base: list[dict[str, Any]],
) -> None:
    watcher = _deployments(base)["fleetscope-watcher"]
    assert watcher["spec"]["replicas"] == 2
    pod = watcher["spec"]["template"]
    c = _container(watcher)
    assert c["command"][:2] == ["fleetscope", "watch"]
    beat_file = c["command"][c["command"].index("--heartbeat-file") + 1]
    assert beat_file in c["livenessProbe"]["exec"]["command"][-1]  # the file it touches
    assert c["readinessProbe"]["tcpSocket"]["port"] == "metrics"
    (port,) = c["ports"]
    assert port["containerPort"] == Settings().watch_metrics_port == 9809
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "9809"
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert "memory" in c["resources"]["limits"]
    assert pod["spec"]["serviceAccountName"] == "fleetscope"  # reads the cluster Secrets
    pdb = find(base, "PodDisruptionBudget", "fleetscope-watcher")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    policy = find(base, "NetworkPolicy", "fleetscope-watcher-metrics")
    assert policy["spec"]["ingress"][0]["ports"][0]["port"] == 9809


def test_pods_run_non_root_read_only_with_the_release_image(base: list[dict[str, Any]]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name, deployment in _deployments(base).items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        c = _container(deployment)
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], name
        if name != "fleetscope-redis":
            assert c["image"] == f"fleetscope:{version}", name
            if name == "fleetscope-beat":
                assert pod["automountServiceAccountToken"] is False
            else:
                assert pod["serviceAccountName"] == "fleetscope", name
            mounts = {m["mountPath"] for m in c["volumeMounts"]}
            assert "/tmp" in mounts, name  # celery beat's schedule, Python temp files


def test_only_known_settings_are_set(base: list[dict[str, Any]]) -> None:
    config = find(base, "ConfigMap", "fleetscope-config")
    assert set(config["data"]) <= KNOWN_ENV, set(config["data"]) - KNOWN_ENV
    for name, deployment in _deployments(base).items():
        env = {e["name"] for e in _container(deployment).get("env", [])}
        assert env <= KNOWN_ENV, (name, env - KNOWN_ENV)


def test_management_service_account_reads_only_secrets_in_its_namespace(
    base: list[dict[str, Any]],
) -> None:
    assert not [o for o in base if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    rbac = RbacObjects(
        roles=[o for o in base if o["kind"] == "Role"],
        role_bindings=[o for o in base if o["kind"] == "RoleBinding"],
    )
    authz = Authorizer(rbac)
    sa = service_account_user("fleetscope", "fleetscope")
    for verb in ("get", "list", "watch"):
        assert authz.allowed(sa, verb, "", "secrets", "fleetscope")
    for verb in ("create", "update", "patch", "delete"):
        assert not authz.allowed(sa, verb, "", "secrets", "fleetscope")
    assert not authz.allowed(sa, "list", "", "secrets", "kube-system")
    assert not authz.allowed(sa, "list", "", "secrets", None)
    assert not authz.allowed(sa, "list", "", "pods", "fleetscope")


def _leaf_authorizer(leaf: list[dict[str, Any]]) -> Authorizer:
    return Authorizer(
        RbacObjects(
            cluster_roles=[o for o in leaf if o["kind"] == "ClusterRole"],
            cluster_role_bindings=[o for o in leaf if o["kind"] == "ClusterRoleBinding"],
        )
    )


def test_leaf_role_reads_every_builtin_kind_and_rbac(leaf: list[dict[str, Any]]) -> None:
    authz = _leaf_authorizer(leaf)
    sa = service_account_user("fleetscope", "fleetscope-collector")
    targets = [(k.group, k.plural) for k in builtin_registry()]
    targets += [("rbac.authorization.k8s.io", r) for r in ("roles", "clusterroles")]
    targets += [("rbac.authorization.k8s.io", r) for r in ("rolebindings", "clusterrolebindings")]
    targets += [("", "namespaces"), ("", "services")]  # services: Istio hosts must resolve
    role = find(leaf, "ClusterRole", "fleetscope-collector")
    readable = {
        (group, resource)
        for rule in role["rules"]
        if rule["verbs"] == ["get", "list", "watch"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert readable == set(targets)  # exactly what the collector reads, nothing more
    for group, resource in targets:
        for verb in ("get", "list", "watch"):
            assert authz.allowed(sa, verb, group, resource, None), (verb, group, resource)
        for verb in ("create", "update", "patch", "delete", "deletecollection"):
            assert not authz.allowed(sa, verb, group, resource, None), (verb, group, resource)
    for resource in ("users", "groups", "serviceaccounts"):
        assert authz.allowed(sa, "impersonate", "", resource, None, "alice")
    for group, resource in [("", "secrets"), ("", "pods"), ("", "configmaps"), ("apps", "*")]:
        assert not authz.allowed(sa, "get", group, resource, "default"), resource
    other = UserInfo("system:serviceaccount:default:default", ("system:authenticated",))
    assert not authz.allowed(other, "list", "kustomize.toolkit.fluxcd.io", "kustomizations", None)


def test_leaf_token_secret_belongs_to_the_bound_service_account(
    leaf: list[dict[str, Any]],
) -> None:
    sa = find(leaf, "ServiceAccount", "fleetscope-collector")
    token = find(leaf, "Secret", "fleetscope-collector-token")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert (
        token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
        == "fleetscope-collector"
    )
    assert token["metadata"]["namespace"] == sa["metadata"]["namespace"]
    binding = find(leaf, "ClusterRoleBinding", "fleetscope-collector")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "fleetscope-collector", "namespace": "fleetscope"}
    ]


def test_managed_redis_example_drops_the_bundled_redis() -> None:
    objects = kustomize("k8s/examples/managed-redis")
    assert not [o for o in objects if o["metadata"]["name"] == "fleetscope-redis"]
    images = {_container(d)["image"] for d in _deployments(objects).values()}
    assert images == {"registry.example.com/fleetscope:0.1.0"}
    config = find(objects, "ConfigMap", "fleetscope-config")
    assert config["data"]["FLEETSCOPE_OIDC_ISSUER_URL"] == "https://dex.example.com"
    for deployment in _deployments(objects).values():
        env_from = _container(deployment)["envFrom"]
        assert {"secretRef": {"name": "fleetscope-env", "optional": True}} in env_from


# Registry sources (docs/operations.md#registry-sources): each component switches its source on
# and adds read access to exactly what that source reads; (group, resource, namespace or None
# for every namespace).
REGISTRY_COMPONENTS = {
    "gitopsclusters": (
        "FLEETSCOPE_GITOPSCLUSTERS",
        {("gitops.weave.works", "gitopsclusters", "fleet"), ("cluster.x-k8s.io", "clusters", "fleet"),
         ("", "secrets", "fleet")},
    ),
    "capi-clusters": (
        "FLEETSCOPE_CAPI_CLUSTERS",
        {("cluster.x-k8s.io", "clusters", "fleet"), ("", "secrets", "fleet")},
    ),
    "argocd-clusters": ("FLEETSCOPE_ARGOCD_CLUSTERS", {("", "secrets", "argocd")}),
}  # fmt: skip
# The namespaces each component's source reads (its setting), exactly where it grants reads
# (issue #35: never cluster-wide; `*` only when asked for).
COMPONENT_NAMESPACES = {
    "gitopsclusters": ("FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE", "fleet"),
    "capi-clusters": ("FLEETSCOPE_CAPI_CLUSTERS_NAMESPACE", "fleet"),
    "argocd-clusters": ("FLEETSCOPE_ARGOCD_CLUSTERS_NAMESPACE", "argocd"),
}
PROBES = [
    ("", "secrets"),
    ("", "configmaps"),
    ("", "pods"),
    ("apps", "deployments"),
    ("gitops.weave.works", "gitopsclusters"),
    ("cluster.x-k8s.io", "clusters"),
    ("cluster.x-k8s.io", "machines"),
    ("rbac.authorization.k8s.io", "roles"),
]


def _overlay(tmp_path: Path, components: list[str]) -> str:
    """A kustomization in tmp_path: the base plus `components` (paths relative to it)."""
    rel = os.path.relpath(ROOT / "k8s", tmp_path)
    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization"]
    lines += ["resources:", f"  - {rel}/base", "components:"]
    lines += [f"  - {rel}/components/{c}" for c in components]
    (tmp_path / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return str(tmp_path)


def _management_authorizer(objects: list[dict[str, Any]]) -> Authorizer:
    def of(kind: str) -> list[dict[str, Any]]:
        return [o for o in objects if o["kind"] == kind]

    return Authorizer(
        RbacObjects(
            roles=of("Role"),
            cluster_roles=of("ClusterRole"),
            role_bindings=of("RoleBinding"),
            cluster_role_bindings=of("ClusterRoleBinding"),
        )
    )


@pytest.mark.parametrize("component", sorted(REGISTRY_COMPONENTS))
def test_registry_component_adds_exactly_what_its_source_reads(
    component: str, tmp_path: Path
) -> None:
    variable, reads = REGISTRY_COMPONENTS[component]
    objects = kustomize(_overlay(tmp_path, [component]))
    config = find(objects, "ConfigMap", "fleetscope-config")
    assert config["data"][variable] == "true"
    assert set(config["data"]) <= KNOWN_ENV
    authz = _management_authorizer(objects)
    sa = service_account_user("fleetscope", "fleetscope")
    base = {("", "secrets", "fleetscope")}  # the base's Role: fleetscope's own Secrets
    for group, resource in PROBES:
        for ns in ("fleetscope", "argocd", "fleet", None):
            granted = any(
                (g, r) == (group, resource) and where in (None, ns) for g, r, where in reads | base
            )
            for verb in ("get", "list", "watch"):
                assert authz.allowed(sa, verb, group, resource, ns) == granted, (
                    verb, group, resource, ns,
                )  # fmt: skip
            for verb in ("create", "update", "patch", "delete", "deletecollection"):
                assert not authz.allowed(sa, verb, group, resource, ns), (verb, resource, ns)
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fleetscope"
    # no cluster-wide grant, and the setting names the namespaces the Roles grant
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    setting, namespace = COMPONENT_NAMESPACES[component]
    assert config["data"].get(setting, Settings().argocd_clusters_namespace) == namespace
    assert Settings.from_env({setting: config["data"].get(setting, namespace)})


def test_registry_sources_example_switches_every_source_on() -> None:
    objects = kustomize("k8s/examples/registry-sources")
    data = find(objects, "ConfigMap", "fleetscope-config")["data"]
    assert {v for v, _ in REGISTRY_COMPONENTS.values()} <= {
        k for k, v in data.items() if v == "true"
    }
    # the base itself stays namespace-bound (components add the rest)
    assert find(objects, "Role", "fleetscope-argocd-clusters")["metadata"]["namespace"] == "argocd"
    # GitopsClusters in two namespaces: both listed, a Role and RoleBinding in each, no more
    assert data["FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE"] == "fleet,fleet-eu"
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    authz = _management_authorizer(objects)
    sa = service_account_user("fleetscope", "fleetscope")
    for ns in ("fleet", "fleet-eu"):
        assert authz.allowed(sa, "list", "gitops.weave.works", "gitopsclusters", ns)
        assert authz.allowed(sa, "list", "", "secrets", ns)
    for ns in ("default", "kube-system", None):
        assert not authz.allowed(sa, "list", "", "secrets", ns), ns
        assert not authz.allowed(sa, "list", "gitops.weave.works", "gitopsclusters", ns), ns
