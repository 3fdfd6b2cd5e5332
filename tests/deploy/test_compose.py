"""docker-compose.yml: `docker-compose config` accepts it, and the stack it describes starts in
order (health-gated), publishes the API on loopback only, sets only known settings, runs Redis
with a password generated at first start, and takes its images from variables (Docker Hub's by default, local ones offline). `.ci/docker-stack` runs
it for real.
"""

from __future__ import annotations

from typing import Any

import pytest

from common.settings import SECRET_SETTINGS, Settings, env_name, setting_fields
from tests.deploy.render import compose_config

KNOWN_ENV = {env_name(f.name) for f in setting_fields()}
SECRET_FILES = {env_name(name) + "_FILE" for name in SECRET_SETTINGS}


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return dict(compose_config()["services"])


def test_stack_services_and_their_images(services: dict[str, Any]) -> None:
    assert set(services) == {"secrets", "redis", "kubesim", "query", "worker", "beat", "watcher"}
    images = {s["image"] for name, s in services.items() if name not in ("redis", "secrets")}
    assert images == {"fleetscope:local"}
    assert services["redis"]["image"] == services["secrets"]["image"] == "redis:7.2-alpine"
    for name, service in services.items():
        if name not in ("redis", "secrets"):
            assert service["build"]["args"] == {"PYTHON_IMAGE": "python:3.11-slim-bookworm"}


def test_images_can_be_local_ones() -> None:
    """What .ci/docker-stack sets when no registry is reachable."""
    config = compose_config(
        {
            "FLEETSCOPE_IMAGE": "fleetscope:ci",
            "FLEETSCOPE_PYTHON_IMAGE": "fleetscope-local/python:3.11-slim-bookworm",
            "FLEETSCOPE_REDIS_IMAGE": "fleetscope-local/redis:7",
        }
    )
    services = config["services"]
    assert services["redis"]["image"] == services["secrets"]["image"] == "fleetscope-local/redis:7"
    for name in ("kubesim", "query", "worker", "beat", "watcher"):
        assert services[name]["image"] == "fleetscope:ci"
        assert services[name]["build"]["args"]["PYTHON_IMAGE"].startswith("fleetscope-local/")


def test_commands_follow_the_documented_entrypoints(services: dict[str, Any]) -> None:
    assert services["query"]["command"] == ["fleetscope", "serve", "--bind", "0.0.0.0:8080"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "collector", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "collector", "beat"]
    assert services["watcher"]["command"][:2] == ["fleetscope", "watch"]
    kubesim = services["kubesim"]["command"]
    assert kubesim[:2] == ["fleetscope", "kubesim"]
    flags = dict(zip(kubesim[2::2], kubesim[3::2], strict=True))
    assert flags == {
        "--preset": "S",
        "--host": "0.0.0.0",
        "--advertise-host": "kubesim",
        "--port": "7000",
        "--kubeconfig-dir": "/kubesim/clusters",
    }


