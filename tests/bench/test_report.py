"""bench.report's current tables: a run updates the block of its key in docs/benchmarks.md (its
rows replace those it measured, the others stay with their run), a run with other columns
replaces the block, a key without a block leaves the doc alone, and `record` appends the run to
the history and updates its block in one write."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import report

TITLE = "query: list pages at fleet L"
HEADER = ("profile", "p99 ms", "ok")
RUN_A = "2026-11-26 14:54 UTC, commit `aaaaaaa`, `./dev bench query`; 2 x CPU; load 8.69"
RUN_B = "2026-11-27 09:00 UTC, commit `bbbbbbb`, `./dev bench query --profile team`; load 1.0"
SAMPLE = f"""# Benchmarks

Intro kept as it is.

### query

Target: p99 <= 2x the one-GET p99.

<!-- current:{TITLE} -->
| profile | p99 ms | ok | run |
|---|---|---|---|
| cluster admin | **35.5** | yes | 2026-11-26 14:54 UTC |
| team member | **31.84** | yes | 2026-11-26 14:54 UTC |
| groups by=object\\|namespace | **30.1** | yes | 2026-11-26 14:54 UTC |
| reference: one Redis GET | **29.41** |  | 2026-11-26 14:54 UTC |

- {RUN_A}
<!-- /current:{TITLE} -->

### memory

<!-- current:memory: Redis bytes per row -->
| fleet | bytes/row | run |
|---|---|---|
| L | **426** | 2026-11-26 20:29 UTC |

- 2026-11-26 20:29 UTC, commit `ccccccc`, `./dev bench memory --presets L`; load 1.75
<!-- /current:memory: Redis bytes per row -->

# History

### {TITLE}

{RUN_A}
"""


def block(doc: str, key: str) -> str:
    start, end = f"<!-- current:{key} -->", f"<!-- /current:{key} -->"
    return doc[doc.index(start) + len(start) : doc.index(end)]


def outside(doc: str, key: str) -> str:
    return doc.replace(block(doc, key), "")


def test_a_partial_run_replaces_its_rows_and_keeps_the_others_with_their_run() -> None:
    rows = [
        ("team member", "**20.0**", "yes"),
        ("label selector", "**40.0**", "NO"),
        ("groups by=object|namespace", "**22.0**", "yes"),
        ("reference: one Redis GET", "**12.0**", ""),
    ]
    doc = report.update_current(SAMPLE, TITLE, HEADER, rows, RUN_B)
    assert doc is not None
    assert outside(doc, TITLE) == outside(SAMPLE, TITLE)
    assert block(doc, TITLE) == (
        "\n| profile | p99 ms | ok | run |\n|---|---|---|---|\n"
        "| cluster admin | **35.5** | yes | 2026-11-26 14:54 UTC |\n"
        "| team member | **20.0** | yes | 2026-11-27 09:00 UTC |\n"
        "| label selector | **40.0** | NO | 2026-11-27 09:00 UTC |\n"
        "| groups by=object\\|namespace | **22.0** | yes | 2026-11-27 09:00 UTC |\n"
        "| reference: one Redis GET | **12.0** |  | 2026-11-27 09:00 UTC |\n"
        f"\n- {RUN_B}\n- {RUN_A}\n"
    )
    again = report.update_current(doc, TITLE, HEADER, rows, RUN_B)
    assert again == doc  # the same run twice: the same table


def test_a_run_measuring_every_row_drops_the_older_runs_line() -> None:
    rows = [
        ("cluster admin", "1", "yes"),
        ("team member", "2", "yes"),
        ("groups by=object|namespace", "3", "yes"),
        ("reference: one Redis GET", "4", ""),
    ]
    doc = report.update_current(SAMPLE, TITLE, HEADER, rows, RUN_B)
    assert doc is not None
    assert RUN_A not in block(doc, TITLE) and f"- {RUN_B}\n" in block(doc, TITLE)
    assert doc.count(RUN_A) == 1  # the history keeps it


def test_a_run_with_other_columns_replaces_the_table() -> None:
    header = ("profile", "p50 ms", "p99 ms", "ok")
    doc = report.update_current(SAMPLE, TITLE, header, [("team member", "9", "20", "yes")], RUN_B)
    assert doc is not None
    assert block(doc, TITLE) == (
        "\n| profile | p50 ms | p99 ms | ok | run |\n|---|---|---|---|---|\n"
        "| team member | 9 | 20 | yes | 2026-11-27 09:00 UTC |\n"
        f"\n- {RUN_B}\n"
    )
    assert block(doc, "memory: Redis bytes per row") == block(SAMPLE, "memory: Redis bytes per row")


def test_a_key_without_a_block_changes_nothing() -> None:
    assert report.update_current(SAMPLE, "query: list pages at fleet M", HEADER, [], RUN_B) is None


@pytest.mark.parametrize(
    ("args", "key"),
    [
        ([], TITLE),
        (["--redis-url", "redis://h:1/0", "--profile", "newest first", "--seconds", "4"], TITLE),
        (["--preset=L", "--no-doc"], TITLE),
        (
            ["--churn", "100", "--churn-rows", "--profile", "groups"],
            f"{TITLE} [--churn 100 --churn-rows]",
        ),
        (["--presets", "M", "--distinct"], f"{TITLE} [--distinct]"),
        (["--churn=0"], f"{TITLE} [--churn=0]"),
    ],
)
def test_flags_that_change_the_conditions_name_a_table_of_their_own(
    args: list[str], key: str
) -> None:
    assert report.current_key(TITLE, args) == key


def test_record_appends_the_history_and_updates_the_current_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(SAMPLE)
    monkeypatch.setattr(report, "DOC", doc)
    monkeypatch.setattr(sys, "argv", ["bench/query.py", "--profile", "team member"])
    report.record(TITLE, {"benchmark": "query"}, HEADER, [("team member", "**7.0**", "yes")])
    text = doc.read_text()
    _, last_run, history = text.partition(f"# History\n\n### {TITLE}\n\n{RUN_A}\n")
    assert last_run  # the history: the new run appended at the end
    assert history.startswith(f"\n### {TITLE}\n\n") and "| team member | **7.0** | yes |" in history
    assert "`./dev bench query --profile 'team member'`" in history
    current = block(text, TITLE)
    assert "| cluster admin | **35.5** | yes | 2026-11-26 14:54 UTC |" in current
    [row] = [ln for ln in current.splitlines() if ln.startswith("| team member")]
    run = row.rsplit("|", 2)[1].strip()
    assert run.endswith(" UTC") and run != "2026-11-26 14:54 UTC"
    assert f"- {run}, commit `" in current
    assert f"history and current table ({TITLE})" in capsys.readouterr().err


def test_record_without_a_block_writes_the_history_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(SAMPLE)
    monkeypatch.setattr(report, "DOC", doc)
    monkeypatch.setattr(sys, "argv", ["bench/query.py", "--churn", "100"])
    report.record(TITLE, {}, HEADER, [("team member", "**7.0**", "yes")])
    text = doc.read_text()
    assert text.startswith(SAMPLE) and "### query: list pages at fleet L" in text[len(SAMPLE) :]
