"""Load generation for the HTTP benchmarks: wrk (C, not the bottleneck) when installed, else
a Python client with one thread per connection. Both report requests, errors, p50/p99 latency.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

WRK_DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\nRESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"errors":%d,"non2xx":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.connect + e.read + e.write + e.timeout, e.status))
end
"""


def run(url: str, headers: dict[str, str], seconds: float, connections: int) -> dict[str, Any]:
    """Hit `url` with `connections` concurrent keep-alive clients for `seconds`."""
    if shutil.which("wrk"):
        return _wrk(url, headers, seconds, connections)
    return _python(url, headers, seconds, connections)


def _wrk(url: str, headers: dict[str, str], seconds: float, connections: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "done.lua"
        script.write_text(WRK_DONE)
        cmd = ["wrk", "-t2", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s"]
        cmd += ["-s", str(script)]
        for k, v in headers.items():
            cmd += ["-H", f"{k}: {v}"]
        out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    raw = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    return _summary(raw, "wrk")


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
    }


def _python(url: str, headers: dict[str, str], seconds: float, connections: int) -> dict[str, Any]:
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    deadline = time.monotonic() + seconds

    def client(i: int) -> None:
        s = requests.Session()
        s.trust_env = False
        while time.monotonic() < deadline:
            t = time.perf_counter()
            resp = s.get(url, headers=headers)
            latencies[i].append(time.perf_counter() - t)
            errors[i] += resp.status_code != 200

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat = sorted(x for part in latencies for x in part)

    def pct(p: float) -> int:
        return int(lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1e6) if lat else 0

    raw = {
        "requests": len(lat),
        "duration_us": int((time.monotonic() - started) * 1e6),
        "p50_us": pct(50),
        "p90_us": pct(90),
        "p99_us": pct(99),
        "max_us": int(lat[-1] * 1e6) if lat else 0,
        "errors": 0,
        "non2xx": sum(errors),
    }
    return _summary(raw, "python")
