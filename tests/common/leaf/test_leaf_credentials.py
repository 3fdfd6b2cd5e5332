"""common.leaf.credentials (the allow-list of kubeconfig keys from the management cluster),
common.leaf.exec_plugin (the one runner of exec plugins: protocol, output cap, failures), and
the settings that choose registry namespaces and allowed plugins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.errors import ClusterError, ConfigError
from common.leaf import claims, credentials, exec_plugin
from common.leaf.client import ClusterConfig, bearer_token
from common.settings import Settings
from tests.support.registry_attacks import EXEC_API, credential, kubeconfig, script

INLINE = kubeconfig(
    "https://leaf:6443",
    {"token": "t", "client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"},
    {"certificate-authority-data": "Q0E=", "tls-server-name": "leaf", "proxy-url": "http://p:3128"},
)


def test_inline_material_passes() -> None:
    assert credentials.check(INLINE) == ""
    basic = kubeconfig(
        "https://x", {"username": "u", "password": "p"}, {"insecure-skip-tls-verify": True}
    )
    assert credentials.check(basic) == ""


@pytest.mark.parametrize(
    ("user", "cluster", "field", "why"),
    [
        ({"exec": {"command": "/bin/sh"}}, {}, "users[0].user.exec", "runs a command"),
        ({"auth-provider": {"name": "gcp"}}, {}, "users[0].user.auth-provider", "runs a command"),
        ({"tokenFile": "/t"}, {}, "users[0].user.tokenFile", "names a local file"),
        ({"client-key": "/k"}, {}, "users[0].user.client-key", "names a local file"),
        ({}, {"certificate-authority": "/ca"}, "clusters[0].cluster.certificate-authority", "file"),
        ({"as": "system:admin"}, {}, "users[0].user.as", "not an inline credential"),
        ({"token\x1b[2K": "x"}, {}, "users[0].user.token?[2K", "not an inline credential"),
    ],
)
def test_anything_else_is_refused_by_name(user: dict, cluster: dict, field: str, why: str) -> None:
    reason = credentials.check(kubeconfig("https://x", user, cluster))
    assert f"kubeconfig field {field} is refused" in reason and why in reason
    assert "\x1b" not in reason


def test_exec_passes_only_when_its_command_is_allowed() -> None:
    config = kubeconfig("https://x", {"exec": {"command": "/usr/bin/aws", "apiVersion": EXEC_API}})
    assert "runs a command" in credentials.check(config)
    assert "FLEETSCOPE_EXEC_COMMANDS" in credentials.check(config, ("/usr/bin/other",))
    assert credentials.check(config, ("/usr/bin/aws",)) == ""
    config["users"][0]["user"]["exec"]["provideClusterInfo"] = True
    assert "exec.provideClusterInfo" in credentials.check(config, ("/usr/bin/aws",))


def test_the_plugin_protocol_and_its_failures(tmp_path: Path) -> None:
    ok = script(tmp_path / "ok.sh", f"echo {credential('tok')}\n")
    assert exec_plugin.run({"command": ok, "apiVersion": EXEC_API}, "c", 10).token == "tok"
    cases = {
        "exit.sh": ("echo oops >&2; exit 3\n", "exited with status 3"),
        "junk.sh": ("echo not-json\n", "wrote no JSON"),
        "big.sh": ("head -c 3000000 /dev/zero\n", "more than 1048576 bytes"),
    }
    for name, (body, error) in cases.items():
        path = script(tmp_path / name, body)
        with pytest.raises(ClusterError, match=error) as info:
            exec_plugin.run({"command": path, "apiVersion": EXEC_API}, "c", 10)
        assert "oops" not in str(info.value)  # stderr is never shown
    with pytest.raises(ClusterError, match="not supported"):
        exec_plugin.run({"command": ok, "apiVersion": "v9"}, "c", 10)
    env = exec_plugin.environment({"env": [{"name": "FLEETSCOPE_X", "value": "1"}]}, EXEC_API)
    assert "FLEETSCOPE_X" not in env and "KUBERNETES_EXEC_INFO" in env


def test_registry_namespace_settings() -> None:
    ok = Settings.from_env({"FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE": "fleet, fleet-eu"})
    assert claims.source_namespaces(ok.gitopsclusters_namespace, "X", "g") == [
        "fleet",
        "fleet-eu",
    ]
    star = Settings.from_env({"FLEETSCOPE_CAPI_CLUSTERS_NAMESPACE": "*"})
    assert claims.source_namespaces(star.capi_clusters_namespace, "X", "capi") == [""]
    with pytest.raises(ClusterError, match="names no namespace"):
        claims.source_namespaces(Settings().gitopsclusters_namespace, "X", "g")
    for env in (
        {"FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE": "*,fleet"},
        {"FLEETSCOPE_ARGOCD_CLUSTERS_NAMESPACE": "Argo CD"},
        {"FLEETSCOPE_CLUSTER_NAME_LABEL_NAMESPACES": "fleet,../x"},
        {"FLEETSCOPE_EXEC_COMMANDS": "aws"},
    ):
        with pytest.raises(ConfigError):
            Settings.from_env(env)
    assert Settings.from_env({"FLEETSCOPE_EXEC_COMMANDS": "/usr/bin/aws"}).exec_commands == (
        "/usr/bin/aws",
    )


def test_an_expired_plugin_token_is_fetched_again_by_the_next_request(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    body = (
        f"echo x >> {runs}\nn=$(wc -l < {runs} | tr -d ' ')\n"
        'printf \'{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"t%s",'
        f'"expirationTimestamp":"2000-01-01T00:00:00Z"}}}}\\n\' "{EXEC_API}" "$n"\n'
    )
    plugin = script(tmp_path / "plugin.sh", body)
    config = kubeconfig("https://x", {"exec": {"command": plugin, "apiVersion": EXEC_API}})
    loaded = ClusterConfig("c", "dir", "c.yaml", config).configuration()  # an operator's file
    assert bearer_token(loaded) == "Bearer t2"  # expired: the request ran it again
    assert bearer_token(loaded) == "Bearer t3"
    refused = ClusterConfig("c", "secret", "secret fleetscope/c", config)
    with pytest.raises(ClusterError, match=re.escape("users[0].user.exec")):
        refused.configuration()
    assert len(runs.read_text().splitlines()) == 3  # the Secret's copy never ran
