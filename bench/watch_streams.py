"""Benchmark: watch streams on one query service while the list profiles run (issue #36).

    ./dev bench watch_streams [--preset S] [--streams 500] [--seconds 6] [--writes-per-s 5]

Loads the fleet into a private redis-server, serves the query service and the one-GET app
under gunicorn with the production defaults (bench.query.served), and measures a few list
profiles (bench.query.measure_profile) first with no stream, then with `--streams` admin watch
streams open (raw sockets, drained by one thread) while rows transition through the writer at
`--writes-per-s`. Reports each profile's req/s and p99 both ways (targets: >= 0.8x and <= 2x),
every event's delivery delay from its write to each stream (p50/p99/max; target p99 <= 1 s),
and the query workers' RSS growth per idle stream (target <= 64 KiB).
"""

from __future__ import annotations

import argparse
import json
import random
import selectors
import socket
import statistics
import subprocess
import threading
import time
from typing import Any

from bench import query, report
from bench.fleetload import load_fleet
from common import redis_client
from common.index import keys, rows
from common.index.write import store_events
from common.redis_client import text
from common.redis_server import start_redis_server

PROFILES = ("cluster admin", "team member (~1% of namespaces)", "status=unhealthy (admin)")


def workers_rss_kib(app: str) -> int:
    pids = subprocess.run(["pgrep", "-f", app], capture_output=True, text=True).stdout.split()
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration):
            continue
    return total


class Streams:
    """`n` watch streams as the cluster admin, each a socket; one thread reads them all and
    notes, per row event, when it arrived (by the row's name: each write names a fresh row)."""

    def __init__(self, base: str, rv: str, n: int) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sel = selectors.DefaultSelector()
        self.arrived: dict[str, list[float]] = {}
        self.lock = threading.Lock()
        req = (
            f"GET /api/v1/watch?resourceVersion={rv} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "X-Remote-User: admin-0\r\nX-Remote-Group: fleet-admins\r\n\r\n"
        ).encode()
        self.socks = []
        for _ in range(n):
            s = socket.create_connection((host, int(port)))
            s.sendall(req)
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ, bytearray())
            self.socks.append(s)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.sel.select(0.2):
                try:
                    chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                buf: bytearray = key.data
                buf += chunk
                now = time.time()
                while b"\n\n" in buf:
                    event, _, rest = bytes(buf).partition(b"\n\n")
                    buf[:] = rest
                    for line in event.split(b"\n"):
                        if line.startswith(b"data: ") and b'"object":{"cluster"' in line:
                            name = json.loads(line[6:])["object"]["name"]
                            with self.lock:
                                self.arrived.setdefault(name, []).append(now)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


def writer(redis_url: str, per_s: float, stop: threading.Event, written: dict[str, float]) -> None:
    """New rows (a copy of a random row under a fresh name), `per_s` a second, through the
    watcher's writer; their write time by name."""
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
        written[row["name"]] = time.time()
        store_events.apply_changes(r, c, [store_events.Change.of(member)])


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
        rss0 = workers_rss_kib(query.QUERY_APP)
        listed = json.loads(
            query.requests.get(
                base + "/api/v1/objects?limit=1",
                headers={"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"},
                timeout=10,
            ).text
        )
        streams = Streams(base, listed["resourceVersion"], args.streams)
        time.sleep(3)  # a benchmark's settle time (idle streams' memory), not a test's race fix
        rss1 = workers_rss_kib(query.QUERY_APP)
        written: dict[str, float] = {}
        stop = threading.Event()
        w = threading.Thread(target=writer, args=(url, args.writes_per_s, stop, written))
        w.start()
        after = [query.measure_profile(r, base, ref, p, args)[0] for p in chosen]
        stop.set()
        w.join()
        time.sleep(2)  # the last writes' events
        streams.close()
    delays = [
        t - written[name] for name, ts in streams.arrived.items() if name in written for t in ts
    ]
    delays.sort()
    expected = len(written) * args.streams
    out = {
        "preset": args.preset,
        "streams": args.streams,
        "rss_kib_per_idle_stream": round((rss1 - rss0) / max(1, args.streams), 1),
        "writes": len(written),
        "events_expected": expected,
        "events_received": len(delays),
        "delay_p50_ms": round(statistics.median(delays) * 1e3, 1) if delays else None,
        "delay_p99_ms": round(delays[int(len(delays) * 0.99) - 1] * 1e3, 1) if delays else None,
        "delay_max_ms": round(delays[-1] * 1e3, 1) if delays else None,
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
