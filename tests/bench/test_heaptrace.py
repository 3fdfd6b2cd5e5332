"""bench.heaptrace: a process started with the diagnosis on writes one dump per period from
each child it forks (never from itself), with its RSS by mapping kind and pymalloc's arenas
(heapmaps), and the diff tool reads what grew between two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.heaptrace import diff, heapmaps

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import os, time
from common.index.read import memo
m = memo.Memo(100, "probe")
pid = os.fork()
if pid == 0:
    keep = []
    for i in range(int(os.environ["ROUNDS"])):
        keep.append([bytes(2000) for _ in range(2000)])
        m.put(i, [str(j) * 3 for j in range(500)])
        if i == 1:
            import colorsys  # loaded late: the dumps after this one list it
        time.sleep(float(os.environ["HEAPTRACE_EVERY_S"]) * 1.5)
    os._exit(0)
os.waitpid(pid, 0)
"""


def run(
    tmp_path: Path, rounds: int, frames: int, census: bool = False, memo_objects: bool = False
) -> list[dict]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "bench" / "heaptrace"), str(REPO)]),
        "HEAPTRACE_DIR": str(tmp_path),
        "HEAPTRACE_EVERY_S": "0.4",
        "HEAPTRACE_FRAMES": str(frames),
        "ROUNDS": str(rounds),
        "HEAPTRACE_CENSUS": "1" if census else "0",
        "HEAPTRACE_MEMO_OBJECTS": "1" if memo_objects else "0",
    }
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, timeout=60)
    files = list(tmp_path.glob("heap-*.jsonl"))
    assert len(files) == 1, files  # the child's only: the parent that forked it dumps nothing
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def test_dumps_follow_a_growing_child(tmp_path: Path) -> None:
    dumps = run(tmp_path, rounds=4, frames=0)
    assert len(dumps) >= 3
    assert all("traced" not in d and "error" not in d for d in dumps)
    first, last = dumps[0], dumps[-1]
    assert last["blocks"] > first["blocks"]
    assert last["malloc"]["used"] - first["malloc"]["used"] >= 2 * 2000 * 2000  # two rounds kept
    memos = {name: n for name, n, _bytes in last["memos"]}
    assert memos["probe"] >= 3
    assert last["smaps"]["anon"] + last["smaps"]["heap"] >= 2 * 2000 * 2000 / 1024
    assert last["pymalloc"]["arenas"] >= 1 and last["pymalloc"]["live"] > 0
    # no census of the live objects unless asked: gc.get_objects() from the dump's thread can
    # fail a tuple another thread is building (a SystemError, a 500 of the traced worker)
    assert all("types" not in d for d in dumps)


def test_the_census_by_type_when_asked(tmp_path: Path, capsys) -> None:
    dumps = run(tmp_path, rounds=3, frames=0, census=True)
    assert all(dict(d["types"]).get("list", 0) > 0 for d in dumps)
    assert diff.main([str(next(tmp_path.glob("heap-*.jsonl"))), "--from", "0"]) == 0
    assert "live objects by type:" in capsys.readouterr().out


def test_heapmaps_see_small_objects_in_arenas_and_every_mapping_kind() -> None:
    before = heapmaps.pymalloc()
    kept = [{"i": i} for i in range(200_000)]  # ~50 MB of small dicts: pymalloc's
    after = heapmaps.pymalloc()
    assert after["arenas"] - before["arenas"] >= 20
    assert after["live"] - before["live"] >= 20 * 2**20
    maps = heapmaps.smaps_kib()
    assert maps["file"] > 0 and maps["anon"] + maps["heap"] >= 20 * 1024
    assert heapmaps.smaps_kib(2**22 + 1) == {}  # no such process
    del kept


def test_pymalloc_figures_parse_cpython_s_report() -> None:
    text = """Small block threshold = 512, in 32 size classes.
# arenas allocated total           =                4,013
# arenas reclaimed                 =                3,901
# arenas highwater mark            =                  140
# arenas allocated current         =                  112
112 arenas * 1048576 bytes/arena   =          117,440,512

# bytes in allocated blocks        =           98,765,432
# bytes in available blocks        =            1,234,567
37 unused pools * 16384 bytes      =              606,208
"""
    assert heapmaps.parse_pymalloc(text) == {
        "arenas_max": 140,
        "arenas": 112,
        "live": 98_765_432,
        "free_in_pools": 1_234_567,
        "free_pools": 37 * 16384,
    }


def test_traced_growth_is_named_by_line(tmp_path: Path, capsys) -> None:
    dumps = run(tmp_path, rounds=4, frames=2)
    assert dumps[-1]["traced"] > dumps[0]["traced"]
    assert diff.main([str(next(tmp_path.glob("heap-*.jsonl"))), "--from", "0"]) == 0
    out = capsys.readouterr().out
    grew = out.split("growth by line (KiB):")[1].splitlines()[1]
    assert "<string>:9" in grew  # the child's `keep.append` line, first
    # at least one round kept between the first dump and the last (how many depends on how
    # late a loaded machine runs the dumps: two were asked for here until it failed under load)
    assert float(grew.split()[0]) >= 2000 * 2000 / 1024


def test_grown_keeps_only_growth() -> None:
    a = [[100, 1, "x"], [50, 1, "y"]]
    b = [[300, 2, "x"], [10, 1, "y"], [40, 1, "z"]]
    assert diff.grown(a, b, key=2, size=0) == [(200, "x"), (40, "z")]


def test_modules_loaded_late_and_what_each_memo_pins(tmp_path: Path, capsys) -> None:
    dumps = run(tmp_path, rounds=4, frames=0, memo_objects=True)
    first, last = dumps[0], dumps[-1]
    assert "colorsys" not in first["modules"] and "colorsys" in last["modules"]
    pinned = {name: (n, small) for name, n, small, _bytes in last["memo_objects"]}
    # each entry a list of 500 short strings: at least that many objects per entry kept
    assert pinned["probe"][0] >= 500 * 3 and pinned["probe"][1] >= 500 * 3
    first_pinned = {name: n for name, n, _small, _bytes in first["memo_objects"]}
    assert first_pinned["probe"] < pinned["probe"][0]
    assert diff.main([str(next(tmp_path.glob("heap-*.jsonl"))), "--from", "0"]) == 0
    out = capsys.readouterr().out
    assert "modules loaded since: " in out and "\n  colorsys" in out
