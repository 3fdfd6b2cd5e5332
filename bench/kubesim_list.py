"""Benchmark: kubesim list throughput (objects/s) and memory at a preset, printed as JSON.

    ./dev bench kubesim_list --preset L [--read-clusters N] [--limit 500] [--parse]

Starts kubesim in-process, pages through every Flux/Istio kind and namespaces of the first N
clusters with `limit`, over HTTPS keep-alive (one client thread), and reports objects/s and the
process's peak RSS. `--parse` also json-decodes each page on the client (what a collector pays).
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from typing import Any

import requests

from kubesim.gen.fleet import preset_fleet
from kubesim.server import KubeSim


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="L")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--read-clusters", type=int, default=0, help="0 = all")
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--parse", action="store_true")
    args = ap.parse_args()
    fleet = preset_fleet(args.preset, args.seed)
    with tempfile.TemporaryDirectory() as tmp, KubeSim.start(fleet, kubeconfig_dir=tmp) as sim:
        s = requests.Session()
        s.trust_env = False
        s.verify = str(sim.ca_file(tmp))
        s.headers["Authorization"] = f"Bearer {sim.collector_token}"
        paths = ["/api/v1/namespaces"] + [
            f"/apis/{r.group}/{r.version}/{r.plural}" for r in sim.catalog if r.status_rule
        ]
        clusters = sim.clusters[: args.read_clusters or None]
        cold = _walk(s, sim, clusters, paths, args)  # first pass generates each cluster
        warm = _walk(s, sim, clusters, paths, args)
    print(
        json.dumps(
            {
                "benchmark": "kubesim_list",
                "preset": args.preset,
                "clusters_read": len(clusters),
                "limit": args.limit,
                "client_parses_json": args.parse,
                "objects": warm[0],
                "pages": warm[1],
                "cold_seconds_incl_generation": round(cold[2], 2),
                "warm_seconds": round(warm[2], 2),
                "objects_per_s": round(warm[0] / warm[2]),
                "cold_objects_per_s": round(cold[0] / cold[2]),
                "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


def _walk(
    s: requests.Session, sim: KubeSim, clusters: list[str], paths: list[str], args: Any
) -> tuple[int, int, float]:
    """(objects, pages, seconds) of paging through every path of every cluster."""
    objects = pages = 0
    t0 = time.perf_counter()
    for c in clusters:
        base = sim.url(c)
        for path in paths:
            token = ""
            while True:
                params = {"limit": args.limit, **({"continue": token} if token else {})}
                resp = s.get(base + path, params=params)
                resp.raise_for_status()
                pages += 1
                if args.parse:
                    body = resp.json()
                    objects += len(body["items"])
                    token = body["metadata"].get("continue", "")
                else:
                    objects += resp.content.count(b'"uid":"')
                    token = _continue(resp.content)
                if not token:
                    break
    return objects, pages, time.perf_counter() - t0


def _continue(body: bytes) -> str:
    """The continue token from a list answer's head, without parsing the items."""
    head = body[: body.find(b',"items":')] + b"}"
    return str(json.loads(head).get("metadata", {}).get("continue", ""))


if __name__ == "__main__":
    main()
