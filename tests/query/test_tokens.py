"""Continue tokens across Redis loss: the signing key comes back after a flush, and tokens of a
replica that made a new key while Redis was empty still verify everywhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.errors import InvalidInput
from common.index import keys
from common.index.read.reader import Cursor, Filters
from query import tokens
from query.tokens import TokenSigner
from tests.support import topology

TOPOLOGIES = ("standalone", "cluster")

CURSOR = Cursor("c1", b"ns\x00Kustomization\x00apps\x00")
FILTERS = Filters(statuses=("unhealthy",))


@pytest.fixture
def rb(redis_url: str) -> Iterator[redis.Redis]:
    client = topology.client(redis_url)
    yield client
    client.close()


@pytest.fixture
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "REASSERT_S", 0.0)
    monkeypatch.setattr(tokens, "RECHECK_S", 0.0)


def test_replicas_share_one_key(rb: redis.Redis) -> None:
    a, b = TokenSigner.shared(rb, ""), TokenSigner.shared(rb, "")
    assert b.decode(a.encode(CURSOR, FILTERS), FILTERS) == CURSOR


def test_key_is_put_back_after_redis_is_flushed(rb: redis.Redis, no_waiting: None) -> None:
    a = TokenSigner.shared(rb, "")
    token = a.encode(CURSOR, FILTERS)
    topology.flushall(rb)
    a.encode(CURSOR, FILTERS)  # signing re-asserts the key (every REASSERT_S)
    late = TokenSigner.shared(rb, "")  # a replica started after the loss
    assert late.decode(token, FILTERS) == CURSOR


def test_a_new_key_made_while_redis_was_empty_is_adopted(rb: redis.Redis, no_waiting: None) -> None:
    a = TokenSigner.shared(rb, "")
    old_token = a.encode(CURSOR, FILTERS)
    topology.flushall(rb)
    b = TokenSigner.shared(rb, "")  # got in first: Redis now holds b's new key
    assert rb.get(keys.TOKEN_KEY) == b.keys[0] != a.keys[0]
    assert a.decode(b.encode(CURSOR, FILTERS), FILTERS) == CURSOR  # a re-reads Redis's key
    assert a.decode(old_token, FILTERS) == CURSOR  # and still accepts its own earlier tokens
    assert b.decode(a.encode(CURSOR, FILTERS), FILTERS) == CURSOR  # a now signs with b's key


def test_tampered_and_foreign_tokens_are_refused(rb: redis.Redis, no_waiting: None) -> None:
    a = TokenSigner.shared(rb, "")
    token = a.encode(CURSOR, FILTERS)
    body, mac = token.split(".")
    with pytest.raises(InvalidInput, match="continue"):
        a.decode(body + "." + mac[::-1], FILTERS)
    with pytest.raises(InvalidInput, match="continue"):
        TokenSigner(b"another service's key").decode(token, FILTERS)
    with pytest.raises(InvalidInput, match="other filters"):
        a.decode(token, Filters())


def test_a_configured_key_never_touches_redis(rb: redis.Redis) -> None:
    signer = TokenSigner.shared(rb, "configured-secret")
    assert signer.decode(signer.encode(CURSOR, FILTERS), FILTERS) == CURSOR
    assert rb.exists(keys.TOKEN_KEY) == 0
