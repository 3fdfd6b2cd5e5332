"""common.leaf.registry: clusters from a kubeconfig directory and from labelled Secrets, and
`reconcile` mirroring them into `fs:clusters` on a real redis-server (adds, updates, removals
that delete a cluster's data), with no credentials stored."""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
import yaml

from common.errors import ClusterError, ClusterUnreachable, ConfigError
from common.index import keys, store
from common.leaf import registry
from common.settings import Settings

TOKEN = "registry-SECRET-token-777"


def kubeconfig(server: str = "https://10.0.0.1:6443", token: str = TOKEN) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "clusters": [{"name": "x", "cluster": {"server": server}}],
        "users": [{"name": "x", "user": {"token": token}}],
    }


def write(dir_: Path, name: str, data: Any) -> None:
    (dir_ / name).write_text(data if isinstance(data, str) else yaml.safe_dump(data))


def test_dir_names_clusters_by_file_name(tmp_path: Path) -> None:
    write(tmp_path, "prod-eu-1.yaml", kubeconfig())
    write(tmp_path, "stage.kubeconfig", kubeconfig("https://stage:443"))
    write(tmp_path, ".hidden.yaml", kubeconfig())
    write(tmp_path, "Bad_Name.yaml", kubeconfig())
    configs = registry.load_dir(str(tmp_path))
    assert sorted(configs) == ["prod-eu-1", "stage"]
    assert configs["stage"].server == "https://stage:443"
    assert configs["prod-eu-1"].source == "dir"


def test_broken_kubeconfig_keeps_cluster_registered_but_unusable(tmp_path: Path) -> None:
    write(tmp_path, "broken.yaml", "{{{ not yaml")
    configs = registry.load_dir(str(tmp_path))
    with pytest.raises(ClusterError, match="unusable"):
        configs["broken"].configuration()


def test_missing_dir_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        registry.load_dir(str(tmp_path / "nope"))


class FakeCoreApi:
    """Stands in for CoreV1Api.list_namespaced_secret (the label selector is checked)."""

    def __init__(self, secrets: list[tuple[str, dict[str, str], bytes]], fail: bool = False):
        self.secrets, self.fail, self.calls = secrets, fail, []

    def list_namespaced_secret(self, namespace: str, label_selector: str) -> Any:
        self.calls.append((namespace, label_selector))
        if self.fail:
            raise OSError("connection refused")
        items = [
            SimpleNamespace(
                metadata=SimpleNamespace(name=n, labels=labels),
                data={"kubeconfig": base64.b64encode(content).decode()},
            )
            for n, labels, content in self.secrets
        ]
        return SimpleNamespace(items=items)


def test_secrets_named_by_label_else_secret_name(tmp_path: Path) -> None:
    content = yaml.safe_dump(kubeconfig()).encode()
    api = FakeCoreApi(
        [
            ("s1", {"fleetscope.io/cluster-name": "edge-7"}, content),
            ("plain", {}, content),
            ("dup", {"fleetscope.io/cluster-name": "fromdir"}, content),
        ]
    )
    write(tmp_path, "fromdir.yaml", kubeconfig("https://dir:1"))
    settings = Settings(clusters_dir=str(tmp_path), cluster_secrets=True)
    configs = registry.load_cluster_configs(settings, core_api=api)
    assert sorted(configs) == ["edge-7", "fromdir", "plain"]
    assert configs["fromdir"].source == "dir"
    assert configs["edge-7"].origin == "secret fleetscope/s1"
    assert api.calls == [("fleetscope", "fleetscope.io/cluster=true")]


def test_unreachable_management_cluster_is_temporary() -> None:
    with pytest.raises(ClusterUnreachable):
        registry.load_secrets(FakeCoreApi([], fail=True), "fleetscope")


def test_reconcile_adds_updates_and_removes(r: redis.Redis, tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", kubeconfig("https://user:pw@a:6443"))
    write(tmp_path, "b.yaml", kubeconfig())
    result = registry.reconcile(r, registry.load_dir(str(tmp_path)))
    assert (result.added, result.removed) == (["a", "b"], [])
    assert r.get(keys.VERSION) == "1"
    assert r.hget(keys.sync("a"), "state") == "pending"
    assert '"server": "https://a:6443"' in r.hget(keys.CLUSTERS, "a")

    # unchanged: nothing written, version kept
    assert not registry.reconcile(r, registry.load_dir(str(tmp_path))).changed
    assert r.get(keys.VERSION) == "1"

    store.replace_rows(r, "b", ["ns\x00Kustomization\x00x\x00h\x00\x00\x00\x00\x00v1\x00"])
    r.hset(keys.rbac("b"), "g:team", "{}")
    (tmp_path / "b.yaml").unlink()
    write(tmp_path, "a.yaml", kubeconfig("https://a2:6443"))
    result = registry.reconcile(r, registry.load_dir(str(tmp_path)))
    assert (result.added, result.removed, result.updated) == ([], ["b"], ["a"])
    assert r.hkeys(keys.CLUSTERS) == ["a"]
    assert r.exists(*keys.cluster_keys("b")) == 0
    assert r.get(keys.VERSION) == "2"


def test_no_credentials_in_redis(r: redis.Redis, tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", kubeconfig())
    registry.reconcile(r, registry.load_dir(str(tmp_path)))
    dump = " ".join(str(r.hgetall(k)) for k in r.keys("*") if r.type(k) == "hash")
    assert "a.yaml" in dump and TOKEN not in dump
