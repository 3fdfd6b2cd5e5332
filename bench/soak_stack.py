"""The soak's stack: kubesim's fleet in this process, Redis with a replica and three Sentinels
(tests.support.sentinel), two prefork Celery workers, beat, two `fleetscope watch` replicas and
two query processes (gunicorn with two workers each), every one in its own process group
(fleetscope.supervisor). It kills what the faults kill and restarts what an orchestrator would
(a killed watcher replica, a failed Redis primary as the new primary's replica), and lists every
process by a stable name for the RSS samples."""

from __future__ import annotations

import os
import shutil
import socket
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gunicorn as gunicorn_pkg
import redis

from bench.soak_faults import kill9, wait_until
from common.redis_server import RedisServer, start_redis_server
from fleetscope.supervisor import Child, Supervisor, python_module
from kubesim.server import KubeSim
from query.cli import command as gunicorn_command
from query.cli import listening_port
from tests.reliability.stack import http_json, stack_env, start_beat, start_worker
from tests.support.sentinel import SentinelSet, start_sentinel_set

WORKERS, WATCHERS, QUERIES = 2, 2, 2
SENTINEL_DOWN_AFTER_MS = 5000
"""The Sentinels call the primary down after this long without an answer: at fleet L a
primary busy with a collection's writes on a loaded 2-core machine can miss 1 s of pings, and a
failover for nothing is not a fault the soak means to inject."""


