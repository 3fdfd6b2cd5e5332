"""What a traced process kept between two of its heap dumps (bench.heaptrace.sitecustomize).

    python -m bench.heaptrace.diff DIR/heap-PID.jsonl [--from I] [--to J] [--top N]

Prints each dump's RSS, glibc's heap, Python's blocks, the RSS by mapping kind and pymalloc's
arenas and free space; the traced heap's growth by allocating line and by traceback, the live objects' counts
by type, the large containers and each memo's entries and bytes, from dump I (default: the second, past the warm-up)
to dump J (default: the last).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def grown(a: list[list[Any]], b: list[list[Any]], key: int, size: int) -> list[tuple[int, Any]]:
    """(growth, key) of every entry of `b` larger than in `a`, largest first."""
    was = {_k(e[key]): e[size] for e in a}
    out = [(e[size] - was.get(_k(e[key]), 0), e[key]) for e in b]
    return sorted((g for g in out if g[0] > 0), key=lambda g: -g[0])


def _k(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--from", dest="start", type=int, default=1)
    p.add_argument("--to", type=int, default=-1)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    dumps = [json.loads(x) for x in Path(args.path).read_text().splitlines() if x.strip()]
    dumps = [d for d in dumps if "t_s" in d]
    if len(dumps) < 2:
        print(f"{args.path}: {len(dumps)} dump(s), two are needed")
        return 1
    a, b = dumps[args.start], dumps[args.to]
    mib = 1 / 2**20
    print(f"{args.path}: {a['t_s']} s -> {b['t_s']} s")
    print(
        "\n t_s      RSS   system     used     free  (MiB; glibc heap)   blocks"
        "   [heap]     anon     file  (MiB RSS)  arenas   pyfree  (MiB; pymalloc)"
    )
    for d in dumps:
        m, maps, py = d.get("malloc", {}), d.get("smaps", {}), d.get("pymalloc", {})
        cells = [d.get("rss", 0), m.get("system", 0), m.get("used", 0), m.get("free", 0)]
        row = "".join(f"{c * mib:9.1f}" for c in cells)
        kinds = "".join(f"{maps.get(k, 0) / 1024:9.1f}" for k in ("heap", "anon", "file"))
        free = (py.get("free_in_pools", 0) + py.get("free_pools", 0)) * mib
        pyrow = f"{py.get('arenas', 0):8d}{free:9.1f}"
        print(f"{d['t_s']:5.0f}{row}{'':20s}{d.get('blocks', 0):9d}{kinds}{'':11s}{pyrow}")
    if "traced" in a and "traced" in b:
        print(f"traced heap {a['traced'] * mib:.1f} -> {b['traced'] * mib:.1f} MiB")
        print("\ngrowth by line (KiB):")
        for g, line in grown(a["lines"], b["lines"], 2, 0)[: args.top]:
            print(f"  {g / 1024:9.1f}  {line}")
        print("\ngrowth by traceback (KiB), groups of 64 KiB or more:")
        for g, tb in grown(a["tracebacks"], b["tracebacks"], 2, 0)[: args.top]:
            print(f"  {g / 1024:9.1f}  " + "\n             ".join(reversed(tb)))
    if "types" in a and "types" in b:  # with HEAPTRACE_CENSUS=1 only
        print("\nlive objects by type:")
        for g, name in grown(a["types"], b["types"], 0, 1)[: args.top]:
            print(f"  {g:+9d}  {name}")
    if "containers" in b:  # with HEAPTRACE_CENSUS=1, from 2026-12-02
        print("\nlarge containers (length then -> now, path):")
        was = {(c[1], c[2]): c[0] for c in a.get("containers", [])}
        for n, kind, path in b["containers"][: args.top]:
            print(f"  {was.get((kind, path), 0):9d} -> {n:9d}  {kind:12s} {path}")
    for field in ("modules", "linecache"):  # from 2026-12-05
        if field in a and field in b:
            new = sorted(set(b[field]) - set(a[field]))
            print(f"\n{field} loaded since: {len(new)}" + "".join(f"\n  {m}" for m in new))
    print("\nmemos (entries, bytes):")
    before = {m[0]: m for m in a.get("memos", [])}
    for name, n, nbytes in b.get("memos", []):
        _n, was_n, was_b = before.get(name, (name, 0, 0))
        print(
            f"  {name or '?':28s} {was_n:7d} -> {n:7d}   {was_b * mib:7.1f} -> {nbytes * mib:7.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
