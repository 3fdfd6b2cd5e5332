"""The one place fleetscope builds its Redis index client: every process connects through
`connect`, so every client has connect and read timeouts (a stalled Redis fails a request or a
sync instead of hanging it) and checks idle connections before use.

On Redis Cluster the client is redis-py's `RedisCluster`: every per-cluster multi-key operation
(MULTI/EXEC under WATCH, Lua) names keys of one hash tag `{c:<cluster>}` (common.index.keys), so
one slot; reads that span clusters go through `pipelined` and `mget`, which split them by slot
and send each shard its part in one write, every shard at once."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import redis
from redis._parsers.encoders import Encoder
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import Connection, PythonRespSerializer, SSLConnection
from redis.crc import key_slot
from redis.exceptions import RedisClusterException
from redis.sentinel import Sentinel

try:
    from hiredis import pack_command as _pack_command
except ImportError:  # redis-py's own packer then
    _pack_command = None  # type: ignore[assignment]

from common import redis_urls

QUERY_TIMEOUT_S = 5.0
"""Query processes: a request waits at most this long for one Redis reply."""
WRITER_TIMEOUT_S = 60.0
"""Collector and watcher: a full sync's transaction can carry many thousand rows."""
CONNECT_TIMEOUT_S = 5.0
WATCH_RETRIES = 10
"""An optimistic transaction (WATCH, MULTI/EXEC) whose keys another writer changed is tried
again this many times before the writer gives up (RedisUnavailable: retried like an outage)."""
HEALTH_CHECK_INTERVAL_S = 30
MAX_CONNECTIONS = 4096
"""Connections a client may open (one per thread using it at once). redis-py 8 lowered its
default to 100, fewer than a watcher replica's threads (a writer per cluster): past it, every
command failed with "Too many connections"."""


def connect(url: str, timeout_s: float = WRITER_TIMEOUT_S) -> redis.Redis:
    """A client of the index at `url` (nothing is connected until the first command): a
    standalone server, or the primary a set of Sentinels names (`redis+sentinel://`, see
    common.redis_urls), whose connections find the new primary after a failover."""
    timeouts: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": min(timeout_s, CONNECT_TIMEOUT_S),
        "max_connections": MAX_CONNECTIONS,
    }
    topology = redis_urls.check(url)
    if topology == "sentinel":
        return _sentinel_primary(redis_urls.parse_sentinel(url), timeouts)
    if topology == "cluster":
        return _cluster(redis_urls.parse_cluster(url), timeouts)
    return redis.Redis.from_url(
        url, health_check_interval=HEALTH_CHECK_INTERVAL_S, **timeouts, **_packer()
    )


class CommandPacker:
    """Packs a command as redis-py's hiredis packer does, without its per-argument encoding pass
    in Python: hiredis takes the str, bytes, int and float arguments as they are (str as UTF-8,
    numbers as their decimal text, as redis-py's encoder writes them). A writer's transaction
    carries ~10 arguments per object (a full sync of an L cluster ~75,000), and that pass was
    most of the collector's time in redis-py (docs/benchmarks.md, "collection"). Anything hiredis
    refuses (a bool, None, another type) and a command name with a space in it (`CONFIG
    RESETSTAT`) go to redis-py's own packer, which answers them as it always did (a
    `DataError` for the wrong types)."""

    def __init__(self) -> None:
        encoder = Encoder("utf-8", "strict", False)  # type: ignore[no-untyped-call]
        fallback: Any = PythonRespSerializer(6000, encoder.encode)
        self._fallback = fallback.pack

    def pack(self, *args: Any) -> list[bytes]:
        head = args[0]
        if (head.__class__ is str and " " in head) or (head.__class__ is bytes and b" " in head):
            return self._fallback(*args)  # type: ignore[no-any-return]
        try:
            return [_pack_command(args)]
        except TypeError:
            return self._fallback(*args)  # type: ignore[no-any-return]


PACKER = CommandPacker() if _pack_command is not None else None
"""The one packer every connection of `connect`'s clients uses (it holds no state)."""


def _packer() -> dict[str, Any]:
    """The connection options that give a connection `PACKER` (none without hiredis)."""
    return {"command_packer": PACKER} if PACKER is not None else {}


CLUSTER_NODES_TAKE_CONNECTION_CLASS = tuple(redis.VERSION[:2]) >= (8, 2)
"""redis-py 8.2 builds a cluster node's pool with the client's `connection_class`; before, a
cluster built from startup nodes passed it to `Redis()`, which rejects it. Older versions keep
redis-py's own packer on a cluster."""


class _WithPacker:
    """A Redis Cluster node's connection with `PACKER` (the cluster client passes no
    `command_packer` through to its nodes)."""

    def _construct_command_packer(self, packer: Any) -> Any:
        return PACKER or super()._construct_command_packer(packer)  # type: ignore[misc]


