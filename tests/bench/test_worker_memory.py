"""bench.worker_memory at fleet S for a few seconds: two variants of the query worker side by side
under churn and storms, each with its heap dumps, CPU and answers; a variant's environment
reaches its worker."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench import worker_memory


def test_two_variants_are_served_side_by_side_and_measured(tmp_path: Path) -> None:
    out = tmp_path / "worker_memory.json"
    argv = ["--preset", "S", "--duration-s", "12", "--dump-every-s", "2", "--storm-every-s", "4"]
    argv += ["--threads", "2", "--think-s", "0.2", "--out", str(out)]
    argv += ["--variant", "pymalloc", "--variant", "malloc:PYTHONMALLOC=malloc"]
    assert worker_memory.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["storms_s"], "no storm came within the run"
    pymalloc, malloc = result["variants"]["pymalloc"], result["variants"]["malloc"]
    assert malloc["env"] == {"PYTHONMALLOC": "malloc"} and pymalloc["env"] == {}
    for v in (pymalloc, malloc):
        assert v["dumps"] and v["worker_cpu_s"] > 0
        assert all(d["rss_mib"] > 0 and d["blocks"] >= 0 for d in v["dumps"])
        answered = {a["path"] for a in v["answers"] if a["status"] == "200"}
        assert answered == set(worker_memory.PATHS)  # each path asked, and answered
        assert all(a["status"] == "200" for a in v["answers"]), v["answers"]
    # the variant's environment reached its worker: no pymalloc arenas under the C allocator
    assert all(d["arenas"] for d in pymalloc["dumps"])
    assert not any(d["arenas"] for d in malloc["dumps"])


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [("a", ("a", {})), ("b:X=1,Y=two=2", ("b", {"X": "1", "Y": "two=2"}))],
)
def test_a_variant_is_a_name_and_its_environment(spec: str, parsed: tuple) -> None:
    assert worker_memory.variant(spec) == parsed


@pytest.mark.parametrize("spec", [":X=1", "a:X", "a:=1"])
def test_a_malformed_variant_is_refused(spec: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        worker_memory.variant(spec)
