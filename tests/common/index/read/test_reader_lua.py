"""The reader's Lua scripts run directly on members built by `rows.encode` (the one owner of the
member layout): SCAN, COUNT, NAMED and NAMED_COUNT agree with the same filters applied in Python,
for every status, kinds, names and text fields holding the bytes the layout is built from."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import redis

from common.index import keys, rows
from common.index.read import lua as reader_lua
from common.index.write import name_index
from tests.support import rowfactory, topology

C = "lua"
STATUSES = list(rows.STATUS_CODES)
KINDS = ["GitRepository", "HelmRelease", "Kustomization", "VirtualService"]


def row(ns: str, kind: str, name: str, status: str, rnd: random.Random) -> rows.Row:
    return rowfactory.row(
        C,
        ns,
        kind,
        name,
        status,
        suspended=rnd.random() < 0.2,
        reason=rnd.choice(["", "Failed", "vm in reason"]),
        message=rnd.choice(["", "fetch vm failed", "rev abcdef0123456789 applied"]),
        warnings=rnd.choice([0, 0, 2]),
        lastTransitionTime=rnd.choice([None, "2026-01-02T03:04:05Z"]),
        revision=rnd.choice(["", "abcdef0123456789"]),
    )


@pytest.fixture
def rb(r: redis.Redis, redis_url: str) -> redis.Redis:
    """Replies as bytes, as the reader reads them (`r` decodes; it flushed the database)."""
    return topology.client(redis_url)


@pytest.fixture
def members(rb: redis.Redis) -> list[str]:
    rnd = random.Random(7)
    made = [
        rows.encode(
            row(
                f"ns-{i % 9}" if i % 10 else "",  # "" : cluster-scoped rows
                rnd.choice(KINDS),
                rnd.choice(NAMES),
                rnd.choice(STATUSES),
                rnd,
            )
        )
        for i in range(300)
    ]
    by_identity = {rows.identity(m): m for m in made}  # one row per identity, as stored
    out = sorted(by_identity.values(), key=str.encode)
    rb.zadd(keys.rows(C), dict.fromkeys(out, 0))
    rb.hset(keys.names(C), mapping=name_index.build(out))
    return out


NAMES = ["podinfo", "my-vm", "VMAgent", "frontend", "vmstorage", "api"]


def expected(members: list[str], codes: str, kinds: set[str] | None, sub: str) -> list[str]:
    out = []
    for m in members:
        _ns, kind, name = rows.split_identity(rows.identity(m))
        code = m.split(rows.SEP)[3]
        if codes and code not in codes:
            continue
        if kinds is not None and kind not in kinds:
            continue
        if sub and sub not in name:
            continue
        out.append(m)
    return out


def args(codes: str, kinds: set[str] | None, sub: str, limit: int = 0) -> list[bytes]:
    kinds_arg = reader_lua.kinds_arg(kinds) if kinds is not None else b""
    return [str(limit).encode(), b"100000", codes.encode(), sub.encode(), b"-", b"+", kinds_arg]


CASES = [
    ("", None, ""),
    ("u", None, ""),
    ("uU", None, ""),  # unhealthy, suspended or not
    ("HUPK", None, ""),  # suspended, any health
    ("up", {"HelmRelease", "Kustomization"}, ""),
    ("P", {"HelmRelease", "Kustomization"}, "o"),
    ("", {"VirtualService"}, "vm"),
    ("k", None, "o"),
    ("", None, "zzz"),
]


@pytest.mark.parametrize(("codes", "kinds", "sub"), CASES)
def test_scan_and_named_return_the_matching_members(
    rb: redis.Redis, members: list[str], codes: str, kinds: set[str] | None, sub: str
) -> None:
    want = expected(members, codes, kinds, sub)
    got = rb.eval(reader_lua.SCAN, 1, keys.rows(C), *args(codes, kinds, sub, limit=10_000))
    assert got[0] == b"done" and [m.decode() for m in got[3:]] == want
    if sub:  # the name-index path (field positions of the identity, case-insensitive search)
        named = rb.eval(
            reader_lua.NAMED,
            2,
            keys.rows(C),
            keys.names(C),
            b"100000",
            *args(codes, kinds, sub, limit=10_000),
        )
        lowered = expected(members, codes, kinds, "")  # NAMED matches names case-insensitively
        want_named = [m for m in lowered if sub in rows.split_identity(rows.identity(m))[2].lower()]
        assert [m.decode() for m in named[3:]] == want_named


@pytest.mark.parametrize(("codes", "kinds", "sub"), CASES)
def test_count_scripts_count_in_the_stored_field_format(
    rb: redis.Redis, members: list[str], codes: str, kinds: set[str] | None, sub: str
) -> None:
    want = Counter(rows.count_field(m) for m in expected(members, codes, kinds, sub))
    got = rb.eval(reader_lua.COUNT, 1, keys.rows(C), *args(codes, kinds, sub))
    assert got[0] == b"done"
    counted = {f.decode(): int(n) for f, n in zip(got[3::2], got[4::2], strict=True)}
    assert counted == dict(want)
    for f in counted:  # the same format the counts hash stores
        _kind, status, suspended = rows.parse_count_field(f)
        assert status in rows.STATUS_CODES
        assert rows.status_code(status, suspended) in codes or not codes
    if sub:
        named = rb.eval(
            reader_lua.NAMED_COUNT,
            2,
            keys.rows(C),
            keys.names(C),
            b"100000",
            *args(codes, kinds, sub),
        )
        ci = [
            m
            for m in expected(members, codes, kinds, "")
            if sub in rows.split_identity(rows.identity(m))[2].lower()
        ]
        assert {f.decode(): int(n) for f, n in zip(named[3::2], named[4::2], strict=True)} == dict(
            Counter(rows.count_field(m) for m in ci)
        )
