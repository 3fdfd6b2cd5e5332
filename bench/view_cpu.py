"""Benchmark: worker CPU per list request, in process (no HTTP, no load generator), with the
top functions by own time: what a gunicorn worker spends on one page.

    ./dev bench view_cpu [--preset L | --redis-url URL] [--requests 300]

Calls the `/api/v1/objects` view and Flask's JSON response inside a request context for the
admin, team-member and single-namespace profiles, and the one-GET reference view, measuring
process CPU time per request; then one cProfile pass for the admin. Prints only (no table).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from typing import Any

import redis

from bench.fleetload import load_fleet
from bench.services import DAY_S
from common.redis_server import start_redis_server
from common.settings import Settings
from query.app import create_app

PROFILES = {
    "cluster admin": ("admin-0", "fleet-admins"),
    "team member": ("dev-team-00", "team-00"),
    "single-namespace user": ("solo", ""),
}


def cpu_per_request(app: Any, view: Any, headers: dict[str, str], n: int) -> float:
    def one() -> None:
        with app.test_request_context(
            "/api/v1/objects?limit=50", headers=headers, environ_base={"REMOTE_ADDR": "127.0.0.1"}
        ):
            app.make_response(view())

    for _ in range(20):
        one()
    t = time.process_time()
    for _ in range(n):
        one()
    return (time.process_time() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="L")
    ap.add_argument("--redis-url", default="")
    ap.add_argument("--requests", type=int, default=300)
    args = ap.parse_args()
    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        if server is not None:
            load_fleet(url, args.preset)
        settings = Settings(
            redis_url=url,
            auth_mode="header",
            trusted_proxy_cidrs=("127.0.0.1/32",),
            rbac_max_age_s=DAY_S,
            stale_after_s=DAY_S,
        )
        app = create_app(settings)
        view = app.view_functions["api.list_objects"]
        out: dict[str, Any] = {"benchmark": "view_cpu"}
        for name, (user, group) in PROFILES.items():
            h = {"X-Remote-User": user, **({"X-Remote-Group": group} if group else {})}
            out[f"{name} ms"] = round(cpu_per_request(app, view, h, args.requests) * 1e3, 3)
        r = redis.Redis.from_url(url)
        t = time.process_time()
        for _ in range(args.requests):
            with app.test_request_context("/ref"):
                app.make_response({"value": (r.get("fs:bench:ref") or b"").decode()})
        out["one-GET view ms"] = round((time.process_time() - t) / args.requests * 1e3, 3)
        prof = cProfile.Profile()
        h = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
        prof.runcall(cpu_per_request, app, view, h, args.requests)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(15)
        print(text.getvalue())
        print(json.dumps(out))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
