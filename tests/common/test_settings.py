"""Settings: parsing from the environment, fail-fast errors, and docs that list every field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.settings import Settings, env_name, setting_fields

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


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
    ],
)
def test_bad_values_fail_fast_naming_the_variable(var: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        Settings.from_env({var: value})


def test_unknown_variables_are_reported_not_fatal() -> None:
    s = Settings.from_env({"FLEETSCOPE_REDIS_ULR": "x"})
    assert s.extra == {"FLEETSCOPE_REDIS_ULR": "x"}


def test_configuration_doc_lists_exactly_the_settings() -> None:
    documented = set(re.findall(r"`(FLEETSCOPE_[A-Z0-9_]+)`", DOCS.read_text()))
    assert documented == {env_name(f.name) for f in setting_fields()}


def test_configuration_doc_table_is_current() -> None:
    from common.settings_doc import render

    assert DOCS.read_text() == render(DOCS.read_text()), "run: python -m common.settings_doc"
