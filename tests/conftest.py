"""Shared fixtures: one real redis-server per test session, a clean database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.redis_server import RedisServer, start_redis_server
from common.settings import Settings


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis_server()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """URL of a flushed database on the session's private redis-server."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings(redis_url=redis_url)
