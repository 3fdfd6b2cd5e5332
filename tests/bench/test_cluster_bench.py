"""`./dev bench cluster --presets S` end to end, briefly (one profile, a fraction of a second):
the benchmark that records fleet XL still loads a fleet into a real Redis Cluster, serves a
profile from it against the one-GET reference and asks it right after writes. It had broken
silently against renamed helpers of bench.query, and was found only after a 13-minute XL load."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO


def test_the_growth_run_loads_serves_and_reports() -> None:
    argv = [sys.executable, "-m", "bench.cluster", "--presets", "S", "--seconds", "0.3"]
    argv += ["--slices", "1", "--warmup", "0.1", "--writes", "2"]
    argv += ["--profile", "cluster admin", "--no-doc", "--masters", "3"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    run = record["runs"]["S"]
    assert run["load"]["objects"] > 3000
    assert sum(s["leaf_clusters"] for s in run["shards"]) == 10
    [admin] = [x for x in run["results"] if x["profile"] == "cluster admin"]
    assert admin["rps"] > 0 and admin["redis_cmds_per_req"] > 0
    assert run["after_write"]["writes"] == 2
