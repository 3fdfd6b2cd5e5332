"""A soak's heap diagnosis (`./dev bench soak --heaptrace DIR`): imported by every Python
process started with this directory first on PYTHONPATH and `HEAPTRACE_DIR` set. Each process
forked after start (a gunicorn worker), and with `HEAPTRACE_SELF=1` the process itself, writes, every `HEAPTRACE_EVERY_S` (300), one JSON line
to `DIR/heap-PID.jsonl` after a full collection: its RSS, Python's allocated blocks, glibc's
heap (mallinfo2: taken from the kernel, in live chunks, free), its mappings' RSS by kind and
pymalloc's arenas (heapmaps), each memo's entries and estimated bytes, with `HEAPTRACE_CENSUS=1`
the live objects by type (gc.get_objects(): it can break a request being served, see `_dump`)
and the large containers with their paths (`_containers`), and with `HEAPTRACE_FRAMES` above 0 (tracemalloc from the
fork on, that many frames: several times slower) the traced heap grouped by allocating line and
by traceback (groups of at least 64 KiB). Comparing two
lines of one process shows which allocations a growing process keeps (bench.heaptrace.diff).
"""

from __future__ import annotations

import json
import os
import threading
import time

_DIR = os.environ.get("HEAPTRACE_DIR", "")


def _dump(path: str, started: float) -> None:
    import collections
    import gc
    import sys
    import tracemalloc

    gc.collect()
    line: dict[str, object] = {"t_s": round(time.monotonic() - started, 1)}
    line["rss"] = _rss()
    line["blocks"] = sys.getallocatedblocks()
    line["malloc"] = _mallinfo()
    import heapmaps  # this directory is first on the traced process's PYTHONPATH

    line["smaps"] = heapmaps.smaps_kib()
    line["pymalloc"] = heapmaps.pymalloc()
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        line["traced"] = tracemalloc.get_traced_memory()[0]
        line["lines"] = [
            [s.size, s.count, str(s.traceback[0])] for s in snap.statistics("lineno")[:300]
        ]
        line["tracebacks"] = [
            [s.size, s.count, [str(f) for f in s.traceback]]
            for s in snap.statistics("traceback")
            if s.size >= 65536
        ]
        del snap
    if os.environ.get("HEAPTRACE_CENSUS") == "1":
        # gc.get_objects() from this thread also hands out objects another thread is still
        # building: a tuple(generator) being filled then fails its resize with SystemError
        # ("bad argument to internal function"), a 500 of the traced worker (the fifteenth L
        # soak's one 500). Off unless asked for.
        types = collections.Counter(type(o).__name__ for o in gc.get_objects())
        line["types"] = types.most_common(60)
        line["containers"] = _containers()
    # What a process loads late stays for its life: a module imported on a first error path
    # (a failover's) or a source file read into linecache for a traceback is a step in RSS.
    line["modules"] = sorted(sys.modules)
    linecache = sys.modules.get("linecache")
    line["linecache"] = sorted(getattr(linecache, "cache", {}))
    memo = sys.modules.get("common.index.read.memo")
    if memo is not None:
        line["memos"] = [
            [getattr(m, "name", type(m).__name__), len(m), getattr(m, "nbytes", 0)]
            for m in list(memo._memos)  # a diagnostic reads the registry
            if hasattr(m, "__len__")
        ]
        if os.environ.get("HEAPTRACE_MEMO_OBJECTS") == "1":
            line["memo_objects"] = [
                [getattr(m, "name", "") or type(m).__name__, *_reach(m)] for m in list(memo._memos)
            ]
    _append(path, line)