class _PackedConnection(_WithPacker, Connection):
    pass


class _PackedSSLConnection(_WithPacker, SSLConnection):
    pass


ERRORS: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)
"""What a Redis call may raise when Redis is not answering right: redis-py's errors, and its
cluster client's own (a slot no node serves mid-failover), which are not `RedisError`s."""


def is_cluster(r: Any) -> bool:
    """Whether `r` is a Redis Cluster client (whose multi-slot reads must be split)."""
    return isinstance(r, RedisCluster)


class LazyCluster(RedisCluster):
    """redis-py's cluster client, which reads the cluster's slot map when it is built, built
    instead at its first use: a process started while the cluster is unreachable starts (and its
    requests get 503s) as it does with one server, and is served once the cluster answers. A
    failed first use raises the client's error and the next use tries again."""

    def __init__(self, **kwargs: Any) -> None:
        self._lazy_kwargs = kwargs
        self._lazy_lock = threading.Lock()
        self._lazy_state = "new"  # -> "building" -> "built"

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes the real __init__ has not set yet.
        if name.startswith("_lazy") or self.__dict__.get("_lazy_state") != "new":
            raise AttributeError(name)
        with self._lazy_lock:
            if self._lazy_state == "new":
                self._lazy_state = "building"
                try:
                    super().__init__(**self._lazy_kwargs)
                except BaseException:
                    self.__dict__.pop("nodes_manager", None)
                    self._lazy_state = "new"
                    raise
                self._lazy_state = "built"
        return object.__getattribute__(self, name)

    def close(self) -> None:
        if self.__dict__.get("_lazy_state") == "built":
            super().close()

    def __repr__(self) -> str:
        return f"LazyCluster({self.__dict__.get('_lazy_state')})"


def _cluster(u: redis_urls.ClusterURL, timeouts: dict[str, Any]) -> redis.Redis:
    tls: dict[str, Any] = {}
    if u.tls:
        tls = {"ssl": True, "ssl_cert_reqs": u.ssl_cert_reqs, "ssl_ca_certs": u.ssl_ca_certs}
    packed: dict[str, Any] = {}
    if CLUSTER_NODES_TAKE_CONNECTION_CLASS and PACKER is not None:
        packed["connection_class"] = _PackedSSLConnection if u.tls else _PackedConnection
    client = LazyCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in u.nodes],  # type: ignore[no-untyped-call]
        username=u.username,
        password=u.password,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        **timeouts,
        **tls,
        **packed,
    )
    # Typed as the standalone client every caller takes: the commands fleetscope sends are the
    # same, and the few that differ on a cluster (cross-slot reads) go through this module.
    return client  # type: ignore[return-value]


def _sentinel_primary(u: redis_urls.SentinelURL, timeouts: dict[str, Any]) -> redis.Redis:
    tls: dict[str, Any] = {}
    if u.tls:
        tls = {"ssl": True, "ssl_cert_reqs": u.ssl_cert_reqs, "ssl_ca_certs": u.ssl_ca_certs}
    sentinel_kwargs = {**timeouts, **tls}
    if u.sentinel_password:
        sentinel_kwargs["password"] = u.sentinel_password
    # through Any: redis-py before 8.2 leaves Sentinel untyped, 8.2 types it
    sentinel_type: Any = Sentinel
    sentinel = sentinel_type(list(u.sentinels), sentinel_kwargs=sentinel_kwargs)
    client: redis.Redis = sentinel.master_for(
        u.master,
        db=u.db,
        username=u.username,
        password=u.password,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        **timeouts,
        **tls,
        **_packer(),
    )
    return client


class Packed(bytes):
    """A command already in the Redis protocol (`packed`): callers that send the same long
    command on every request (an MGET of 200 keys) pack it once."""

    args: tuple[Any, ...]


def packed(*args: str | bytes | int) -> Packed:
    """`args` as one RESP command, as redis-py would send them."""
    out = Packed(_pack([args]))
    out.args = args
    return out


def _pack(commands: Iterable[Sequence[Any]]) -> bytes:
    """Commands in the Redis protocol, as redis-py packs them (str as UTF-8, int and float as
    their decimal text), in a third less time than its packer for the short commands a page
    sends by the dozen; a `Packed` one as it is."""
    out: list[bytes] = []
    for c in commands:
        if isinstance(c, Packed):
            out.append(c)
            continue
        out.append(b"*%d\r\n" % len(c))
        for a in c:
            if a.__class__ is not bytes:
                a = _arg(a)
            out.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(out)


def _arg(a: Any) -> bytes:
    if isinstance(a, str):
        return a.encode()
    if isinstance(a, bytes | memoryview):
        return bytes(a)
    if isinstance(a, int | float) and not isinstance(a, bool):
        return repr(a).encode()  # redis-py: str() of an int, repr() of a float
    raise redis.DataError(f"invalid input of type {type(a).__name__!r} for a Redis command")


