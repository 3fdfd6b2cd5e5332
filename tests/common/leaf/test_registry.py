"""common.leaf.registry without a management cluster: clusters from a kubeconfig directory, the
naming rule, how claims are settled (conflicts, the same Secret through two sources), Argo CD's
cluster config turned into a kubeconfig, Cluster API readiness, the records and problems in
Redis and who sees them, and `reconcile` mirroring claims into `fs:clusters` on a real
redis-server (adds, updates, removals that delete a cluster's data, conflicts), with no
credentials stored. Sources on a management cluster: test_registry_management.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from common.errors import ClusterError, ConfigError
from common.index import keys, syncstatus
from common.index.registry_record import Problem, Record, read_problems, registry_view
from common.index.write import store
from common.leaf import claims, registry
from common.leaf.claims import Claim, Claims
from common.leaf.client import ClusterConfig, bearer_token
from common.leaf.sources import argocd as registry_argocd
from common.leaf.sources import capi as registry_capi

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
    dump = " ".join(str(r.hgetall(k)) for k in r.scan_iter("*") if r.type(k) == "hash")
    assert "a.yaml" in dump and TOKEN not in dump


def _claim(name: str, source: str, origin: str, credentials: str = "", **kw: Any) -> Claim:
    config = ClusterConfig(name, source, origin, kubeconfig())
    return Claim(name, source, origin, config, credentials=credentials, **kw)


def test_names_follow_the_label_else_the_rule_and_must_be_valid() -> None:
    assert claims.qualified("fleet", "prod-eu") == "fleet.prod-eu"
    meta = {"name": "x", "namespace": "fleet", "labels": {"fleetscope.io/cluster-name": "edge-7"}}
    # the label counts only in the namespaces FLEETSCOPE_CLUSTER_NAME_LABEL_NAMESPACES lists
    assert claims.claim_name(meta, "fleet.x", "capi", "capi cluster fleet/x") == "fleet.x"
    assert claims.claim_name(meta, "fleet.x", "capi", "o", ("other",)) == "fleet.x"
    assert claims.claim_name(meta, "fleet.x", "capi", "o", ("other", "fleet")) == "edge-7"
    assert claims.claim_name(meta, "fleet.x", "capi", "o", "*") == "edge-7"
    assert claims.claim_name({"name": "x"}, "fleet.x", "capi", "o") == "fleet.x"
    long = claims.claim_name({}, claims.qualified("n" * 40, "c" * 40), "capi", "capi cluster n/c")
    assert isinstance(long, Problem) and long.type == "invalid-name"
    assert "fleetscope.io/cluster-name" in long.message and long.origins == ("capi cluster n/c",)
    upper = claims.claim_name({}, "Prod EU", "argocd", "argocd secret argocd/x")
    assert isinstance(upper, Problem)


def test_settle_one_claim_per_name() -> None:
    a = _claim("prod", "dir", "/k/prod.yaml")
    b = _claim("prod", "argocd", "argocd secret argocd/prod")
    c = _claim("solo", "capi", "capi cluster fleet/solo")
    settled, problems = registry.settle([a, b, c], {})
    assert sorted(settled) == ["solo"]  # nobody had `prod`: nobody gets it
    assert [p.type for p in problems] == ["conflict"]
    assert problems[0].cluster == "prod"
    assert problems[0].origins == ("/k/prod.yaml", "argocd secret argocd/prod")
    assert "none is registered" in problems[0].message

    registered = {"prod": Record(source="dir", origin="/k/prod.yaml")}
    settled, problems = registry.settle([b, a, c], registered)
    # refused for both: the registered one stays registered (its data kept), not ready
    assert settled["prod"].origin == "/k/prod.yaml" and not settled["prod"].ready
    assert settled["prod"].config is None
    assert "refused for all of them" in settled["prod"].conflict
    assert settled["prod"].record().conflict == settled["prod"].conflict
    assert len(problems) == 1


def test_settle_the_same_secret_through_two_sources_is_one_cluster() -> None:
    ref = "secret fleet/prod-us-kubeconfig"
    gc = _claim("fleet.prod-us", "gitopscluster", "gitopscluster fleet/prod-us", ref)
    capi = _claim("fleet.prod-us", "capi", "capi cluster fleet/prod-us", ref)
    settled, problems = registry.settle([gc, capi], {})
    assert settled["fleet.prod-us"].source == "gitopscluster" and problems == []


def test_reconcile_reports_conflicts_once_and_keeps_the_registered_cluster(
    r: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "prod.yaml", kubeconfig())
    first = registry.reconcile(r, registry.load_dir(str(tmp_path)))
    assert first.added == ["prod"]
    dup = _claim("prod", "argocd", "argocd secret argocd/prod")
    claims = Claims([*Claims.of(registry.load_dir(str(tmp_path))).claims, dup])
    caplog.set_level(logging.WARNING)
    result = registry.reconcile(r, claims)
    assert result.updated == ["prod"]  # its record now names the conflict
    record = Record.decode(r.hget(keys.CLUSTERS, "prod"))
    assert record.source == "dir" and "argocd secret argocd/prod" in record.conflict
    assert not record.ready  # refused until an operator resolves it
    assert [p.cluster for p in read_problems(r)] == ["prod"]
    assert "cluster name prod is claimed by" in caplog.text
    caplog.clear()
    registry.reconcile(r, claims)
    assert "claimed by" not in caplog.text  # logged when it appears, not every round


def test_a_source_that_cannot_be_read_keeps_its_clusters(r: redis.Redis) -> None:
    claim = _claim("edge", "argocd", "argocd secret argocd/edge")
    assert registry.reconcile(r, Claims([claim])).added == ["edge"]
    failed = Claims(
        [], [Problem("source-error", "argocd: unreachable", source="argocd")], {"argocd"}
    )
    assert not registry.reconcile(r, failed).changed
    assert r.hexists(keys.CLUSTERS, "edge")
    assert read_problems(r)[0].type == "source-error"
    assert registry.reconcile(r, Claims()).removed == ["edge"]


def test_not_ready_clusters_are_registered_with_why(r: redis.Redis) -> None:
    ready = _claim("a", "capi", "capi cluster fleet/a")
    waiting = Claim("b", "capi", "capi cluster fleet/b", None, "control plane not ready: x",
                    server="https://user:pw@b.example:6443")  # fmt: skip
    result = registry.reconcile(r, Claims([ready, waiting]))
    assert result.added == ["a", "b"] and result.not_ready == ["b"] and result.to_sync == ["a"]
    record = Record.decode(r.hget(keys.CLUSTERS, "b"))
    assert (record.ready, record.reason, record.server) == (
        False,
        "control plane not ready: x",
        "https://b.example:6443",
    )
    assert syncstatus.ready_clusters(r) == ["a"]
    syncs = syncstatus.read_all(r, ["a", "b"])
    assert syncs["a"].ready and not syncs["b"].ready


def test_records_leave_defaults_out_and_read_old_ones() -> None:
    assert json.loads(Record("dir", "/k/a.yaml", "https://a").encode()) == {
        "source": "dir",
        "origin": "/k/a.yaml",
        "server": "https://a",
    }
    old = Record.decode('{"source": "secret", "origin": "secret fleetscope/x", "server": "s"}')
    assert old.ready and old.reason == "" and old.revision == ""
    assert Record.decode(b"not json") == Record()
    rec = Record("capi", "o", "", ready=False, reason="r", revision="7")
    assert Record.decode(rec.encode()) == rec


def test_registry_view_names_clusters_only_to_those_who_see_them() -> None:
    problems = [
        Problem("conflict", "cluster name twin is claimed by a and b", cluster="twin"),
        Problem("source-error", "argocd: refused", source="argocd"),
        Problem("conflict", "cluster name mine is claimed by c and d", cluster="mine"),
    ]
    not_ready = {"fleet.b": Record("capi", "o", ready=False, reason="waiting")}
    admin = registry_view(problems, not_ready, {"mine", "other"}, fleet_wide=True)
    assert len(admin["problems"]) == 3 and admin["notReady"][0]["reason"] == "waiting"
    assert admin["hidden"] == 0
    member = registry_view(problems, not_ready, {"mine"}, fleet_wide=False)
    assert [p["cluster"] for p in member["problems"]] == ["mine"]
    assert member["notReady"] == [] and member["hidden"] == 3


def test_fleet_state_counts_not_ready_clusters_apart() -> None:
    waiting = Record("capi", "o", ready=False, reason="r")
    fresh = {"state": "ok", "last_success": "1000", "rbac_synced_at": "1000"}
    ok = syncstatus.parse("a", fresh)
    never = syncstatus.ClusterSync("b", record=waiting)
    state = syncstatus.fleet_state([ok, never], 180, 300, now=1010)
    assert (state.state, state.collected, state.total) == ("degraded", 1, 2)
    assert "1 not ready" in state.message and "stale" not in state.message
    pending = syncstatus.ClusterSync("c")
    state = syncstatus.fleet_state([ok, never, pending], 180, 300, now=1010)
    assert state.state == "rebuilding" and "(1 not ready)" in state.message


# -- Argo CD's cluster config and Cluster API readiness (pure functions) --------------------


def test_argocd_config_becomes_a_kubeconfig_the_client_loads() -> None:
    config = {
        "bearerToken": TOKEN,
        "tlsClientConfig": {"caData": "Q0E=", "serverName": "api.internal", "insecure": False},
    }
    kc, unusable = registry_argocd.argocd_kubeconfig("prod", "https://10.0.0.9:6443", config)
    assert unusable == ""
    cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
    assert cluster == {
        "server": "https://10.0.0.9:6443",
        "certificate-authority-data": "Q0E=",
        "tls-server-name": "api.internal",
    }
    assert user == {"token": TOKEN}
    basic, _ = registry_argocd.argocd_kubeconfig(
        "p", "https://x", {"username": "u", "password": "pw", "tlsClientConfig": {"insecure": True,
                           "caData": "Q0E=", "certData": "Y2VydA==", "keyData": "a2V5"}}
    )  # fmt: skip
    assert basic["clusters"][0]["cluster"] == {
        "server": "https://x",
        "insecure-skip-tls-verify": True,
    }
    assert basic["users"][0]["user"] == {
        "client-certificate-data": "Y2VydA==",
        "client-key-data": "a2V5",
        "username": "u",
        "password": "pw",
    }
    cfg = ClusterConfig("prod", "argocd", "argocd secret argocd/prod", kc)
    assert bearer_token(cfg.configuration()) == f"Bearer {TOKEN}"


def test_argocd_exec_and_aws_need_their_commands_allow_listed(tmp_path: Path, monkeypatch) -> None:
    exec_cfg = {
        "execProviderConfig": {
            "command": "argocd-k8s-auth",
            "args": ["gcp"],
            "env": {"X": "1"},
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "installHint": "install argocd-k8s-auth",
        }
    }
    monkeypatch.setenv("PATH", str(tmp_path))
    kc, unusable = registry_argocd.argocd_kubeconfig("p", "https://x", exec_cfg)
    assert "argocd-k8s-auth" in unusable and "FLEETSCOPE_EXEC_COMMANDS" in unusable
    assert kc["users"][0]["user"]["exec"]["env"] == [{"name": "X", "value": "1"}]
    _, unusable = registry_argocd.argocd_kubeconfig(
        "p", "https://x", {"awsAuthConfig": {"clusterName": "eks-1", "roleARN": "arn:x"}}
    )
    assert "aws CLI" in unusable
    for name in ("argocd-k8s-auth", "aws"):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    # on PATH is not enough: the absolute path must be in the operator's allow-list
    assert (
        "FLEETSCOPE_EXEC_COMMANDS"
        in registry_argocd.argocd_kubeconfig("p", "https://x", exec_cfg)[1]
    )
    allowed = (str(tmp_path / "argocd-k8s-auth"), str(tmp_path / "aws"))
    kc, unusable = registry_argocd.argocd_kubeconfig("p", "https://x", exec_cfg, allowed)
    assert unusable == "" and kc["users"][0]["user"]["exec"]["command"] == allowed[0]
    kc, unusable = registry_argocd.argocd_kubeconfig(
        "p", "https://x", {"awsAuthConfig": {"clusterName": "eks-1", "profile": "ops"}}, allowed
    )
    plugin = kc["users"][0]["user"]["exec"]
    assert unusable == "" and plugin["command"] == allowed[1]
    assert plugin["args"][:4] == ["eks", "get-token", "--cluster-name", "eks-1"]
    assert plugin["env"] == [{"name": "AWS_PROFILE", "value": "ops"}]


@pytest.mark.parametrize(
    ("status", "meta", "ready"),
    [
        ({"controlPlaneReady": True}, {}, True),
        ({"conditions": [{"type": "Ready", "status": "True"}]}, {}, True),
        ({"conditions": [{"type": "ControlPlaneReady", "status": "True"}]}, {}, True),
        ({"initialization": {"controlPlaneInitialized": True}}, {}, True),  # v1beta2
        ({"controlPlaneReady": False, "phase": "Provisioning"}, {}, False),
        ({}, {}, False),
        ({"controlPlaneReady": True}, {"deletionTimestamp": "2026-01-01T00:00:00Z"}, False),
    ],
)
def test_capi_control_plane_readiness(status: dict, meta: dict, ready: bool) -> None:
    reason = registry_capi.control_plane_not_ready({"metadata": meta, "status": status})
    assert (reason == "") is ready
    if not ready:
        assert reason


def test_capi_not_ready_reason_quotes_the_condition() -> None:
    cond = {"type": "ControlPlaneReady", "status": "False", "reason": "WaitingForControlPlane",
            "message": "0 of 3 control plane machines are ready"}  # fmt: skip
    reason = registry_capi.control_plane_not_ready({"status": {"conditions": [cond]}})
    assert reason == (
        "control plane not ready: ControlPlaneReady=False (WaitingForControlPlane): "
        "0 of 3 control plane machines are ready"
    )


def test_read_all_memo_reparses_only_what_changed(r: redis.Redis) -> None:
    registry.reconcile(r, Claims([_claim("a", "capi", "a"), _claim("b", "capi", "b")]))
    r.hset(keys.sync("a"), mapping=syncstatus.encode(state="ok", objects=3))
    r.hset(keys.sync("b"), mapping=syncstatus.encode(state="ok", objects=4))
    memo: dict[str, Any] = {}
    first = syncstatus.read_all(r, ["a", "b"], memo)
    r.hset(keys.sync("b"), mapping=syncstatus.encode(state="error", last_error="down"))
    second = syncstatus.read_all(r, ["a", "b"], memo)
    assert second["a"] is first["a"]  # unchanged: the parse of the first read
    assert (second["b"].state, second["b"].last_error) == ("error", "down")
    assert second == syncstatus.read_all(r, ["a", "b"])  # the same as a read without a memo
    registry.reconcile(r, Claims([_claim("a", "capi", "a")]))
    assert syncstatus.read_all(r, ["a"], memo).keys() == memo.keys() == {"a"}


def test_a_kubeconfig_is_parsed_as_the_safe_loader_parses_it() -> None:
    """Kubeconfigs are read with libyaml (re-read every registry interval): the same mapping as
    PyYAML's pure safe loader, tags refused, anything not a mapping an empty config."""
    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "clusters": [{"name": "c", "cluster": {"server": "https://h:6443", "x": "0777"}}],
            "users": [{"name": "u", "user": {"token": "t", "n": 1.5, "on": True, "k": None}}],
            "current-context": "c",
        }
    ).encode()
    assert claims.parse_kubeconfig(text, "t") == yaml.safe_load(text)
    assert claims.parse_kubeconfig(b"a: !!python/object:os.system x", "t") == {}
    assert claims.parse_kubeconfig(b"- a list", "t") == {}
    assert claims.parse_kubeconfig(b"{unclosed", "t") == {}
