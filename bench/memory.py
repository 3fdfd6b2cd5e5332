"""Benchmark: Redis memory per row at fleets M and L (rows, indexes, counts, grants).

    ./dev bench memory [--presets M,L] [--churn 1.0] [--hours 24]

Loads each fleet into a fresh private redis-server (bench.fleetload: the collector's store
code) and reports `used_memory` above the empty server per row, with where it goes: MEMORY
USAGE of one cluster's keys by type, the average encoded member length. Target: <= 400 B/row
(with edges, `dependents`, the per-namespace counts and the time index; 350 before relations
were stored). Then a day of transitions under bench.history_churn's model (`--churn` % of rows
an hour for `--hours`, through the real writer) and the memory it added per row of the fleet:
the transition history (target: <= 60 B/row) plus the rows' own moves in the time index.
Labels (target: <= 40 B/row): one cluster's row zsets rebuilt without the labels field, with
the model measured there (labels per row, distinct keys and values).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import redis

from bench import report
from bench.fleetload import load_fleet
from bench.history_churn import churn
from common.index import keys, rows
from common.redis_server import start_redis_server

TARGET_BYTES = 400  # with edges and dependents (issue #15; 350 before relations were stored)
LABELS_TARGET_BYTES = 40  # issue #40: the rows' labels, on top of the index
HISTORY_TARGET_BYTES = 60  # issue #36: history under the churn model, on top of the index


def breakdown(r: redis.Redis, cluster: str) -> dict[str, int]:
    """Bytes held by each key of one cluster (MEMORY USAGE, all samples)."""
    parts = {
        "rows": keys.rows(cluster),
        "counts": keys.counts(cluster),
        "names": keys.names(cluster),
        "rbac": keys.rbac(cluster),
        "sync": keys.sync(cluster),
    }
    out = {name: int(r.memory_usage(key, samples=0) or 0) for name, key in parts.items()}
    out["dependents"] = sum(
        int(r.memory_usage(keys.dependents(cluster, b), samples=0) or 0)
        for b in range(keys.DEPENDENTS_BUCKETS)
    )
    out["nscounts"] = sum(
        int(r.memory_usage(keys.nscounts(cluster, b), samples=0) or 0)
        for b in range(keys.NSCOUNTS_BUCKETS)
    )
    windows = r.hkeys(keys.timeline(cluster))
    out["time_index"] = int(r.memory_usage(keys.timeline(cluster), samples=0) or 0) + sum(
        int(r.memory_usage(keys.timeline_window(cluster, w.decode()), samples=0) or 0)
        for w in windows
    )
    out["status_indexes"] = sum(
        int(r.memory_usage(keys.by_status(cluster, s), samples=0) or 0)
        for s in keys.INDEXED_STATUSES
    )
    return out


def labels_usage(r: redis.Redis, cluster: str) -> dict[str, Any]:
    """What one cluster's labels cost: its row zsets (all rows, and the status indexes that
    hold copies) rebuilt in scratch keys without the members' labels field, MEMORY USAGE
    compared; and the model (labels per row, distinct keys and values, field length)."""
    label_at = rows.FIELDS.index("labels")
    cost, scratch = 0, "bench:labels:scratch"
    sources = [keys.rows(cluster), *(keys.by_status(cluster, s) for s in keys.INDEXED_STATUSES)]
    per_row: list[int] = []
    field_len: list[int] = []
    seen_keys: set[str] = set()
    seen_values: set[str] = set()
    for i, key in enumerate(sources):
        members = r.zrange(key, 0, -1)
        if not members:
            continue
        bare = []
        for m in members:
            parts = m.split(b"\x00")
            if i == 0 and len(parts) > label_at:
                field_len.append(len(parts[label_at]))
                got = rows.labels_of(m)
                per_row.append(len(got))
                seen_keys.update(got)
                seen_values.update(got.values())
            bare.append(b"\x00".join(parts[:label_at] + [b""] * (len(parts) > label_at)))
        r.delete(scratch)
        for k in range(0, len(bare), 1000):
            r.zadd(scratch, dict.fromkeys(bare[k : k + 1000], 0))
        cost += int(r.memory_usage(key, samples=0) or 0) - int(
            r.memory_usage(scratch, samples=0) or 0
        )
    r.delete(scratch)
    n = r.zcard(keys.rows(cluster)) or 1
    return {
        "labels_bytes_per_row": round(cost / n, 1),
        "labels_per_row_avg": round(statistics.mean(per_row), 1) if per_row else 0,
        "labels_field_len_avg": round(statistics.mean(field_len), 1) if field_len else 0,
        "label_keys_distinct": len(seen_keys),
        "label_values_distinct": len(seen_values),
    }


def history_usage(r: redis.Redis, cluster: str) -> tuple[int, int]:
    """(history keys, their MEMORY USAGE bytes) of one cluster."""
    found = list(r.scan_iter(match=keys.history_pattern(cluster), count=1000))
    return len(found), sum(int(r.memory_usage(k, samples=0) or 0) for k in found)


def measure(
    preset: str, churn_pct: float = 1.0, hours: int = 24, distinct: bool = False
) -> dict[str, Any]:
    server = start_redis_server()
    try:
        r = redis.Redis.from_url(server.url)
        empty = int(r.info("memory")["used_memory"])
        loaded = load_fleet(server.url, preset)
        info = r.info("memory")
        used = int(info["used_memory"]) - empty
        cluster = sorted(x.decode() for x in r.hkeys(keys.CLUSTERS))[0]
        members = r.zrange(keys.rows(cluster), 0, -1)
        parts = breakdown(r, cluster)
        labelled = labels_usage(r, cluster)
        n = len(members)
        churned: dict[str, Any] = {}
        if churn_pct > 0:
            churned = churn(r, churn_pct, hours, distinct)
            after = int(r.info("memory")["used_memory"]) - empty
            hkeys, hbytes = history_usage(r, cluster)
            churned.update(
                # the history keys (MEMORY USAGE of one cluster's, over its rows), and all
                # that the day added (with the rows' moves in the status and time indexes)
                history_bytes_per_row=round(hbytes / n, 1),
                churn_added_bytes_per_row=round((after - used) / loaded["rows"], 1),
                history_keys_in_one_cluster=hkeys,
                history_key_bytes_avg=round(hbytes / hkeys) if hkeys else 0,
                bytes_per_row_after_churn=round(after / loaded["rows"]),
            )
        return {
            "preset": preset,
            **loaded,
            "used_memory_mb": round(used / 2**20, 1),
            "bytes_per_row": round(used / loaded["rows"]),
            "rss_mb": round(int(info["used_memory_rss"]) / 2**20, 1),
            "member_len_avg": round(statistics.mean(len(m) for m in members), 1),
            "per_row_in_one_cluster": {k: round(v / n) for k, v in parts.items()},
            **labelled,
            **churned,
        }
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--presets", default="M,L")
    ap.add_argument("--churn", type=float, default=1.0, help="%% of rows transitioning an hour")
    ap.add_argument("--hours", type=int, default=24, help="hours of churn")
    ap.add_argument(
        "--distinct", action="store_true", help="churn distinct rows (the worst case for keys)"
    )
    ap.add_argument("--no-doc", action="store_true", help="print only; do not append the table")
    args = ap.parse_args()
    results = [measure(p, args.churn, args.hours, args.distinct) for p in args.presets.split(",")]
    rows = []
    for m in results:
        p = m["per_row_in_one_cluster"]
        rows.append(
            (
                m["preset"],
                m["rows"],
                m["used_memory_mb"],
                f"**{m['bytes_per_row']}**",
                m["member_len_avg"],
                p["rows"],
                p["status_indexes"],
                p["names"],
                p["dependents"],
                p.get("nscounts", 0),
                p.get("time_index", 0),
                p["counts"] + p["sync"],
                p["rbac"],
                "yes" if m["bytes_per_row"] <= TARGET_BYTES else "NO",
                m.get("history_bytes_per_row", "-"),
                m.get("churn_added_bytes_per_row", "-"),
                m.get("history_key_bytes_avg", "-"),
                "yes" if m.get("history_bytes_per_row", 0) <= HISTORY_TARGET_BYTES else "NO",
                m["labels_bytes_per_row"],
                f"{m['labels_per_row_avg']} labels, {m['label_keys_distinct']} keys, "
                f"{m['label_values_distinct']} values, field {m['labels_field_len_avg']} B",
                "yes" if m["labels_bytes_per_row"] <= LABELS_TARGET_BYTES else "NO",
            )
        )
    report.record(
        "memory: Redis bytes per row",
        {"benchmark": "memory", "results": results},
        (
            "fleet",
            "rows",
            "used_memory MB",
            "bytes/row",
            "member bytes",
            "rows zset B/row",
            "status idx B/row",
            "name idx B/row",
            "dependents B/row",
            "per-ns counts B/row",
            "time index B/row",
            "counts+sync B/row",
            "grants B/row",
            f"<= {TARGET_BYTES}",
            f"history B/row ({args.churn} %/h x {args.hours} h"
            + (", distinct rows)" if args.distinct else ", fail and recover)"),
            "all the churn added B/row",
            "bytes per history key",
            f"history <= {HISTORY_TARGET_BYTES}",
            "labels B/row (rows and status indexes)",
            "labels model (one cluster)",
            f"labels <= {LABELS_TARGET_BYTES}",
        ),
        rows,
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
