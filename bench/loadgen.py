"""Load generation for the HTTP benchmarks: wrk (C, not the bottleneck) when installed, else
a Python client with one thread per connection. Both report requests, errors, p50/p99 latency.

`run` hits one URL; `run_cycles` has every connection ask a list of URLs in turn (the web view's
page: its list call, then its facets call) and reports per *cycle* (one pass over the list):
cycles/s and the latency of a whole cycle, from sending its first request to the end of its last.
"""

from __future__ import annotations

import bisect
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

QUANTILES = 1000
"""Latency quantiles each run reports (at the midpoints of 1,000 equal slices): what `merge`
combines the percentiles of several runs from."""

WRK_DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  local q = {}
  for i = 1, QUANTILES do q[i] = latency:percentile(100 * (i - 0.5) / QUANTILES) end
  io.write(string.format(
    '\nRESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"errors":%d,"non2xx":%d,"quantiles_us":[%s]}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.connect + e.read + e.write + e.timeout, e.status,
    table.concat(q, ",")))
end
"""


# Each wrk thread drives one connection (`-t` = `-c`), so a thread's requests are one
# connection's and alternate over PATHS in order; a cycle is timed from the request() call that
# starts it to the one that starts the next (closed loop: the next request is asked for as soon
# as the previous response is complete), with CLOCK_MONOTONIC through LuaJIT's FFI.
WRK_CYCLES = r"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } fs_timespec;
int clock_gettime(int clk_id, fs_timespec *tp);
]]
local ts = ffi.new("fs_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local paths = {PATHS}
local threads = {}
local sent, started = 0, nil
cycles = {}

function setup(thread)
  table.insert(threads, thread)
end

function request()
  local k = sent % #paths
  if k == 0 then
    local t = now_us()
    if started then cycles[#cycles + 1] = t - started end
    started = t
  end
  sent = sent + 1
  return wrk.format(nil, paths[k + 1])
end

done = function(summary, latency, requests)
  local all = {}
  for _, thread in ipairs(threads) do
    for _, v in ipairs(thread:get("cycles")) do all[#all + 1] = v end
  end
  table.sort(all)
  local function pct(p)
    if #all == 0 then return 0 end
    return all[math.min(#all, math.floor(#all * p / 100) + 1)]
  end
  local e = summary.errors
  local q = {}
  for i = 1, QUANTILES do q[i] = math.floor(pct(100 * (i - 0.5) / QUANTILES)) end
  io.write(string.format(
    '\nRESULT {"requests":%d,"http_requests":%d,"timed_cycles":%d,"duration_us":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"errors":%d,"non2xx":%d,' ..
    '"quantiles_us":[%s]}\n',
    math.floor(summary.requests / #paths), summary.requests, #all, summary.duration,
    pct(50), pct(90), pct(99), all[#all] or 0,
    e.connect + e.read + e.write + e.timeout, e.status, table.concat(q, ",")))
end
"""


def run(url: str, headers: dict[str, str], seconds: float, connections: int) -> dict[str, Any]:
    """Hit `url` with `connections` concurrent keep-alive clients for `seconds`."""
    if shutil.which("wrk"):
        return _wrk(url, headers, seconds, connections)
    return _python([url], headers, seconds, connections)


def run_cycles(
    urls: Sequence[str], headers: dict[str, str], seconds: float, connections: int
) -> dict[str, Any]:
    """Like `run`, but each client asks `urls` in turn (same host, same headers): `requests`,
    `rps` and the latencies are per cycle (one request to each URL, one after the other);
    `http_requests` counts the requests."""
    if len(urls) == 1:
        res = run(urls[0], headers, seconds, connections)
        return {**res, "http_requests": res["requests"]}
    if len({urllib.parse.urlsplit(u)[:2] for u in urls}) != 1:
        raise ValueError(f"run_cycles: one scheme and host for all URLs, not {urls}")
    if shutil.which("wrk"):
        return _wrk_cycles(urls, headers, seconds, connections)
    return _python(urls, headers, seconds, connections)


