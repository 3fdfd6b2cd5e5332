"""Fixtures for query tests: the app over the seeded fleet (tests/conftest.py) in `header`
mode, so tests pick the caller with X-Remote-User/Group."""

from __future__ import annotations

import pytest

from common.settings import Settings
from tests.support.http import make_app
from tests.support.query_fleet import Seeded


@pytest.fixture
def client(seeded: Seeded, redis_url: str):
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    return make_app(settings).test_client()
