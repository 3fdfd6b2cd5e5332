"""Benchmark: kubesim's own watch delivery with many open streams, printed as JSON.

    ./dev bench kubesim_watch [--streams 8600] [--clusters 200] [--namespaces 50] [--probes 40]
    .venv/bin/python -m bench.kubesim_watch --streams 2000 --clusters 10  # from a worktree

Starts kubesim in-process (plain HTTP, bookmarks at the default interval) and opens `--streams`
watches spread over the clusters and every served resource, as a fleet of watchers does (at
fleet L: ~8,600 streams over 200 clusters), read by a client process of their own (raw sockets,
one thread). Reports kubesim's CPU over an idle window (bookmarks only) and, for `--probes`
changes on random clusters, the delay from the change to the client reading it (p50/p99/max);
the client and kubesim share the machine. What a freshness figure must not be measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.services import ROOT
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim

MARK = b"probe-"


def client(targets_file: str, token: str) -> None:
    """Open every watch in `targets_file`, print `open`, then `<probe> <monotonic>` per probe
    seen (CLOCK_MONOTONIC is system-wide: comparable with the parent's time.monotonic())."""
    targets = json.loads(Path(targets_file).read_text())
    sel = selectors.DefaultSelector()
    for port, path in targets:
        sock = socket.create_connection(("127.0.0.1", port))
        head = f"GET {path}?watch=1&allowWatchBookmarks=true HTTP/1.1\r\nHost: kubesim\r\n"
        sock.sendall(f"{head}Authorization: Bearer {token}\r\n\r\n".encode())
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
    print("open", flush=True)
    tails: dict[int, bytes] = {}  # the end of each stream's last read: a probe may be split
    while True:
        for key, _ in sel.select(1.0):
            conn = key.fileobj
            if not isinstance(conn, socket.socket):
                continue
            data = conn.recv(65536)
            if not data:
                sel.unregister(conn)
                continue
            now = time.monotonic()
            seen = tails.get(conn.fileno(), b"") + data
            tails[conn.fileno()] = seen[-64:]
            i = seen.find(MARK)
            while i >= 0:  # printed twice when in a tail: the reader keeps the first
                j = seen.find(b'"', i)
                if j < 0:
                    break
                print(f"{seen[i:j].decode()} {now}", flush=True)
                i = seen.find(MARK, j)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(1000 * s[min(len(s) - 1, int(len(s) * p))], 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=8600)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--namespaces", type=int, default=50)
    ap.add_argument("--probes", type=int, default=40)
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--client", nargs=2, help=argparse.SUPPRESS)  # the reading process
    args = ap.parse_args()
    if args.client:
        client(*args.client)
        return
    fleet = generate_fleet(clusters=args.clusters, namespaces=args.namespaces, seed=1)
    with KubeSim.start(fleet, tls=False) as sim, tempfile.TemporaryDirectory() as tmp:
        sim.warm()
        probed = sim.resource("Kustomization")  # watched on every cluster: listed first
        paths = [
            (f"/apis/{r.group}/" if r.group else "/api/") + f"{r.version}/{r.plural}"
            for r in sorted(sim.catalog.resources.values(), key=lambda r: r is not probed)
        ]
        n = len(sim.clusters)
        targets = [
            (sim.port(sim.clusters[i % n]), paths[(i // n) % len(paths)])
            for i in range(args.streams)
        ]
        targets_file = Path(tmp) / "targets.json"
        targets_file.write_text(json.dumps(targets))
        cmd = [sys.executable, "-m", "bench.kubesim_watch", "--client", str(targets_file)]
        cmd.append(sim.collector_token)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
            while sum(sim.watch_streams(c) for c in sim.clusters) < args.streams:
                time.sleep(0.5)
            time.sleep(3.0)  # the initial lists sent
            cpu0, t0 = sum(os.times()[:2]), time.monotonic()
            time.sleep(args.idle_s)
            idle = (sum(os.times()[:2]) - cpu0) / (time.monotonic() - t0)
            delays = probes(sim, proc.stdout, args.probes, args.namespaces)
        finally:
            proc.kill()
            proc.wait()
    print(
        json.dumps(
            {
                "benchmark": "kubesim_watch",
                "streams": args.streams,
                "clusters": args.clusters,
                "bookmark_interval_s": sim.bookmark_interval_s,
                "kubesim_idle_cpu_percent": round(100 * idle, 1),
                "change_read_ms": {
                    "n": len(delays),
                    "p50": pct(delays, 0.5),
                    "p99": pct(delays, 0.99),
                    "max": round(1000 * max(delays), 1),
                },
                "load": os.getloadavg(),
            }
        )
    )


def probes(sim: KubeSim, out: object, n: int, namespaces: int) -> list[float]:
    """Change a Kustomization on a random cluster `n` times; each change's delay until the
    client first read it."""
    rnd = random.Random(1)
    delays = []
    for k in range(n):
        c = rnd.choice(sim.clusters)
        ns = f"app-{rnd.randrange(namespaces):04d}"
        t0 = time.monotonic()
        sim.set_ready(c, "Kustomization", ns, "apps", False, message=f"probe-{k}")
        while True:
            label, at = out.readline().split()  # type: ignore[attr-defined]
            if label == f"probe-{k}":  # the first stream to get it (others follow)
                break
        delays.append(float(at) - t0)
    return delays


if __name__ == "__main__":
    main()
