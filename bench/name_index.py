"""Benchmark: Redis time of one cluster's name-filtered scan, index against row scan.

    ./dev bench name_index [--rows 6500] [--distinct 40,6500]

One cluster of `--rows` rows with `--distinct` distinct names (generated fleets reuse a few
names; real fleets have up to one per row), in a private redis-server. Per case: Redis CPU
microseconds per call (INFO commandstats, EVALSHA) of NAMED (the name index: one plain search
of the name dictionary, then only the matching rows) and of SCAN (every row, the fallback), and
of a Lua pass over HKEYS (the alternative to the dictionary), for a substring matching ~0.3% of
rows and one matching none.
"""

from __future__ import annotations

import argparse
import random

import redis

from bench import report
from common.index import keys
from common.index.read import lua as reader_lua
from common.redis_server import start_redis_server
from tests.support.index_fleet import KINDS, make_row, write_rows

HKEYS_LUA = r"""
local n = 0
for _, k in ipairs(redis.call("HKEYS", KEYS[1])) do
  if string.find(string.lower(k), ARGV[1], 1, true) then n = n + 1 end
end
return n
"""


def fill(r: redis.Redis, rows: int, distinct: int, rnd: random.Random) -> None:
    names = [f"svc-{rnd.randrange(16**6):06x}-{i}" for i in range(distinct)]
    out, ns = [], 0
    for i in range(rows):
        name = "vmagent" if i % 300 == 0 else names[i % distinct]
        if i % len(KINDS) == 0:
            ns += 1
        out.append(make_row("c00", f"ns-{ns % 2000:04d}", KINDS[i % len(KINDS)], name))
    write_rows(r, out)


def usec_per_call(r: redis.Redis, sha: str, ks: list[str], args: list[str], n: int = 50) -> float:
    r.config_resetstat()
    for _ in range(n):
        r.evalsha(sha, len(ks), *ks, *args)
    # EVALSHA's time includes the commands the script ran (also listed on their own).
    return round(float(r.info("commandstats")["cmdstat_evalsha"]["usec"]) / n, 1)


def measure(r: redis.Redis, rows: int, distinct: int) -> list[tuple[object, ...]]:
    r.flushall()
    fill(r, rows, distinct, random.Random(1))
    named, scan = r.script_load(reader_lua.NAMED), r.script_load(reader_lua.SCAN)
    hk = r.script_load(HKEYS_LUA)
    out = []
    for sub in ("vm", "zzz"):
        args = ["51", "100000", "", sub, "-", "+", ""]
        k = [keys.rows("c00"), keys.names("c00")]
        out.append(
            (
                rows,
                r.hlen(keys.names("c00")),
                sub,
                usec_per_call(r, named, k, ["256", *args]),
                usec_per_call(r, scan, k[:1], args),
                usec_per_call(r, hk, k[1:], [sub]),
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=6500)
    ap.add_argument("--distinct", default="40,6500")
    ap.add_argument("--no-doc", action="store_true", help="print only; do not append the table")
    args = ap.parse_args()
    server = start_redis_server()
    try:
        r = redis.Redis.from_url(server.url)
        table = [t for d in args.distinct.split(",") for t in measure(r, args.rows, int(d))]
    finally:
        server.stop()
    report.record(
        "name_index: Redis time of one cluster's name-filtered page",
        {"benchmark": "name_index", "results": [list(t) for t in table]},
        (
            "rows",
            "distinct names",
            "substring",
            "NAMED us/page",
            "SCAN us/page",
            "Lua over HKEYS us",
        ),
        table,
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
