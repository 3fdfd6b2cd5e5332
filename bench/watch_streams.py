"""Benchmark: watch streams on one query service while the list profiles run (issue #36).

    ./dev bench watch_streams [--preset S] [--streams 500] [--seconds 6] [--writes-per-s 5]

Loads the fleet into a private redis-server, serves the query service and the one-GET app
under gunicorn with the production defaults (bench.query.served), and measures a few list
profiles (bench.query.measure_profile) first with no stream, then with `--streams` admin watch
streams open (raw sockets read by one thread of a process of their own) while new rows are
written through the watcher's writer at `--writes-per-s`. Reports each profile's req/s and p99
both ways (targets: >= 0.8x and <= 2x), every event's delay from its write to its arrival on
each stream (p50/p99/max; target p99 <= 1 s), that every stream got every event once, the CPU
time of the stream process and of the benchmark's own stream clients (they share the 2 cores),
and the service's RSS growth (master, workers, stream process) per idle stream (<= 64 KiB).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import selectors
import socket
import statistics
import subprocess
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from bench import query, report
from bench.fleetload import load_fleet
from common import redis_client
from common.index import keys, rows
from common.index.write import store_events
from common.redis_client import text
from common.redis_server import start_redis_server

PROFILES = ("cluster admin", "team member (~1% of namespaces)", "status=unhealthy (admin)")
NAME = b'"name":"bench-watch-'
"""Each write's row is named `bench-watch-NNNNNN`: an event is found by this in the raw bytes."""
DIGITS = 6
SAMPLE_EVERY = 50
"""Every 50th event of each stream is parsed whole and checked (type, id, the row's name)."""


def service_pids(app: str) -> list[int]:
    """The gunicorn processes serving `app` (master, workers) and the master's other children
    (the stream process)."""
    found = subprocess.run(["pgrep", "-f", app], capture_output=True, text=True).stdout.split()
    pids = {int(p) for p in found}
    for pid in list(pids):
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        pids |= {int(p) for p in kids.stdout.split()}
    return sorted(pids)


def stream_process(app: str) -> int | None:
    for pid in service_pids(app):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"query.stream_server" in f.read():
                    return pid
        except FileNotFoundError:
            continue
    return None


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration):
            continue
    return total


def cpu_s(pid: int | None) -> float:
    """User and system CPU seconds `pid` has used."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Conn:
    """One stream's socket: its bytes not yet split into events, and the rows it got."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.seen: set[int] = set()
        self.events = 0


class Streams:
    """`n` watch streams as the cluster admin, each a socket; one thread reads them all and
    notes when each row event arrived (by the row's number, found in the raw bytes: each write
    names a fresh row). Only every SAMPLE_EVERY-th event is parsed as JSON and checked, so the
    reading costs little of the 2 cores the service runs on and the delay is the arrival's."""

    def __init__(self, base: str, rv: str, n: int) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sel = selectors.DefaultSelector()
        self.arrived: dict[int, list[float]] = {}
        self.repeated = 0
        self.sampled = 0
        self.bad: list[str] = []
        req = (
            f"GET /api/v1/watch?resourceVersion={rv} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "X-Remote-User: admin-0\r\nX-Remote-Group: fleet-admins\r\n\r\n"
        ).encode()
        self.conns = []
        for _ in range(n):
            s = socket.create_connection((host, int(port)))
            s.sendall(req)
            s.setblocking(False)
            conn = Conn(s)
            self.sel.register(s, selectors.EVENT_READ, conn)
            self.conns.append(conn)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.sel.select(0.2):
                conn: Conn = key.data
                try:
                    chunk = conn.sock.recv(1 << 18)
                except BlockingIOError:
                    continue
                now = time.time()
                if not chunk:
                    self.sel.unregister(conn.sock)
                    continue
                conn.buf += chunk
                end = conn.buf.rfind(b"\n\n")
                if end >= 0:
                    done = bytes(conn.buf[: end + 2])
                    del conn.buf[: end + 2]
                    self._events(conn, done, now)

    def _events(self, conn: Conn, done: bytes, now: float) -> None:
        i = done.find(NAME)
        while i >= 0:
            j = i + len(NAME)
            number = int(done[j : j + DIGITS])
            if number in conn.seen:
                self.repeated += 1
            conn.seen.add(number)
            self.arrived.setdefault(number, []).append(now)
            conn.events += 1
            if conn.events % SAMPLE_EVERY == 1:
                self._check(done, i, number)
            i = done.find(NAME, j)

    def _check(self, done: bytes, at: int, number: int) -> None:
        """Parse the event around `at` whole: an ADDED of row `number`, with an id."""
        prev = done.rfind(b"\n\n", 0, at)
        begin = 0 if prev < 0 else prev + 2
        event = done[begin : done.find(b"\n\n", at)].decode()
        fields = dict(line.split(": ", 1) for line in event.split("\n") if ": " in line)
        self.sampled += 1
        try:
            data = json.loads(fields["data"])
            ok = (
                fields.get("event") == "ADDED"
                and bool(fields.get("id"))
                and data["type"] == "ADDED"
                and data["object"]["name"] == f"bench-watch-{number:06d}"
            )
        except (KeyError, ValueError):
            ok = False
        if not ok:
            self.bad.append(event[:300])

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.conns:
            conn.sock.close()