def _append(path: str, line: dict) -> None:
    """One JSON line in one write(2) on an O_APPEND descriptor: a buffered file writes a line
    longer than its buffer in pieces, and a process that exits between two (os._exit in a
    forked child, a kill) left a torn last line behind."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _reach(root: object, limit: int = 20_000_000) -> tuple[int, int, int]:
    """(objects, of them small enough for pymalloc (512 B or less), their bytes) reachable
    from `root` and not from a module: what a memo's entries pin in the heap. A memo's owner
    (a caller's access) and the interned atoms it shares are counted too."""
    import gc
    import sys

    seen: set[int] = {id(root)}
    stack = [root]
    small = small_bytes = 0
    while stack and len(seen) < limit:
        o = stack.pop()
        size = sys.getsizeof(o, 0)
        if size <= 512:
            small += 1
            small_bytes += size
        for r in gc.get_referents(o):
            if id(r) not in seen and not isinstance(r, type | type(sys)):
                seen.add(id(r))
                stack.append(r)
    return len(seen), small, small_bytes


_ATOMS = (str, bytes, int, float, bool, type(None), complex, type)
_BIG = 1000  # a container at least this long is reported (and not walked into)


def _containers(limit: int = 4_000_000) -> list[list[object]]:
    """The large containers reachable from the modules and the other threads' frames, each
    with the first path found to it ("module.key.key>Type.key", an object's attributes as
    keys), largest first (top 60). Walks with
    gc.get_referents, so it also finds what gc.get_objects() does not list: containers of
    atoms (untracked by the collector) and objects frozen by gc.freeze() (the loaded app)."""
    import gc
    import sys
    import types

    seen: set[int] = set()
    found: list[list[object]] = []
    todo: list[tuple[object, str, int]] = []
    for name, mod in list(sys.modules.items()):
        if isinstance(mod, types.ModuleType) and not name.startswith(("_", "encodings")):
            todo.append((vars(mod), name, 0))
    me = threading.get_ident()
    for tid, frame in sys._current_frames().items():
        if tid == me:
            continue  # this walk's own locals
        f: types.FrameType | None = frame
        for _ in range(40):
            if f is None:
                break
            todo.append((f.f_locals, f"thread{tid}.{f.f_code.co_name}", 0))
            f = f.f_back
    while todo and len(seen) < limit:
        obj, path, depth = todo.pop()
        kind = type(obj)  # never the object's own attributes: a proxy's would run code
        if id(obj) in seen or issubclass(kind, _ATOMS) or depth > 24:
            continue
        seen.add(id(obj))
        n = -1
        if (
            issubclass(kind, dict | list | set | frozenset | tuple)
            or kind.__module__ == "collections"
        ):
            try:
                n = len(obj)  # type: ignore[arg-type]
            except Exception:
                n = -1
        if n >= _BIG:
            found.append([n, kind.__name__, path[:300]])
            continue
        if issubclass(kind, dict):
            for k, v in list(obj.items()):  # type: ignore[attr-defined]
                if not issubclass(type(v), _ATOMS):
                    todo.append((v, f"{path}.{str(k)[:40]}", depth + 1))
            continue
        if issubclass(kind, types.ModuleType):
            continue  # reached from sys.modules under its own name
        try:
            attrs = object.__getattribute__(obj, "__dict__")
        except Exception:
            attrs = None
        for ref in gc.get_referents(obj):
            if issubclass(type(ref), _ATOMS):
                continue
            if ref is attrs:
                todo.append((ref, path, depth + 1))
            else:
                todo.append((ref, f"{path}>{type(ref).__name__}", depth + 1))
    found.sort(key=lambda e: -int(e[0]))  # type: ignore[call-overload]
    return [*found[:60], [len(seen), "visited", ""]]


def _rss() -> int:
    """The process's resident bytes."""
    with open("/proc/self/status") as f:
        for row in f:
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) * 1024
    return 0


def _mallinfo() -> dict[str, int]:
    """glibc's heap over every arena (mallinfo2): `system` taken from the kernel (arenas and
    mmapped chunks), `used` in live chunks, `free` held in free chunks; {} elsewhere."""
    import ctypes
    import ctypes.util

    class Info(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in [
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            ]
        ]

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = Info
    i = fn()
    return {
        "system": i.arena + i.hblkhd,
        "used": i.uordblks + i.hblkhd,
        "free": i.fordblks,
        "mmapped": i.hblkhd,
    }


def _loop() -> None:
    every = float(os.environ.get("HEAPTRACE_EVERY_S", "300"))
    path = os.path.join(_DIR, f"heap-{os.getpid()}.jsonl")
    started = time.monotonic()
    while True:
        time.sleep(every)
        try:
            _dump(path, started)
        except Exception as e:  # a diagnostic never takes the process down
            _append(path, {"error": repr(e)})


def _start() -> None:
    import tracemalloc

    frames = int(os.environ.get("HEAPTRACE_FRAMES", "0"))
    if frames > 0:  # costly: a traced worker serves several times slower
        tracemalloc.start(frames)
    threading.Thread(target=_loop, daemon=True, name="heaptrace").start()


if _DIR:
    os.register_at_fork(after_in_child=_start)
    if os.environ.get("HEAPTRACE_SELF") == "1":  # a process that forks no workers (a watcher)
        _start()