def children(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return sorted(int(p) for p in raw.split())


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def slotted(slots: dict[int, int], pids: list[int]) -> dict[int, int]:
    """Keeps each live pid in the slot it was given and gives a new one the lowest slot no
    live pid holds (the one a killed or recycled child left): a child keeps its name for its
    life, so its RSS series is not split between two names when a sibling before it in pid
    order goes (up to the thirty-sixth L run children were named by their place in pid
    order). `slots` (pid -> slot) is updated in place; returns it."""
    for gone in [p for p in slots if p not in pids]:
        del slots[gone]
    for p in pids:
        if p not in slots:
            held = set(slots.values())
            slots[p] = next(i for i in range(len(pids) + 1) if i not in held)
    return slots


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Stack:
    sim: KubeSim
    workdir: Path
    redis: SentinelSet
    sup: Supervisor
    bases: list[str] = field(default_factory=list)
    leaf_faults: dict[str, str] = field(default_factory=dict)
    spare_servers: list[RedisServer] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # pids of children killed on purpose
    watch_ports: dict[str, int] = field(default_factory=dict)  # watcher -> its metrics port
    watch_env: dict[str, dict[str, str]] = field(default_factory=dict)  # a traced watcher's env
    slots: dict[str, dict[int, int]] = field(default_factory=dict)
    """Per Celery worker, its prefork children's pid -> slot (`processes`)."""

    def watched(self) -> int:
        """Clusters whose first build a watcher replica has written (their metrics' sum)."""
        return sum(self.built_by().values())

    def built_by(self) -> dict[str, int]:
        """Per watcher replica, the clusters whose first build it has written (its
        `fleetscope_watch_built`); a replica that does not answer is left out."""
        out = {}
        for name, port in self.watch_ports.items():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as f:
                    text = f.read().decode()
            except OSError:
                continue
            out[name] = sum(
                int(float(line.split()[-1]))
                for line in text.splitlines()
                if line.startswith("fleetscope_watch_built ")
            )
        return out

    @property
    def clusters_dir(self) -> Path:
        assert self.sim.kubeconfig_dir is not None
        return Path(self.sim.kubeconfig_dir)

    def by_name(self, name: str) -> Child:
        return next(c for c in reversed(self.sup.children) if c.name == name)

    # -- faults ------------------------------------------------------------------------

    def kill_worker_child(self, target: int) -> tuple[str, int]:
        parent = self.by_name(f"worker-{target % WORKERS}")
        kids = children(parent.process.pid)
        pid = kids[target % len(kids)]
        kill9(pid)
        return parent.name, pid

    def kill_watcher(self, target: int) -> tuple[str, int]:
        name = f"watcher-{target % WATCHERS}"
        pid = self.by_name(name).process.pid
        kill9(pid)
        self.by_name(name).process.wait(10)
        self.killed.append(pid)
        # as a Deployment's kubelet would (traced again when it was)
        start_watcher(self.sup, name, self.watch_ports[name], self.watch_env.get(name))
        return name, pid

    def kill_query_worker(self, target: int) -> tuple[str, int]:
        master = self.by_name(f"query-{target % QUERIES}")
        workers = query_workers(master.process.pid)
        pid = workers[target % len(workers)]
        kill9(pid)
        return master.name, pid

    def kill_primary(self) -> str:
        """kill -9 of the primary; once a replica is promoted, a new replica of it is started
        (the operator's replacement), so a later failover has somewhere to go."""
        old = self.redis.primary
        old.process.kill()
        old.process.wait(10)
        wait_until(lambda: self.redis.master_port() not in (None, old.port), 60)
        new_port = self.redis.master_port()
        promoted = self.redis.replica
        self.spare_servers.append(old)
        self.redis.primary = promoted
        self.redis.replica = start_redis_server(
            extra_args=("--replicaof", "127.0.0.1", str(new_port))
        )
        return f"127.0.0.1:{old.port}"

    def unregister(self, cluster: str) -> None:
        (self.workdir / "removed").mkdir(exist_ok=True)
        shutil.move(self.sim.kubeconfig_path(cluster), self.workdir / "removed" / f"{cluster}.yaml")

    def register(self, cluster: str) -> None:
        shutil.move(self.workdir / "removed" / f"{cluster}.yaml", self.sim.kubeconfig_path(cluster))

    # -- health and processes ----------------------------------------------------------

    def whole(self) -> bool:
        """Every process there with its children, and every query process answering."""
        if any(c.process.pid not in self.killed for c in self.sup.dead()):
            return False
        for i in range(WORKERS):
            if len(children(self.by_name(f"worker-{i}").process.pid)) < 2:
                return False
        for i in range(QUERIES):
            if len(query_workers(self.by_name(f"query-{i}").process.pid)) < 2:
                return False
        return all(http_json(b + "/healthz")[0] == 200 for b in self.bases)

    def processes(self) -> dict[str, int]:
        """Stable name -> pid of every process worth sampling (a replaced child gets the same
        name: the RSS series is split by pid when reading it)."""
        out = {"redis-primary": self.redis.primary.process.pid}
        out["redis-replica"] = self.redis.replica.process.pid
        for child in self.sup.children:
            if not child.alive():
                continue
            out[child.name] = child.process.pid
            kids = children(child.process.pid)
            if child.name.startswith("query-"):
                workers = query_workers(child.process.pid)
                out.update({f"{child.name}.w{i}": p for i, p in enumerate(workers)})
                out.update({f"{child.name}.stream": p for p in kids if p not in workers})
            elif child.name.startswith("worker-"):
                slots = self.slots.setdefault(child.name, {})
                out.update({f"{child.name}.child{i}": p for p, i in slotted(slots, kids).items()})
        return out

    def redis_data_kib(self) -> dict[str, int]:
        """Per Redis server (named as in `processes`): the memory its allocator holds for data
        (`INFO memory` `used_memory`), KiB; a server that does not answer is left out."""
        out = {}
        for name, server in (
            ("redis-primary", self.redis.primary),
            ("redis-replica", self.redis.replica),
        ):
            try:
                with redis.Redis(port=server.port, socket_timeout=2) as r:
                    out[name] = int(r.info("memory")["used_memory"]) // 1024
            except redis.RedisError:
                continue
        return out

    def stop(self) -> None:
        self.sup.stop_all()
        for s in self.spare_servers:
            s.stop()
        self.redis.stop()


def query_workers(master: int) -> list[int]:
    """The gunicorn workers of a master (its other child is the stream process)."""
    return [p for p in children(master) if "stream_server" not in cmdline(p)]


def start_watcher(
    sup: Supervisor, name: str, metrics_port: int, extra: dict[str, str] | None = None
) -> Child:
    # INFO: the hand-overs (watching, claimed from, took over, handing over) in its log, one
    # line per cluster changing hands, which a take-over's freshness needs explained.
    env = {"FLEETSCOPE_WATCH_METRICS_PORT": str(metrics_port), "FLEETSCOPE_LOG_LEVEL": "INFO"}
    env.update(extra or {})
    return sup.start(name, python_module("fleetscope", "watch", "--name", name), env)


def start_query(sup: Supervisor, name: str, env: dict[str, str] | None = None) -> str:
    argv = gunicorn_command("127.0.0.1:0")
    if gunicorn_pkg.version_info >= (25, 1):  # two masters side by side: no shared socket
        argv.insert(-1, "--no-control-socket")
    child = sup.start(name, argv, env)
    slow = 4 if env else 1  # a diagnosed (possibly traced) process's workers may start slower

    def port() -> int | None:
        assert child.alive(), f"gunicorn exited: {child.tail()}"
        return listening_port(child.log_path.read_text(errors="replace"))

    deadline = time.monotonic() + 60
    while (found := port()) is None:
        assert time.monotonic() < deadline, "gunicorn did not listen"
        time.sleep(0.2)
    base = f"http://127.0.0.1:{found}"
    assert wait_until(lambda: http_json(base + "/healthz")[0] == 200, 60 * slow), "gunicorn serving"
    return base


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def heaptrace_env(
    base: dict[str, str], out: Path, frames: int, census: bool = False
) -> dict[str, str]:
    """The environment that has a process's forked children dump their heap's make-up into
    `out` (bench.heaptrace.sitecustomize), with tracemalloc's `frames` frames when above 0 and
    the live objects by type with `census`."""
    out.mkdir(parents=True, exist_ok=True)
    path = [str(Path(__file__).parent / "heaptrace"), base.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "HEAPTRACE_FRAMES": str(frames),
        "HEAPTRACE_EVERY_S": "150",
        "HEAPTRACE_DIR": str(out),
        "HEAPTRACE_CENSUS": "1" if census else "0",
    }


def start_stack(
    sim: KubeSim,
    workdir: Path,
    heaptrace: Path | None = None,
    heaptrace_frames: int = 0,
    heaptrace_census: bool = False,
    **settings: Any,
) -> Stack:
    """Everything started; returns once every query process answers (not yet collected).
    With `heaptrace`, the last query process's workers, the first Celery worker's prefork
    children and the first watcher replica dump their heap's make-up there."""
    redis = start_sentinel_set(down_after_ms=SENTINEL_DOWN_AFTER_MS)
    env = stack_env(redis.url, Path(str(sim.kubeconfig_dir)), workdir, **settings)
    env["FLEETSCOPE_BROKER_URL"] = redis.broker_url
    sup = Supervisor(workdir, env)
    stack = Stack(sim, workdir, redis, sup)
    try:
        for i in range(WORKERS):
            # the first worker's prefork children dump too (the ones a fault replaces)
            traced = heaptrace if i == 0 else None
            extra = heaptrace_env(env, traced, 0) if traced else None
            start_worker(sup, name=f"worker-{i}", pool="prefork", env=extra)
        start_beat(sup, workdir)
        for i in range(WATCHERS):
            name = f"watcher-{i}"
            stack.watch_ports[name] = free_port()
            if heaptrace and i == 0:  # the replica a fault kills: it dumps from its own start
                own = {**heaptrace_env(env, heaptrace, 0, heaptrace_census), "HEAPTRACE_SELF": "1"}
                stack.watch_env[name] = own
            start_watcher(sup, name, stack.watch_ports[name], stack.watch_env.get(name))
        for i in range(QUERIES):
            traced = heaptrace if i == QUERIES - 1 else None
            extra = (
                heaptrace_env(env, traced, heaptrace_frames, heaptrace_census) if traced else None
            )
            stack.bases.append(start_query(sup, f"query-{i}", extra))
    except BaseException:
        stack.stop()
        raise
    return stack
