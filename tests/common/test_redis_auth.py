"""The bundled Redis's password Secret (common.redis_auth, the Redis pod's init container)
against kubesim as the management cluster over HTTP: the first start creates a Secret with a
random password and the URL carrying it, later starts reuse it, Redis' config gets the same
password (owner-readable only), and fleetscope reads the URL through FLEETSCOPE_REDIS_URL_FILE."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import redis_auth
from common.errors import ConfigError
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import mgmtsim

NS = "fleetscope"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = mgmtsim.start(tmp_path, clusters=1)
    yield s
    s.stop()


def settings_as(sim: KubeSim, tmp_path: Path, groups: tuple[str, ...]) -> Settings:
    token = sim.token_for("redis-init", groups, token=f"t-{'-'.join(groups) or 'none'}")
    return mgmtsim.management_settings(sim, tmp_path, token)


def test_first_start_creates_the_secret_and_later_ones_reuse_it(
    sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_as(sim, tmp_path, ("system:masters",))
    monkeypatch.setenv("FLEETSCOPE_MANAGEMENT_KUBECONFIG", settings.management_kubeconfig)
    conf = tmp_path / "redis" / "redis.conf"
    argv = ["--secret", "fleetscope-redis", "--host", "fleetscope-redis:6379"]
    assert redis_auth.main([*argv, "--config", str(conf), "--namespace", NS]) == 0
    api = redis_auth.core_api(settings)
    password = redis_auth.ensure(api, NS, "fleetscope-redis", "fleetscope-redis:6379")
    assert len(password) == 64 and int(password, 16) >= 0
    secret = sim.get(mgmtsim.MGMT, "Secret", NS, "fleetscope-redis")
    assert secret is not None
    url = base64.b64decode(secret["data"]["url"]).decode()
    assert url == f"redis://:{password}@fleetscope-redis:6379/0"
    assert redis_auth.ensure(api, NS, "fleetscope-redis", "fleetscope-redis:6379") == password
    assert conf.read_text() == f"requirepass {password}\n"
    assert conf.stat().st_mode & 0o777 == 0o600
    url_file = tmp_path / "url"
    url_file.write_text(url + "\n")
    assert Settings.from_env({"FLEETSCOPE_REDIS_URL_FILE": str(url_file)}).redis_url == url


def test_without_rights_it_fails_with_a_readable_error(sim: KubeSim, tmp_path: Path) -> None:
    api = redis_auth.core_api(settings_as(sim, tmp_path, ()))
    with pytest.raises(ConfigError, match="fleetscope/fleetscope-redis: 403"):
        redis_auth.ensure(api, NS, "fleetscope-redis", "fleetscope-redis:6379")
