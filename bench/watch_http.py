"""Benchmark: the watcher's HTTP client for watch streams, three ways, printed as JSON (issue #38).

    .venv/bin/python -m bench.watch_http [--preset S] [--streams 200] [--events 40000]
        [--big-every 500] [--impl handwritten,aiohttp,httpx]

kubesim (in this process) serves the fleet over HTTPS; per implementation a client process of
its own opens `--streams` watches of Kustomizations (spread evenly over the clusters, each from
its cluster's list resourceVersion, with bookmarks), and this process changes Kustomizations
(their Ready condition, round robin over clusters and objects; every `--big-every`th change
carries a 256 KiB message, so lines arrive split across many chunks and reads) until every
stream has received its events. The client measures its own CPU seconds (user + system, all
its threads) from the moment all streams are open to the last event, and checks every event
arrived (count per stream; a run where a stream breaks, or none gets an event for 60 s, fails
and says which). Reported: CPU seconds per 10,000 events, per implementation, and the
library's cost relative to the hand-written reader; also the client's resident memory per
open stream (RSS after opening the streams minus before, idle: indicative only).

Implementations: `handwritten` the HTTP/1.1 reader on asyncio streams that
common/leaf/async_watch.py held before aiohttp (kept here, as the baseline); `aiohttp`
common.leaf.async_watch as it is; `httpx` the same request with httpx.AsyncClient. All three
parse events with common.leaf.client.parse_event (orjson), as the watcher does.
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.sslproto
import faulthandler
import json
import os
import select
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from collector.watch import loop as watch_loop
from common.errors import ClusterUnreachable
from common.leaf import async_watch, registry
from common.leaf.client import LeafClient, parse_event, raise_for_status, watch_path

KS = "kustomize.toolkit.fluxcd.io/v1"
ROOT = Path(__file__).resolve().parent.parent
IMPLS = ("handwritten", "aiohttp", "httpx")
BIG = 256 * 1024
OPEN_WAIT_S = 240  # a client not ready by then is stuck opening its streams


# --- the baseline: the hand-written HTTP/1.1 reader (common/leaf/async_watch.py before #38) ---

HEADER_MAX = 64 * 1024
LINE_MAX = 64 * 1024 * 1024


class HandwrittenStream:
    def __init__(
        self,
        cluster: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        idle_s: float,
    ) -> None:
        self.cluster, self._reader, self._writer, self.idle_s = cluster, reader, writer, idle_s
        self.chunked = False
        self._length = -1

    async def _read(self, coro: Any, timeout_s: float | None = None) -> Any:
        try:
            return await asyncio.wait_for(coro, timeout_s or self.idle_s)
        except TimeoutError:
            raise ClusterUnreachable(f"cluster {self.cluster}: watch silent") from None
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            raise ClusterUnreachable(f"cluster {self.cluster}: watch broke ({e!r})") from None

    async def read_head(self, timeout_s: float) -> int:
        raw = await self._read(self._reader.readuntil(b"\r\n\r\n"), timeout_s)
        if len(raw) > HEADER_MAX:
            raise ClusterUnreachable("answer headers too long")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._length = int(headers.get("content-length", "-1") or -1)
        return status

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            size_line = await self._read(self._reader.readuntil(b"\r\n"))
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                return
            data = await self._read(self._reader.readexactly(size + 2))
            yield data[:-2]

    async def _data(self) -> AsyncIterator[bytes]:
        if self.chunked:
            async for data in self._chunks():
                yield data
            return
        while True:
            data = await self._read(self._reader.read(2**16))
            if not data:
                return
            yield data

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        buf = b""
        try:
            async for data in self._data():
                buf += data
                if b"\n" not in data:
                    continue
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    if raw.strip():
                        yield parse_event(self.cluster, raw)
        finally:
            self._writer.close()


async def open_handwritten(
    client: LeafClient, ctx: ssl.SSLContext | None, rv: str, idle_s: float
) -> HandwrittenStream:
    config = client.configuration
    url = urlsplit(config.host)
    path = watch_path(KS, "kustomizations", rv, 300)
    reader, writer = await asyncio.open_connection(
        url.hostname, url.port, ssl=ctx, server_hostname=url.hostname, limit=LINE_MAX
    )
    headers = {"Host": url.netloc, "Accept": "application/json", "Connection": "close"}
    headers.update(client.headers())
    head = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(head.encode("latin-1") + b"\r\n")
    stream = HandwrittenStream(client.name, reader, writer, idle_s)
    status = await stream.read_head(idle_s)
    if status != 200:
        raise_for_status(client.name, status, b"", path)
    return stream


# --- httpx, the same request ---


class HttpxStream:
    def __init__(self, cluster: str, resp: Any) -> None:
        self.cluster, self._resp = cluster, resp

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        pending: list[bytes] = []
        try:
            async for data in self._resp.aiter_raw():
                end = data.rfind(b"\n")
                if end < 0:
                    pending.append(data)
                    continue
                pending.append(data[: end + 1])
                whole = b"".join(pending)
                rest = data[end + 1 :]
                pending = [rest] if rest else []
                for raw in whole.split(b"\n"):
                    if raw.strip():
                        yield parse_event(self.cluster, raw)
        finally:
            await self._resp.aclose()


async def open_httpx(http: Any, client: LeafClient, rv: str) -> HttpxStream:
    path = watch_path(KS, "kustomizations", rv, 300)
    headers = {"Accept": "application/json", **client.headers()}
    request = http.build_request(
        "GET", client.configuration.host.rstrip("/") + path, headers=headers
    )
    resp = await http.send(request, stream=True)
    if resp.status_code != 200:
        raise_for_status(client.name, resp.status_code, await resp.aread(), path)
    return HttpxStream(client.name, resp)


# --- the client process ---


async def client_main(impl: str, kubeconfigs: str, streams: int, per_stream: int) -> dict[str, Any]:
    # asyncio's TLS receive buffer per connection, as the watcher's loop sets it
    if getattr(asyncio.sslproto.SSLProtocol, "max_size", 0) > watch_loop.TLS_READ_BUFFER:
        asyncio.sslproto.SSLProtocol.max_size = watch_loop.TLS_READ_BUFFER
    configs = registry.load_dir(kubeconfigs)
    clients = [LeafClient(configs[name], timeout_s=30) for name in sorted(configs)]
    rvs = {c.name: c.list_snapshot(KS, "kustomizations")[1] for c in clients}
    idle_s = 120.0
    http: Any = None
    if impl == "httpx":
        import httpx

        ctx = async_watch.ssl_context(clients[0])  # kubesim: one CA for every cluster
        http = httpx.AsyncClient(
            verify=ctx or True,
            timeout=httpx.Timeout(30.0, read=idle_s),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
            trust_env=False,
        )
    opened: list[Any] = []
    rss0 = rss_kib()
    for i in range(streams):
        client = clients[i % len(clients)]
        ctx = async_watch.ssl_context(client)
        if impl == "handwritten":
            opened.append(await open_handwritten(client, ctx, rvs[client.name], idle_s))
        elif impl == "aiohttp":
            opened.append(
                await async_watch.open_watch(
                    client, ctx, KS, "kustomizations", rvs[client.name], 300, idle_s
                )
            )
        else:
            opened.append(await open_httpx(http, client, rvs[client.name]))
    counts = [0] * streams
    bookmarks = [0]
    big = [0]
    done = asyncio.Event()
    remaining = [streams]

    errors: list[str] = []

    async def read(i: int, stream: Any) -> None:
        try:
            await read_all(i, stream)
        except Exception as e:  # a broken stream ends the run: it would never get its events
            errors.append(f"stream {i}: {e!r}")
            done.set()

    async def read_all(i: int, stream: Any) -> None:
        async for kind, obj in stream:
            if kind == "BOOKMARK":
                bookmarks[0] += 1
                continue
            counts[i] += 1
            if (
                len(((obj.get("status") or {}).get("conditions") or [{}])[0].get("message", ""))
                >= BIG
            ):
                big[0] += 1
            if counts[i] == per_stream:
                remaining[0] -= 1
                if not remaining[0]:
                    done.set()

    rss_open = rss_kib() - rss0
    tasks = [asyncio.create_task(read(i, s)) for i, s in enumerate(opened)]
    t0 = os.times()
    w0 = time.monotonic()
    print("ready", flush=True)
    last, still = -1, 0
    while not done.is_set():  # until every stream has its events, or none came for 60 s
        await asyncio.wait([asyncio.ensure_future(done.wait())], timeout=1)
        got = sum(counts)
        still = still + 1 if got == last else 0
        last = got
        if still >= 60:
            short = [i for i, n in enumerate(counts) if n < per_stream]
            errors.append(
                f"stalled at {got} events: {len(short)} streams short, e.g. stream {short[0]} "
                f"with {counts[short[0]]} of {per_stream}"
            )
            break
    t1 = os.times()
    wall = time.monotonic() - w0
    for t in tasks:
        t.cancel()
    for s in opened:
        if hasattr(s, "close"):
            s.close()
    await asyncio.gather(*tasks, return_exceptions=True)
    if http is not None:
        await http.aclose()
    await async_watch.close_session()
    if errors:
        raise SystemExit(f"{impl}: {len(errors)} streams broke, first: {errors[0]}")
    cpu = (t1.user - t0.user) + (t1.system - t0.system)
    events = sum(counts)
    return {
        "impl": impl,
        "streams": streams,
        "events": events,
        "big_events": big[0],
        "bookmarks": bookmarks[0],
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 2),
        "cpu_s_per_10k_events": round(cpu / events * 10_000, 4),
        "rss_kib_per_open_stream": round(rss_open / streams, 1),
    }


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))


def stuck(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """A client that hangs: its Python stacks (faulthandler, SIGUSR1), then killed."""
    proc.send_signal(signal.SIGUSR1)
    time.sleep(1)
    proc.kill()
    _, err = proc.communicate(timeout=30)
    return {"stacks": err[-4000:]}


def run_client(
    impl: str, sim: Any, kubeconfigs: str, streams: int, changes: int, big_every: int
) -> dict[str, Any]:
    """One implementation: its client process, and `changes` changes made while it reads."""
    clusters = sim.clusters
    per_cluster = streams // len(clusters)
    # every change on a cluster reaches each of that cluster's streams once
    per_stream = changes // len(clusters)
    cmd = [
        sys.executable,
        "-m",
        "bench.watch_http",
        "--client",
        impl,
        "--dir",
        kubeconfigs,
        "--streams",
        str(streams),
        "--per-stream",
        str(per_stream),
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    if not select.select([proc.stdout], [], [], OPEN_WAIT_S)[0]:
        return {"impl": impl, "error": f"streams not open after {OPEN_WAIT_S}s", **stuck(proc)}
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        return {"impl": impl, "error": f"client did not start ({line!r})", **stuck(proc)}
    objects = {c: sim.list(c, "Kustomization") for c in clusters}
    k = 0
    for n in range(per_stream):
        for c in clusters:
            obj = objects[c][n % len(objects[c])]
            meta = obj["metadata"]
            k += 1
            big = big_every and k % big_every == 0
            sim.set_ready(
                c,
                "Kustomization",
                meta.get("namespace", ""),
                meta["name"],
                n % 2 == 0,
                message="x" * BIG if big else f"change {n}",
            )
    out, err = proc.communicate(timeout=900)
    if proc.returncode != 0 or not out.strip():
        return {"impl": impl, "error": err.strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["streams_per_cluster"] = per_cluster
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="S")
    p.add_argument("--streams", type=int, default=200)
    p.add_argument("--events", type=int, default=40_000)
    p.add_argument("--big-every", type=int, default=500)
    p.add_argument("--impl", default=",".join(IMPLS))
    p.add_argument("--client", choices=IMPLS, help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.add_argument("--per-stream", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client:
        faulthandler.register(signal.SIGUSR1)  # a stuck client: kill -USR1 PID prints its stacks
        result = asyncio.run(client_main(args.client, args.dir, args.streams, args.per_stream))
        print(json.dumps(result), flush=True)
        return

    from kubesim.gen.fleet import preset_fleet
    from kubesim.server import KubeSim

    fleet = preset_fleet(args.preset)
    with tempfile.TemporaryDirectory() as tmp, KubeSim.start(fleet, Path(tmp) / "clusters") as sim:
        clusters = len(sim.clusters)
        streams = args.streams - args.streams % clusters
        # events = changes x streams per cluster
        changes = max(clusters, args.events // (streams // clusters))
        results = []
        for impl in args.impl.split(","):
            results.append(
                run_client(impl, sim, str(Path(tmp) / "clusters"), streams, changes, args.big_every)
            )
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    base = next((r for r in results if r["impl"] == "handwritten" and "error" not in r), None)
    if base:
        for r in results:
            if "error" not in r:
                r["vs_handwritten"] = round(
                    r["cpu_s_per_10k_events"] / base["cpu_s_per_10k_events"], 3
                )
    print(
        json.dumps(
            {
                "bench": "watch_http",
                "preset": args.preset.upper(),
                "load_avg": os.getloadavg(),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