def _wrk(url: str, headers: dict[str, str], seconds: float, connections: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "done.lua"
        script.write_text(WRK_DONE.replace("QUANTILES", str(QUANTILES)))
        cmd = ["wrk", "-t2", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s"]
        cmd += ["-s", str(script)]
        for k, v in headers.items():
            cmd += ["-H", f"{k}: {v}"]
        out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    raw = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    return _summary(raw, "wrk")


def _wrk_cycles(
    urls: Sequence[str], headers: dict[str, str], seconds: float, connections: int
) -> dict[str, Any]:
    paths = []
    for u in urls:
        parts = urllib.parse.urlsplit(u)
        paths.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    lua = WRK_CYCLES.replace("PATHS", ", ".join(json.dumps(p) for p in paths))
    lua = lua.replace("QUANTILES", str(QUANTILES))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "cycles.lua"
        script.write_text(lua)
        cmd = ["wrk", f"-t{connections}", f"-c{connections}", f"-d{max(1, round(seconds))}s"]
        cmd += ["--timeout", "10s", "-s", str(script)]
        for k, v in headers.items():
            cmd += ["-H", f"{k}: {v}"]
        out = subprocess.run([*cmd, urls[0]], capture_output=True, text=True, check=True).stdout
    raw = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    return {**_summary(raw, "wrk"), "http_requests": raw["http_requests"]}


def _summary(raw: dict[str, Any], tool: str) -> dict[str, Any]:
    secs = raw["duration_us"] / 1e6
    return {
        "tool": tool,
        "requests": raw["requests"],
        "rps": round(raw["requests"] / secs, 1),
        "p50_ms": round(raw["p50_us"] / 1000, 2),
        "p90_ms": round(raw["p90_us"] / 1000, 2),
        "p99_ms": round(raw["p99_us"] / 1000, 2),
        "max_ms": round(raw["max_us"] / 1000, 2),
        "errors": raw["errors"] + raw["non2xx"],
        "quantiles_ms": [q / 1000 for q in raw["quantiles_us"]],
    }


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' results as one (as if run back to back): requests, errors and durations
    added up, latency percentiles from their quantiles, each run weighted by its requests."""
    if len(parts) == 1:
        return dict(parts[0])
    secs = sum(p["requests"] / p["rps"] for p in parts if p["rps"])
    weighted = sorted(
        (q, p["requests"] / len(p["quantiles_ms"])) for p in parts for q in p["quantiles_ms"]
    )
    values: list[float] = [q for q, _ in weighted]
    cumulative = list(itertools.accumulate(w for _, w in weighted))

    def pct(x: float) -> float:
        if not values:
            return 0.0
        return values[
            min(len(values) - 1, bisect.bisect_left(cumulative, cumulative[-1] * x / 100))
        ]

    out = {
        "tool": parts[0]["tool"],
        "requests": sum(p["requests"] for p in parts),
        "rps": round(sum(p["requests"] for p in parts) / secs, 1) if secs else 0.0,
        "p50_ms": round(pct(50), 2),
        "p90_ms": round(pct(90), 2),
        "p99_ms": round(pct(99), 2),
        "max_ms": max(p["max_ms"] for p in parts),
        "errors": sum(p["errors"] for p in parts),
        "quantiles_ms": [pct(100 * (i + 0.5) / QUANTILES) for i in range(QUANTILES)],
    }
    if "http_requests" in parts[0]:
        out["http_requests"] = sum(p["http_requests"] for p in parts)
    return out


def _python(
    urls: Sequence[str], headers: dict[str, str], seconds: float, connections: int
) -> dict[str, Any]:
    """One thread per connection, each asking `urls` in turn; latencies per pass over them."""
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    deadline = time.monotonic() + seconds

    def client(i: int) -> None:
        s = requests.Session()
        s.trust_env = False
        while time.monotonic() < deadline:
            t = time.perf_counter()
            for url in urls:
                resp = s.get(url, headers=headers)
                errors[i] += resp.status_code != 200
            latencies[i].append(time.perf_counter() - t)

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat = sorted(x for part in latencies for x in part)

    def pct(p: float) -> int:
        return int(lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1e6) if lat else 0

    step = len(lat) / QUANTILES
    raw = {
        "quantiles_us": [int(lat[int(step * (i + 0.5))] * 1e6) for i in range(QUANTILES)]
        if lat
        else [0] * QUANTILES,
        "requests": len(lat),
        "duration_us": int((time.monotonic() - started) * 1e6),
        "p50_us": pct(50),
        "p90_us": pct(90),
        "p99_us": pct(99),
        "max_us": int(lat[-1] * 1e6) if lat else 0,
        "errors": 0,
        "non2xx": sum(errors),
    }
    res = _summary(raw, "python")
    return {**res, "http_requests": res["requests"] * len(urls)} if len(urls) > 1 else res