def writer(redis_url: str, per_s: float, stop: threading.Event, written: dict[int, float]) -> None:
    """New rows (a copy of a random row under a fresh name), `per_s` a second, through the
    watcher's writer; their write time by number."""
    r = redis_client.connect(redis_url)
    clusters = sorted(text(c) for c in r.hkeys(keys.CLUSTERS))
    rnd = random.Random(2)
    i = 0
    while not stop.wait(1.0 / per_s):
        c = rnd.choice(clusters)
        got = r.zrandmember(keys.rows(c))
        if not got:
            continue
        row = rows.decode(c, text(got))
        i += 1
        row["name"] = f"bench-watch-{i:06d}"
        member = rows.encode(row)
        written[i] = time.time()
        store_events.apply_changes(r, c, [store_events.Change.of(member)])


def streams_and_writes(
    base: str, rv: str, n: int, redis_url: str, per_s: float, pipe: Connection
) -> None:
    """The streams and the writer, in a process of their own: the load generator's 16 client
    threads would otherwise hold the GIL while an event waits to be read, and its arrival
    would be noted late. Opens the streams ("open"), writes from "write" to "stop", waits
    for the last writes' events (at most 10 s), then sends back what arrived."""
    streams = Streams(base, rv, n)
    pipe.send("open")
    pipe.recv()
    written: dict[int, float] = {}
    stop = threading.Event()
    w = threading.Thread(target=writer, args=(redis_url, per_s, stop, written))
    w.start()
    pipe.recv()
    stop.set()
    w.join()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(set(written) <= c.seen for c in streams.conns):
        time.sleep(0.1)  # the benchmark waits for the last events, with a bound
    streams.close()
    delays = [t - written[x] for x, ts in streams.arrived.items() if x in written for t in ts]
    pipe.send(
        {
            "writes": len(written),
            "delays": sorted(delays),
            "every": sum(1 for c in streams.conns if set(written) <= c.seen),
            "repeated": streams.repeated,
            "sampled": streams.sampled,
            "bad": streams.bad[:3],
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="S")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--slices", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--writes-per-s", type=float, default=5)
    args = ap.parse_args()
    args.profiles = None
    server = start_redis_server()
    try:
        print(load_fleet(server.url, args.preset, args.seed), flush=True)
        run(args, server.url)
    finally:
        server.stop()


def run(args: Any, url: str) -> None:
    chosen = [p for p in query.profiles("") if p.name in PROFILES]
    with query.served(url) as (r, base, ref):
        before = [query.measure_profile(r, base, ref, p, args)[0] for p in chosen]
        server = stream_process(query.QUERY_APP)
        rss0, srss0 = rss_kib(service_pids(query.QUERY_APP)), rss_kib([server] if server else [])
        listed = json.loads(
            query.requests.get(
                base + "/api/v1/objects?limit=1",
                headers={"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"},
                timeout=10,
            ).text
        )
        here, there = multiprocessing.get_context("spawn").Pipe()
        side = multiprocessing.get_context("spawn").Process(
            target=streams_and_writes,
            args=(base, listed["resourceVersion"], args.streams, url, args.writes_per_s, there),
        )
        side.start()
        here.recv()  # the streams are open
        time.sleep(3)  # a benchmark's settle time (idle streams' memory), not a test's race fix
        rss1, srss1 = rss_kib(service_pids(query.QUERY_APP)), rss_kib([server] if server else [])
        cpu0, client0, t0 = cpu_s(server), cpu_s(side.pid), time.monotonic()
        here.send("write")
        after = [query.measure_profile(r, base, ref, p, args)[0] for p in chosen]
        here.send("stop")
        cpu1, client1, t1 = cpu_s(server), cpu_s(side.pid), time.monotonic()
        got = here.recv()
        side.join()
    delays = got["delays"]
    expected = got["writes"] * args.streams
    out = {
        "preset": args.preset,
        "streams": args.streams,
        "rss_kib_per_idle_stream": round((rss1 - rss0) / max(1, args.streams), 1),
        "of_which_stream_process": round((srss1 - srss0) / max(1, args.streams), 1),
        "writes": got["writes"],
        "events_expected": expected,
        "events_received": len(delays),
        "streams_with_every_event": got["every"],
        "events_repeated": got["repeated"],
        "events_parsed_and_checked": got["sampled"],
        "events_wrong": got["bad"],
        "delay_p50_ms": round(statistics.median(delays) * 1e3, 1) if delays else None,
        "delay_p99_ms": round(delays[int(len(delays) * 0.99) - 1] * 1e3, 1) if delays else None,
        "delay_max_ms": round(delays[-1] * 1e3, 1) if delays else None,
        "stream_process_cpu_s": round(cpu1 - cpu0, 2) if server else None,
        "stream_clients_cpu_s": round(client1 - client0, 2),
        "seconds_with_streams": round(t1 - t0, 1),
        "load_avg": report.load_average(),
        "commit": report.commit(),
        "profiles": [
            {
                "profile": b["profile"],
                "rps_without": b["rps"],
                "rps_with": a["rps"],
                "ratio": round(a["rps"] / b["rps"], 2) if b["rps"] else None,
                "p99_ms_without": b["p99_ms"],
                "p99_ms_with": a["p99_ms"],
            }
            for b, a in zip(before, after, strict=True)
        ],
    }
    print(json.dumps(out, indent=2), flush=True)


if __name__ == "__main__":
    main()
