"""FLEETSCOPE_REDIS_URL's topologies and FLEETSCOPE_BROKER_URL: what is accepted, what each
part means, and start-up errors that say what is wrong without repeating a password."""

from __future__ import annotations

import pytest

from common.errors import ConfigError
from common.redis_urls import ClusterURL, SentinelURL, check, parse_cluster, parse_sentinel, redact
from common.settings import Settings


def test_a_sentinel_url_names_its_sentinels_master_and_database() -> None:
    u = parse_sentinel(
        "redis+sentinel://app:p%40ss@s1:26379,10.0.0.2:26380,[::1]:26381/fleet/3"
        "?sentinel_password=sp"
    )
    assert u == SentinelURL(
        (("s1", 26379), ("10.0.0.2", 26380), ("::1", 26381)),
        "fleet",
        3,
        "app",
        "p@ss",
        False,
        "sp",
    )
    tls = parse_sentinel("rediss+sentinel://:pw@s1:26379/fleet?ssl_cert_reqs=none")
    assert (tls.tls, tls.ssl_cert_reqs, tls.db, tls.username, tls.password) == (
        True,
        "none",
        0,
        None,
        "pw",
    )
    assert "pw" not in repr(tls) and "sp" not in repr(parse_sentinel("redis+sentinel://h:1/m"))


@pytest.mark.parametrize(
    "url, says",
    [
        ("redis+sentinel://:secret@h:26379", "/MASTER_NAME"),
        ("redis+sentinel://:secret@h:26379/", "/MASTER_NAME"),
        ("redis+sentinel://:secret@h:26379/m/x", "database 'x'"),
        ("redis+sentinel://:secret@h:26379/m/0/extra", "/MASTER_NAME"),
        ("redis+sentinel://:secret@h/m", "'h' is not a Sentinel HOST:PORT"),
        ("redis+sentinel://:secret@h:0/m", "not a Sentinel HOST:PORT"),
        ("redis+sentinel://:secret@h:1,/m", "'' is not a Sentinel"),
        ("redis+sentinel://:secret@h:1/m?ssl=1", "unknown option(s) ssl"),
        ("redis+sentinel://:secret@h:1/m?ssl_cert_reqs=maybe", "ssl_cert_reqs must be"),
        ("redis+cluster://:secret@h:7000,h", "'h' is not a cluster node HOST:PORT"),
        ("redis+cluster://:secret@h:7000/1", "database 0 only"),
        ("redis+cluster://:secret@h:7000?sentinel_password=x", "unknown option(s)"),
        ("http://:secret@h:6379", "must start with"),
    ],
)
def test_bad_urls_say_what_is_wrong_without_the_password(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        check(url)
    assert says in str(e.value) and "secret" not in str(e.value)


def test_a_cluster_url_names_its_seed_nodes() -> None:
    u = parse_cluster("rediss+cluster://app:p%40ss@n1:7000,[::1]:7001/0?ssl_cert_reqs=none")
    assert u == ClusterURL((("n1", 7000), ("::1", 7001)), "app", "p@ss", True, "none")
    assert "p@ss" not in repr(u)
    assert check("redis+cluster://n1:7000") == "cluster"
    assert parse_cluster("redis+cluster://n1:7000").tls is False


def test_redact_hides_every_password() -> None:
    assert redact("redis://u:pw@h:6379/0") == "redis://u:***@h:6379/0"
    assert redact("redis+sentinel://:pw@a:1,b:2/m?sentinel_password=sp&x=1") == (
        "redis+sentinel://:***@a:1,b:2/m?sentinel_password=***&x=1"
    )
    assert redact("redis://h:6379/0") == "redis://h:6379/0"


def test_the_broker_defaults_to_a_standalone_index_and_is_required_otherwise() -> None:
    assert Settings(redis_url="redis://h:1/0").broker() == ("redis://h:1/0", {})
    sentinel = "redis+sentinel://s1:26379,s2:26379/fleet?sentinel_password=sp"
    Settings(redis_url=sentinel).validate()  # the query service and watcher need no broker
    with pytest.raises(ConfigError, match="FLEETSCOPE_BROKER_URL is required with a sentinel"):
        Settings(redis_url=sentinel).broker()
    cluster = "redis+cluster://n1:7000,n2:7000"
    with pytest.raises(ConfigError, match=r"required with a cluster index.*does not support"):
        Settings(redis_url=cluster).broker()
    assert Settings(redis_url=cluster, broker_url="redis://b:1/0").broker() == ("redis://b:1/0", {})
    broker = "sentinel://s1:26379;sentinel://s2:26379"
    s = Settings(redis_url=sentinel, broker_url=broker)
    s.validate()
    assert s.broker() == (broker, {"master_name": "fleet", "sentinel_kwargs": {"password": "sp"}})
    with pytest.raises(ConfigError, match="takes its master name from FLEETSCOPE_REDIS_URL"):
        Settings(redis_url="redis://h:1/0", broker_url=broker).validate()
    other = Settings(redis_url="redis://h:1/0", broker_url="redis://b:2/1")
    assert other.broker() == ("redis://b:2/1", {})


def test_the_broker_url_is_a_secret_that_may_come_from_a_file(tmp_path) -> None:
    path = tmp_path / "broker"
    path.write_text("redis://:pw@b:6379/1\n")
    env = {"FLEETSCOPE_BROKER_URL_FILE": str(path)}
    assert Settings.from_env(env).broker_url == "redis://:pw@b:6379/1"
