"""Settings: parsing from the environment, fail-fast errors, secrets read from files, unknown
variables reported by name only, and docs that list every field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.settings import FILE_SUFFIX, SECRET_SETTINGS, Settings, env_name, setting_fields
from tests.support.paths import REPO

DOCS = REPO / "docs" / "configuration.md"


def test_defaults_without_environment() -> None:
    s = Settings.from_env({})
    assert s.redis_url == "redis://127.0.0.1:6379/0"
    assert s.auth_mode == "oidc"
    assert s.rbac_max_age_s == 300.0


def test_parses_each_type() -> None:
    s = Settings.from_env(
        {
            "FLEETSCOPE_REDIS_URL": "redis://example:6380/2",
            "FLEETSCOPE_SYNC_INTERVAL_S": "15",
            "FLEETSCOPE_QUERY_WORKERS": "3",
            "FLEETSCOPE_CLUSTER_SECRETS": "yes",
            "FLEETSCOPE_TRUSTED_PROXY_CIDRS": "127.0.0.1/32, 10.0.0.0/8",
            "FLEETSCOPE_AUTH_MODE": "header",
            "HOME": "/ignored",
        }
    )
    assert s.redis_url == "redis://example:6380/2"
    assert s.sync_interval_s == 15.0
    assert s.query_workers == 3
    assert s.cluster_secrets is True
    assert s.trusted_proxy_cidrs == ("127.0.0.1/32", "10.0.0.0/8")
    assert s.auth_mode == "header"


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("FLEETSCOPE_SYNC_INTERVAL_S", "soon", "FLEETSCOPE_SYNC_INTERVAL_S must be a number"),
        ("FLEETSCOPE_SYNC_INTERVAL_S", "-1", "FLEETSCOPE_SYNC_INTERVAL_S must be a positive"),
        ("FLEETSCOPE_AUTH_MODE", "magic", "FLEETSCOPE_AUTH_MODE must be one of"),
        ("FLEETSCOPE_CLUSTER_SECRETS", "maybe", "FLEETSCOPE_CLUSTER_SECRETS must be true or false"),
        ("FLEETSCOPE_TRUSTED_PROXY_CIDRS", "10.0.0.0/99", "is not a CIDR"),
        ("FLEETSCOPE_REDIS_URL", "localhost:6379", "must start with redis://"),
        ("FLEETSCOPE_LOG_LEVEL", "verbose", "FLEETSCOPE_LOG_LEVEL must be one of DEBUG, INFO"),
        ("FLEETSCOPE_ACCESS_LOG", "yes", "FLEETSCOPE_ACCESS_LOG must be one of off, text, json"),
        ("FLEETSCOPE_QUERY_MEMO_MIB", "-5", "FLEETSCOPE_QUERY_MEMO_MIB must be"),
        ("FLEETSCOPE_QUERY_MEMO_MIB", "lots", "FLEETSCOPE_QUERY_MEMO_MIB must be"),
    ],
)
def test_bad_values_fail_fast_naming_the_variable(var: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        Settings.from_env({var: value})


def test_unknown_variables_are_reported_not_fatal() -> None:
    s = Settings.from_env({"FLEETSCOPE_REDIS_ULR": "x"})
    assert s.extra == {"FLEETSCOPE_REDIS_ULR": "x"}


def test_log_level_any_case() -> None:
    assert Settings.from_env({"FLEETSCOPE_LOG_LEVEL": "debug"}).log_level == "debug"
    with pytest.raises(ConfigError, match="FLEETSCOPE_LOG_LEVEL"):
        Settings(log_level="LOUD").validate()


def test_secrets_can_be_read_from_files(tmp_path: Path) -> None:
    url, key = tmp_path / "url", tmp_path / "key"
    url.write_text("redis://:s3cret@redis:6379/0\n")  # as `echo` or an editor leaves it
    key.write_text("k3y")
    s = Settings.from_env(
        {"FLEETSCOPE_REDIS_URL_FILE": str(url), "FLEETSCOPE_CONTINUE_TOKEN_KEY_FILE": str(key)}
    )
    assert s.redis_url == "redis://:s3cret@redis:6379/0"
    assert s.continue_token_key == "k3y"
    assert s.extra == {}


def test_a_secret_file_is_validated_and_never_quoted(tmp_path: Path) -> None:
    bad = tmp_path / "url"
    bad.write_text("s3cret-but-not-a-url")
    with pytest.raises(ConfigError, match="FLEETSCOPE_REDIS_URL must start") as e:
        Settings.from_env({"FLEETSCOPE_REDIS_URL_FILE": str(bad)})
    assert "s3cret" not in str(e.value)
    with pytest.raises(ConfigError, match=r"FLEETSCOPE_REDIS_URL_FILE: cannot read '/nope'"):
        Settings.from_env({"FLEETSCOPE_REDIS_URL_FILE": "/nope"})


def test_a_secret_set_twice_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "url").write_text("redis://a:6379/0")
    env = {
        "FLEETSCOPE_REDIS_URL": "redis://b:6379/0",
        "FLEETSCOPE_REDIS_URL_FILE": str(tmp_path / "url"),
    }
    with pytest.raises(ConfigError, match="FLEETSCOPE_REDIS_URL or FLEETSCOPE_REDIS_URL_FILE"):
        Settings.from_env(env)


def test_only_secrets_have_file_variants() -> None:
    s = Settings.from_env({"FLEETSCOPE_SYNC_INTERVAL_S_FILE": "/x"})
    assert s.extra == {"FLEETSCOPE_SYNC_INTERVAL_S_FILE": "/x"}


def test_unknown_variables_are_logged_by_name_only(caplog: pytest.LogCaptureFixture) -> None:
    from common import logs

    s = Settings.from_env({"FLEETSCOPE_REDIS_PASWORD": "hunter2"})
    logs.configure(s)
    assert "FLEETSCOPE_REDIS_PASWORD" in caplog.text and "hunter2" not in caplog.text


def test_configuration_doc_lists_exactly_the_settings() -> None:
    documented = set(re.findall(r"`(FLEETSCOPE_[A-Z0-9_]+)`", DOCS.read_text()))
    files = {env_name(name) + FILE_SUFFIX for name in SECRET_SETTINGS}
    assert documented == {env_name(f.name) for f in setting_fields()} | files


def test_configuration_doc_table_is_current() -> None:
    from common.settings_doc import render

    assert DOCS.read_text() == render(DOCS.read_text()), "run: python -m common.settings_doc"