def pipelined(r: redis.Redis, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """`commands` sent in one write, their raw replies in order: a non-transactional pipeline
    without the pipeline object's bookkeeping (a third of a list page's client-side Redis time).

    Replies get no response callbacks (bytes, lists, integers as Redis sends them). An error
    reply raises, once every reply was read (the connection stays in step), the first error
    (`NoScriptError`, ...). Connection errors are retried by the client's `retry` policy, as
    its pipelines are, the connection dropped before each retry. A command may come `packed`.
    On Redis Cluster commands are grouped by the shard holding their key (an MGET is split by
    slot and its reply put back together), every shard is sent its part before any reply is
    read (one round trip per shard touched, side by side), and a moved slot re-reads the
    cluster's slot map and sends everything once more (these are reads).
    Clients other than a plain `redis.Redis` take their own pipeline."""
    if isinstance(r, RedisCluster):
        return _pipelined_cluster(r, commands)
    if type(r) is not redis.Redis:
        pipe = r.pipeline(transaction=False)
        for command in commands:
            args = command.args if isinstance(command, Packed) else command
            pipe.execute_command(*args)  # type: ignore[no-untyped-call,unused-ignore]
        return pipe.execute()
    wire = _pack(commands)
    pool = r.connection_pool
    conn = pool.get_connection()

    def send() -> list[Any]:
        conn.send_packed_command([wire])  # type: ignore[no-untyped-call,unused-ignore]
        replies: list[Any] = []
        error: redis.ResponseError | None = None
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as e:
                replies.append(e)
                error = error or e
        if error is not None:
            raise error
        return replies

    try:
        return conn.retry.call_with_retry(send, lambda _error: conn.disconnect())  # type: ignore[no-untyped-call,unused-ignore]
    finally:
        pool.release(conn)


def mget(r: redis.Redis, names: Sequence[str]) -> list[Any]:
    """MGET of `names` (of any clusters) in one round trip per shard touched."""
    if not names:
        return []
    if isinstance(r, RedisCluster):
        return _pipelined_cluster(r, [("MGET", *names)])[0]
    return r.mget(names)


def _slot(key: Any) -> int:
    return key_slot(key if isinstance(key, bytes) else _arg(key))


_CLUSTER_RETRIED = (
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.ConnectionError,
    redis.TimeoutError,
)


_CROSS_SLOT_GET = """#!lua flags=allow-cross-slot-keys,no-writes
local out = {}
for i, k in ipairs(ARGV) do out[i] = redis.call('GET', k) end
return out
"""
"""An MGET of keys in many slots of one node, in one command (Redis >= 7: a script flagged
`allow-cross-slot-keys` may read keys of any slot its node serves). The keys are passed as
arguments: declared keys must still share one slot."""

_Part = tuple[int, Sequence[Any], Sequence[Any] | None]
"""How a command is sent: (a slot its node serves, the command, the keys of an MGET part)."""


def _cross_slot_sha(r: RedisCluster) -> str | None:
    """The cross-slot GET script's SHA on every primary, loaded once per client; None where the
    servers cannot run it (Redis < 7): MGETs are then split by slot."""
    state = r.__dict__.get("_fs_cross_slot", "")
    if state == "":
        try:
            state = str(r.script_load(_CROSS_SLOT_GET))
        except redis.ResponseError:
            state = None
        r.__dict__["_fs_cross_slot"] = state
    return state  # type: ignore[no-any-return]


def _mget_parts(r: RedisCluster, keys: Sequence[Any], sha: str | None) -> list[_Part]:
    by_slot: dict[int, list[Any]] = {}
    for k in keys:
        by_slot.setdefault(_slot(k), []).append(k)
    if len(by_slot) == 1 or sha is None:
        return [(slot, ("MGET", *ks), ks) for slot, ks in by_slot.items()]
    by_node: dict[str, tuple[int, list[Any]]] = {}
    for slot, ks in by_slot.items():
        name = r.nodes_manager.get_node_from_slot(slot).name
        by_node.setdefault(name, (slot, []))[1].extend(ks)
    return [
        (slot, ("MGET", *ks), ks) if len(ks) == 1 else (slot, ("EVALSHA", sha, 0, *ks), ks)
        for slot, ks in by_node.values()
    ]


_PARTS: dict[tuple[int, Any], tuple[Any, str | None, list[_Part]]] = {}
PARTS_MAX = 1024
"""MGETs' parts remembered, packed, per (client, keys) while the slot map holds: the same MGETs
come on every request (a caller's generations), and splitting 200 keys by slot and node cost
more client time than the round trip itself (docs/benchmarks.md, "cluster")."""


def _mget_parts_cached(r: RedisCluster, args: Sequence[Any], sha: str | None) -> list[_Part]:
    slots_cache = r.nodes_manager.slots_cache  # replaced (a new dict) when the map is re-read
    key = (id(r), tuple(args))
    hit = _PARTS.get(key)
    if hit is not None and hit[0] is slots_cache and hit[1] == sha:
        return hit[2]
    parts: list[_Part] = [(slot, packed(*a), ks) for slot, a, ks in _mget_parts(r, args[1:], sha)]
    if len(_PARTS) >= PARTS_MAX:
        _PARTS.clear()
    _PARTS[key] = (slots_cache, sha, parts)
    return parts


def _pipelined_cluster(r: RedisCluster, commands: Sequence[Sequence[Any]]) -> list[Any]:
    for attempt in (0, 1):
        # Per command: the parts it is sent as. An MGET of many slots is one part per node (a
        # cross-slot script) or, on Redis < 7, one per slot.
        parts: list[list[_Part]] = []
        sha = None
        for command in commands:
            args = command.args if isinstance(command, Packed) else command
            name = str(args[0]).upper()
            if name == "MGET":
                if sha is None and len(args) > 2:
                    sha = _cross_slot_sha(r)
                parts.append(_mget_parts_cached(r, args, sha))
            elif name in ("EVALSHA", "EVAL") and int(args[2]):
                numkeys = int(args[2])
                slots = {_slot(k) for k in args[3 : 3 + numkeys]}
                if len(slots) != 1:
                    raise redis.DataError(f"{name} must name keys of one slot, got {len(slots)}")
                parts.append([(slots.pop(), args, None)])
            elif name == "XREAD":  # XREAD [COUNT n] [BLOCK ms] STREAMS key id: one key
                at = next(k for k, a in enumerate(args) if _arg(a).upper() == b"STREAMS")
                parts.append([(_slot(args[at + 1]), args, None)])
            else:
                parts.append([(_slot(args[1]), args, None)])
        try:
            return _assemble(commands, parts, _send_to_shards(r, parts))
        except redis.exceptions.NoScriptError:
            if attempt or sha is None:
                raise  # not ours: the caller's scripts, which the caller reloads
            r.__dict__["_fs_cross_slot"] = ""  # a promoted replica without it: load it again
        except _CLUSTER_RETRIED:
            if attempt:
                raise
            r.nodes_manager.initialize()  # the slot map moved (failover, resharding)
    raise AssertionError("unreachable")


def _send_to_shards(r: RedisCluster, parts: list[list[_Part]]) -> list[list[Any]]:
    """Every part to its node, all nodes written before any reply is read; replies per part."""
    by_node: dict[str, tuple[Any, list[tuple[int, int]], list[Sequence[Any]]]] = {}
    for i, command_parts in enumerate(parts):
        for j, (slot, args, _keys) in enumerate(command_parts):
            node = r.nodes_manager.get_node_from_slot(slot)
            entry = by_node.get(node.name)
            if entry is None:
                entry = by_node[node.name] = (node, [], [])
            entry[1].append((i, j))
            entry[2].append(args)
    sent: list[tuple[Any, Any, list[tuple[int, int]]]] = []
    try:
        for node, where, node_commands in by_node.values():
            pool = r.get_redis_connection(node).connection_pool
            conn = pool.get_connection()
            sent.append((pool, conn, where))
            conn.send_packed_command([_pack(node_commands)])  # type: ignore[no-untyped-call,unused-ignore]
        got: list[list[Any]] = [[None] * len(p) for p in parts]
        error: Exception | None = None
        for _pool, conn, where in sent:
            for i, j in where:
                try:
                    got[i][j] = conn.read_response()
                except redis.ResponseError as e:
                    got[i][j] = e
                    error = error or e
    except BaseException:
        for _pool, conn, _where in sent:
            conn.disconnect()  # replies may be left unread: never reuse it
        raise
    finally:
        for pool, conn, _where in sent:
            pool.release(conn)
    if error is not None:
        raise error
    return got


def _assemble(
    commands: Sequence[Sequence[Any]], parts: list[list[_Part]], got: list[list[Any]]
) -> list[Any]:
    """A reply per command: an MGET's parts' values put back in the order its keys were asked."""
    out: list[Any] = []
    for command, command_parts, replies in zip(commands, parts, got, strict=True):
        if command_parts[0][2] is None:
            out.append(replies[0])
            continue
        values: dict[Any, Any] = {}
        for (_, _, part_keys), reply in zip(command_parts, replies, strict=True):
            values.update(zip(part_keys or (), reply, strict=True))
        args = command.args if isinstance(command, Packed) else command
        out.append([values[k] for k in args[1:]])
    return out


def text(v: str | bytes | None) -> str:
    """A Redis reply as text ("" for a missing value), whichever `decode_responses` is set."""
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v