def test_start_order_is_gated_by_health_checks(services: dict[str, Any]) -> None:
    for name in ("redis", "kubesim", "query", "worker", "watcher"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    for name in ("query", "worker", "watcher"):
        deps = services[name]["depends_on"]
        assert deps["redis"]["condition"] == "service_healthy", name
        assert deps["kubesim"]["condition"] == "service_healthy", name
    assert services["beat"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_api_is_published_on_loopback_only(services: dict[str, Any]) -> None:
    ports = services["query"]["ports"]
    assert len(ports) == 1
    port = ports[0]
    published = port if isinstance(port, str) else f"{port['host_ip']}:{port['published']}"
    assert published.startswith("127.0.0.1:"), port
    for name, service in services.items():
        if name != "query":
            assert not service.get("ports"), name


def test_settings_are_known_and_valid(services: dict[str, Any]) -> None:
    for name, service in services.items():
        env = {k: v for k, v in (service.get("environment") or {}).items()}
        fleetscope_env = {k: str(v) for k, v in env.items() if k.startswith("FLEETSCOPE_")}
        known = KNOWN_ENV | SECRET_FILES
        assert set(fleetscope_env) <= known, (name, set(fleetscope_env) - known)
        files = {k: v for k, v in fleetscope_env.items() if k in SECRET_FILES}
        # raises ConfigError on a bad value (the secret files exist only in the stack)
        Settings.from_env({k: v for k, v in fleetscope_env.items() if k not in files})
    query_env = services["query"]["environment"]
    assert query_env["FLEETSCOPE_AUTH_MODE"] == "header"
    assert query_env["FLEETSCOPE_CLUSTERS_DIR"] == "/kubesim/clusters"
    assert "FLEETSCOPE_REDIS_URL" not in query_env


def test_redis_requires_a_password_generated_at_first_start(services: dict[str, Any]) -> None:
    """The `secrets` service writes Redis' `requirepass` and fleetscope's Redis URL into a
    volume once; Redis starts from that config; the others read the URL from the file."""
    init = " ".join(services["secrets"]["command"])
    assert "/dev/urandom" in init and "requirepass" in init and "redis://:" in init
    assert "[ -s redis-password ] && exit 0" in init  # kept across restarts
    redis = services["redis"]
    assert redis["command"][:2] == ["redis-server", "/run/fleetscope-secrets/redis.conf"]
    assert redis["depends_on"]["secrets"]["condition"] == "service_completed_successfully"
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])
    for name in ("query", "worker", "beat", "watcher"):
        env = services[name]["environment"]
        assert env["FLEETSCOPE_REDIS_URL_FILE"] == "/run/fleetscope-secrets/redis-url", name
        assert "FLEETSCOPE_REDIS_URL" not in env, name


def test_kubeconfigs_are_shared_read_only_with_query_and_worker(services: dict[str, Any]) -> None:
    def mounts(name: str) -> dict[str, bool]:
        found = {}
        for v in services[name].get("volumes", []):
            if isinstance(v, str):  # docker-compose v1: "source:target:mode"
                source, target, mode = [*v.split(":"), "rw"][:3]
                v = {"source": source, "target": target, "read_only": mode == "ro"}
            if v["source"] == "secrets":
                continue
            assert v["source"] == "kubesim", (name, v)
            found[v["target"]] = bool(v.get("read_only"))
        return found

    assert mounts("kubesim") == {"/kubesim": False}
    assert mounts("query")["/kubesim"] is True
    assert mounts("worker")["/kubesim"] is True
    assert mounts("watcher")["/kubesim"] is True


def test_anonymous_mode_and_subnet_are_explicit_choices() -> None:
    config = compose_config(
        {"FLEETSCOPE_AUTH_MODE": "anonymous", "FLEETSCOPE_COMPOSE_SUBNET": "10.99.0.0/24"}
    )
    query_env = config["services"]["query"]["environment"]
    assert query_env["FLEETSCOPE_AUTH_MODE"] == "anonymous"
    assert query_env["FLEETSCOPE_TRUSTED_PROXY_CIDRS"] == "10.99.0.0/24"
    assert config["networks"]["fleetscope"]["ipam"]["config"] == [{"subnet": "10.99.0.0/24"}]


def test_watcher_health_is_its_heartbeat_file(services: dict[str, Any]) -> None:
    """The check reads the file the watcher's loop touches (`--heartbeat-file`), with a limit
    well above the round interval (lease TTL / 4) and a start period for the first round."""
    watcher = services["watcher"]
    command = watcher["command"]
    path = command[command.index("--heartbeat-file") + 1]
    check = watcher["healthcheck"]
    assert check["test"][:3] == ["CMD", "python", "-c"]
    assert f"getmtime({path!r})" in check["test"][3]
    limit_s = float(check["test"][3].rsplit(">", 1)[1].strip(" )"))
    assert Settings().watch_lease_ttl_s / 4 * 3 < limit_s
    assert check["start_period"]
