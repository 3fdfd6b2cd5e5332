"""The soak's report: soak.json's summary (requests served by kind, faults injected and
survived, rows lost, errors by class, RSS per process, freshness samples, every invariant as a
number with its verdict) and a PNG of freshness and error rate over the run, the faults marked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BUCKET_S = 10.0


def requests_by_kind(
    requests: Sequence[tuple[float, str, int, str, float]],
) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for _, kind, code, *_ in requests:
        out.setdefault(kind, Counter())[str(code)] += 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def error_rate(
    requests: Sequence[tuple[float, str, int, str, float]], bucket_s: float = BUCKET_S
) -> list[tuple[float, float]]:
    """(bucket start s, share of answers that were not 200) per bucket."""
    total: Counter[int] = Counter()
    bad: Counter[int] = Counter()
    for t, _, code, *_ in requests:
        b = int(t // bucket_s)
        total[b] += 1
        bad[b] += code != 200
    return [(b * bucket_s, round(bad[b] / total[b], 4)) for b in sorted(total)]


def verdicts(invariants: dict[str, dict[str, Any]]) -> list[str]:
    """The names of the invariants that failed."""
    return [name for name, v in invariants.items() if not v["ok"]]


def plot(
    path: Path,
    freshness: Sequence[Sequence[Any]],
    rates: Sequence[tuple[float, float]],
    faults: Sequence[dict[str, Any]],
) -> Path:
    """Freshness samples (s) and the error rate (share per 10 s) over the run, one vertical
    line per fault."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(11, 6))
    seen = [(p[0], p[1]) for p in freshness if p[1] is not None]
    never = [p[0] for p in freshness if p[1] is None]
    top.scatter([t for t, _ in seen], [s for _, s in seen], s=4, label="change -> visible")
    if never:
        top.scatter(never, [max([s for _, s in seen] or [1.0])] * len(never), marker="x", c="r")
    top.axhline(2.0, color="grey", linestyle="--", linewidth=0.8, label="2 s")
    top.set_ylabel("freshness (s)")
    top.set_yscale("log")
    top.legend(loc="upper right")
    bottom.plot([t for t, _ in rates], [r for _, r in rates], drawstyle="steps-post")
    bottom.set_ylabel("non-200 share per 10 s")
    bottom.set_xlabel("run time (s)")
    for f in faults:
        for ax in (top, bottom):
            ax.axvline(f["at_s"], color="orange", linewidth=0.8)
        top.annotate(f["kind"], (f["at_s"], 1), rotation=90, fontsize=7, va="bottom",
                     xycoords=("data", "axes fraction"))  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def cells(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The rows of docs/operations.md's table of soak runs, filled from one soak.json."""
    fresh, hist = result["freshness"], result["history"]
    served = {k: sum(v.values()) for k, v in result["requests_by_kind"].items()}
    revs = [r["revoked_s"] for r in result["revocations"] if r["revoked_s"] is not None]
    inv = result["invariants"]
    oracle = len(result["oracle_walks"])
    rss = ", ".join(_rss(n, v) for n, v in result["rss"].items())
    return [
        ("requests served (by kind)", f"{result['requests']:,}: " + _pairs(served)),
        (
            "faults injected / survived",
            f"{result['faults_injected']} / {result['faults_survived']}",
        ),
        ("rows lost", str(result["rows_lost"])),
        ("errors by class", _pairs(result["errors"]) or "none"),
        (
            "freshness p50 / p99 (p99 with failovers)",
            f"{fresh['p50_s']} / {fresh['p99_s']} s ({fresh['p99_all_s']} s), n={fresh['n']}",
        ),
        *_end_to_end(fresh),
        (
            "revocations (max, violations)",
            f"{len(revs)}: max {max(revs, default=0)} s, {inv['revocation_violations']['value']}",
        ),
        (
            "walks, rows twice; oracle walks differing",
            f"{len(result['walks'])}, {inv['walk_rows_twice']['value']}; "
            f"{inv['walks_differ_from_oracle']['value']} of {oracle} users",
        ),
        ("history duplicate transitions", f"{hist['duplicates']} of {hist['entries']} entries"),
        ("RSS slope per process (% per 10 min)", rss),
        ("failed invariants", ", ".join(verdicts(inv)) or "none"),
    ]


def _end_to_end(fresh: dict[str, Any]) -> list[tuple[str, str]]:
    """Runs whose probes carry the leaf's delivery stamp: the same probes end to end, and the
    simulator's own share of it (none for older records)."""
    if "end_to_end_p99_s" not in fresh:
        return []
    return [
        (
            "freshness end to end p50 / p99; the leaf's own delay p50 / p99",
            f"{fresh['end_to_end_p50_s']} / {fresh['end_to_end_p99_s']} s; "
            f"{fresh['leaf_delivered_p50_s']} / {fresh['leaf_delivered_p99_s']} s "
            f"({fresh['unstamped']} unstamped)",
        )
    ]


def _rss(name: str, judged: dict[str, Any]) -> str:
    """A process's slope (its floor's; every sample's in brackets where reported); one whose
    every pid lived too short after its warm-up is marked."""
    cell = f"{name} {judged['slope_pct_per_10min']}"
    if "slope_all_pct_per_10min" in judged:
        cell += f" ({judged['slope_all_pct_per_10min']})"
    for run in judged.get("series", ())[1:]:
        level = run.get("sibling_floor_kib")
        if run.get("warming"):
            cell += (
                f" (pid {run['pid']} warming: floor at most {run.get('highest_floor_kib', run['floors'][-1][1]) / 1024:.1f} MiB, "
                f"below its role's {level / 1024:.1f} MiB; "
                f"{run['fixed_warmup']['slope_pct_per_10min']} from its start + warm-up)"
            )
        elif level is not None:
            cell += f" (pid {run['pid']} judged from {run['warm_at_s']:.0f} s, its role's floor)"
    if judged.get("judged", True):
        return cell
    return f"{cell} (not judged: {judged.get('span_s', 0) / 60:.1f} min)"


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in counts.items())


if __name__ == "__main__":  # print a soak.json's column of the table: python -m bench.soak_report
    import json
    import sys

    for label, cell in cells(json.loads(Path(sys.argv[1]).read_text())):
        print(f"| {label} | {cell} |")
