"""The soak's invariant checks on synthetic records: which answers are expected under which
fault, rows shown twice in walks, freshness p99 outside failovers, revocations late or seen
again, duplicate history transitions, and the RSS slope per process (a replaced process starts
a new series)."""

from __future__ import annotations

from bench import soak_invariants as inv

FAULTS = [
    {"kind": "redis-primary", "at_s": 100.0, "ended_s": 100.0, "recovered_s": 110.0},
    {"kind": "watcher", "at_s": 200.0, "ended_s": 200.0, "recovered_s": 202.0},
    {"kind": "query-worker", "at_s": 300.0, "ended_s": 300.0, "recovered_s": 301.0},
    {"kind": "leaf-down", "at_s": 400.0, "ended_s": 430.0, "recovered_s": 440.0},
]


def test_json_503s_are_expected_only_while_redis_fails_over() -> None:
    assert inv.classify(105, "list", 503, "unavailable", FAULTS).startswith("503 json")
    assert inv.classify(119, "list", 503, "unavailable", FAULTS).startswith("503 json")
    assert inv.classify(150, "list", 503, "unavailable", FAULTS).startswith("unexpected")
    assert inv.classify(105, "list", 503, "", FAULTS).startswith("unexpected")  # not JSON
    assert inv.classify(105, "list", 500, "internal", FAULTS).startswith("unexpected")
    assert inv.classify(105, "list", 200, "", FAULTS) is None
    assert inv.classify(99, "list", 503, "u", FAULTS).startswith("unexpected")
    assert inv.classify(99, "list", 503, "u", FAULTS, done=100.5).startswith("503 json")


def test_fault_effects_are_classed_by_fault() -> None:
    assert inv.classify(302, "list", 0, "", FAULTS) == "connection lost to a killed query worker"
    assert inv.classify(350, "list", 0, "", FAULTS).startswith("unexpected")
    assert inv.classify(420, "detail", 502, "x", FAULTS) == "502 detail of a faulted leaf"
    assert inv.classify(420, "list", 502, "x", FAULTS).startswith("unexpected")
    assert inv.classify(500, "detail", 502, "x", FAULTS).startswith("unexpected")


def test_errors_by_class_and_the_unexpected_count() -> None:
    answers = [
        (105.0, "list", 503, "u", 105.1),
        (1.0, "list", 200, "", 1.1),
        (2.0, "facets", 500, "boom", 2.1),
        (99.5, "list", 503, "u", 100.2),  # asked before the kill, answered after it
    ]
    errors = inv.errors_by_class(answers, FAULTS)
    assert errors == {"503 json during redis failover": 2, "unexpected 500 boom": 1}
    assert inv.unexpected(errors) == 1


def test_walk_duplicates_count_every_row_shown_again() -> None:
    walks = [{"rows": 10, "distinct": 10}, {"rows": 12, "distinct": 10}]
    assert inv.walk_duplicates(walks) == 2


def test_freshness_p99_leaves_out_failovers_and_counts_never_seen() -> None:
    samples = [(float(t), 0.1, "c") for t in range(98)] + [(105.0, 30.0, "c")]
    samples += [(210.0, 20.0, "c")]  # the watcher takeover: excluded
    out = inv.freshness(samples, inv.failovers(FAULTS))
    assert out["n"] == 98 and out["excluded"] == 2 and out["p99_s"] == 0.1
    assert out["p99_all_s"] == 20.0  # the 99th of 100: the second worst
    out = inv.freshness([*samples, (50.0, None, "c")], inv.failovers(FAULTS))
    assert out["never_seen"] == 1 and out["p99_s"] is None  # infinite


def test_revocations_late_or_seen_again_are_violations() -> None:
    spans = inv.failovers(FAULTS)
    revs = [
        {"at_s": 10, "revoked_s": 0.5, "seen_after_bound": 0},
        {"at_s": 20, "revoked_s": 9.0, "seen_after_bound": 0},  # late
        {"at_s": 30, "revoked_s": None, "seen_after_bound": 0},  # never
        {"at_s": 105, "revoked_s": 9.0, "seen_after_bound": 0},  # late in a failover: excused
        {"at_s": 99.9, "revoked_s": 7.0, "seen_after_bound": 0},  # the failover within its bound
        {"at_s": 94.0, "revoked_s": 7.0, "seen_after_bound": 0},  # late before the failover
        {"at_s": 40, "revoked_s": 0.5, "seen_after_bound": 3},  # seen again three times
    ]
    assert inv.revocation_violations(revs, 5.0, spans) == 6


def entry(status: str, reason: str, source: str = "watch") -> dict:
    return {"status": status, "suspended": False, "reason": reason, "revision": "r1",
            "source": source}  # fmt: skip


def test_a_transition_recorded_twice_is_a_duplicate() -> None:
    alternating = [entry("healthy", "ok"), entry("unhealthy", "bad"), entry("healthy", "ok")]
    assert inv.duplicate_transitions(alternating) == 0
    twice = [entry("healthy", "ok"), entry("unhealthy", "bad", "sync"), entry("unhealthy", "bad")]
    assert inv.duplicate_transitions(twice) == 1
    recreated = [entry("healthy", "ok", "created"), entry("healthy", "ok")]
    assert inv.duplicate_transitions(recreated) == 0


def test_rss_slope_is_percent_of_the_mean_per_ten_minutes() -> None:
    flat = [(float(t), 100_000.0) for t in range(0, 1200, 60)]
    assert inv.slope_pct_per_10min(flat) == 0.0
    growing = [(float(t), 100_000.0 + t * 10) for t in range(0, 1200, 60)]
    mean = sum(v for _, v in growing) / len(growing)
    assert abs(inv.slope_pct_per_10min(growing) - 100 * 6000 / mean) < 0.01
    assert inv.slope_pct_per_10min(growing[:2]) == 0.0  # too few points


def sample(t: float, procs: dict[str, tuple[int, int]]) -> dict:
    return {"t_s": t, "procs": {k: list(v) for k, v in procs.items()}}


def test_rss_flat_judges_each_pid_after_its_warm_up() -> None:
    samples = [sample(t, {"a": (1, 1000 + t), "b": (2, 5000)}) for t in range(0, 900, 10)]
    # b is killed at 900 s and replaced: its new series warms up again, then stays flat
    samples += [sample(t, {"a": (1, 1000 + t), "b": (3, 9000 if t < 1000 else 6000)})
                for t in range(900, 1800, 10)]  # fmt: skip
    samples[89]["procs"]["b"] = [2, 0]  # read as it was killed: gone, not empty
    out = inv.rss_flat(samples, warmup_s=120)
    assert out["a"]["flat"] is False and out["a"]["slope_pct_per_10min"] > 1
    assert out["b"]["flat"] is True and out["b"]["judged"] is True
    assert out["b"]["series"][0]["last_kib"] == 5000
    assert [s["pid"] for s in out["b"]["series"]] == [2, 3]
    assert out["b"]["series"][1]["first_kib"] == 6000


def test_rss_flat_judges_the_predecessor_of_a_late_replacement() -> None:
    # b leaks until it is replaced at 1,500 s; its successor is too short to judge
    samples = [sample(t, {"b": (2, 5000 + 2 * t)}) for t in range(0, 1500, 10)]
    samples += [sample(t, {"b": (3, 4000 + 5 * (t - 1500))}) for t in range(1500, 1800, 10)]
    out = inv.rss_flat(samples, warmup_s=120)
    first, last = out["b"]["series"]
    assert first["judged"] is True and first["flat"] is False
    assert last["judged"] is False and last["span_s"] < inv.JUDGED_MIN_S
    assert out["b"]["flat"] is False and out["b"]["pid"] == 2  # the worst judged series shown


def test_rss_flat_reports_a_process_with_no_series_long_enough_as_not_judged() -> None:
    samples = [sample(t, {"c": (4, 1000 + 10 * t)}) for t in range(0, 500, 10)]
    out = inv.rss_flat(samples, warmup_s=100)
    assert out["c"]["judged"] is False and out["c"]["flat"] is True
    assert out["c"]["slope_pct_per_10min"] > 1  # still reported
    out = inv.rss_flat(samples, warmup_s=100, min_judged_s=300)
    assert out["c"]["judged"] is True and out["c"]["flat"] is False


def test_a_watcher_take_over_lasts_until_the_fleet_is_built_again() -> None:
    faults = [{"kind": "watcher", "at_s": 200.0, "ended_s": 200.0, "recovered_s": 330.0}]
    assert inv.failovers(faults) == [(200.0, 330.0 + inv.WATCHER_GRACE_S)]
    # recovered at once (the replacement took its clusters back before anything was dropped)
    faults = [{"kind": "watcher", "at_s": 200.0, "ended_s": 200.0, "recovered_s": 202.0}]
    assert inv.failovers(faults) == [(200.0, 200.0 + inv.WATCHER_TAKEOVER_S)]


def test_freshness_is_fleetscopes_share_from_the_leafs_watch_event() -> None:
    # made at t; seen after 0.3 s of which the leaf took 0.2 s to send the event: 0.1 s is ours
    samples = [(float(t), 0.3, "c", 0.2) for t in range(49)]
    samples.append((49.0, 9.0, "c", 8.5))  # a simulator busy for 8.5 s: 0.5 s is ours
    out = inv.freshness(samples, [])
    assert out["p99_s"] == 0.5 and out["p50_s"] == 0.1  # the p99 of 50: the worst
    assert out["end_to_end_p99_s"] == 9.0 and out["end_to_end_p50_s"] == 0.3
    assert out["leaf_delivered_p50_s"] == 0.2 and out["leaf_delivered_p99_s"] == 8.5
    assert out["unstamped"] == 0
    # a change no watch stream got (seen by a re-list) counts end to end, as do old records
    unstamped = [*samples, (50.0, 7.0, "c", None), (51.0, 7.0, "c")]
    out = inv.freshness(unstamped, [])
    assert out["p99_s"] == 7.0 and out["unstamped"] == 2
    # a stamp after the answer (not the event that answered) is not subtracted
    assert inv.fleetscope_share((0.0, 1.0, "c", 1.5)) == 1.0
    assert inv.fleetscope_share((0.0, None, "c", 0.1)) == float("inf")


def test_freshness_leaves_out_the_probed_clusters_own_leaf_faults() -> None:
    faults = [{"kind": "leaf-removed", "at_s": 10.0, "ended_s": 20.0, "target": "c1"}]
    leaves = inv.leaf_spans(faults)
    assert leaves == {"c1": [(10.0, 20.0 + inv.LEAF_GRACE_S)]}
    samples = [(float(t), 0.1, "c2") for t in range(99)] + [(30.0, 9.0, "c1")]
    assert inv.freshness(samples, [], leaves)["p99_s"] == 0.1
    slow = [(30.0, 9.0, "c2"), (31.0, 9.0, "c2")]  # another cluster at the time: kept
    assert inv.freshness([*samples, *slow], [], leaves)["p99_s"] == 9.0


def test_a_redis_server_is_judged_net_of_its_data() -> None:
    # the server's RSS follows its data (history and feeds filling): no growth of its own
    samples = [
        {"t_s": t, "procs": {"redis-primary": [7, 50_000 + 3 * t]}, "redis_data_kib": {"redis-primary": 20_000 + 3 * t}}
        for t in range(0, 1800, 10)
    ]  # fmt: skip
    samples[50]["redis_data_kib"] = {}  # it did not answer (failing over): that sample is left out
    out = inv.rss_flat(samples, warmup_s=300)
    assert out["redis-primary"]["flat"] is True and out["redis-primary"]["first_kib"] == 30_000
    assert inv.redis_data(samples)["redis-primary"]["kib_per_10min"] == 1800.0
    leaking = [{**s, "procs": {"redis-primary": [7, s["procs"]["redis-primary"][1] + 2 * s["t_s"]]}}
               for s in samples]  # fmt: skip
    assert inv.rss_flat(leaking, warmup_s=300)["redis-primary"]["flat"] is False
    # without data samples (an older soak.json) the RSS itself is judged
    bare = [{"t_s": s["t_s"], "procs": s["procs"]} for s in samples]
    assert inv.rss_flat(bare, warmup_s=300)["redis-primary"]["flat"] is False


def swinging(t: float, floor: float) -> float:
    """A worker's RSS: its floor, plus an answer of 60 MiB held at every third sample."""
    return floor + (60_000 if int(t // 10) % 3 == 1 else 0)


def test_rss_is_judged_by_its_floor_not_by_answers_held_between_samples() -> None:
    # the swings' phase drifts against the windows: the least squares of every sample sees a
    # slope the floor does not have
    flat = [sample(t, {"w": (5, swinging(t, 300_000) + (40_000 if t > 1500 else 0) * (t % 30 == 0))})
            for t in range(0, 1800, 10)]  # fmt: skip
    out = inv.rss_flat(flat, warmup_s=360)
    assert out["w"]["flat"] is True and out["w"]["slope_pct_per_10min"] == 0.0
    assert out["w"]["slope_all_pct_per_10min"] > 1  # what the noise alone reads as growth
    # a leak of 5 MiB per 10 minutes under the same swings: 1.6 % of ~310 MiB, found
    leaking = [
        sample(t, {"w": (5, swinging(t, 300_000 + t * 5_000 / 600))}) for t in range(0, 1800, 10)
    ]
    out = inv.rss_flat(leaking, warmup_s=360)
    assert out["w"]["flat"] is False and 1.4 < out["w"]["slope_pct_per_10min"] < 1.8
    assert abs(out["w"]["kib_per_10min"] - 5_000) < 100


def test_floors_are_each_windows_lowest_sample() -> None:
    points = [(float(t), float(100 + (t % 40))) for t in range(0, 600, 10)]
    low = inv.floors(points, window_s=120)
    assert [v for _, v in low] == [100.0] * 5 and [t for t, _ in low] == [
        0.0,
        120.0,
        240.0,
        360.0,
        480.0,
    ]
    assert inv.floors(points[:20], window_s=120) == points[:20]  # two windows: too few to judge
    assert inv.floors([], window_s=120) == []


def test_a_redis_servers_growth_beyond_its_data_is_a_share_of_its_rss() -> None:
    # 1 GiB of data, 40 MiB beyond it growing 3 MiB per 10 minutes: 0.3 % of the process's RSS
    # (7 % of the 40 MiB alone: the unit would hold a server to a far tighter bound than others)
    samples = [
        {"t_s": t, "procs": {"redis-primary": [7, 1_088_000 + t * 3_000 // 600]},
         "redis_data_kib": {"redis-primary": 1_048_000}}
        for t in range(0, 1800, 10)
    ]  # fmt: skip
    out = inv.rss_flat(samples, warmup_s=360)["redis-primary"]
    assert out["flat"] is True and 0.25 < out["slope_pct_per_10min"] < 0.35
    assert abs(out["kib_per_10min"] - 3_000) < 50 and out["mean_rss_kib"] > 1_000_000


def test_a_removed_leaf_may_fail_its_reads_until_collected_again_and_no_longer() -> None:
    faults = [{"kind": "leaf-removed", "at_s": 10.0, "ended_s": 130.0, "recovered_s": 170.0}]
    # removed: the registry still lists it for a reconcile or two, without its credentials
    assert inv.classify(50, "detail", 502, "leaf", faults) == "502 detail of a faulted leaf"
    # re-registered, not collected again yet, then within the query's refresh after it
    assert inv.classify(160, "relations", 404, "nf", faults) == "404 of an unregistered leaf"
    late = 170 + inv.REREGISTERED_GRACE_S - 1
    assert inv.classify(late, "history", 404, "nf", faults) == "404 of an unregistered leaf"
    # after that its objects are indexed: a 404 is wrong
    after = 170 + inv.REREGISTERED_GRACE_S + 1
    assert inv.classify(after, "detail", 404, "nf", faults).startswith("unexpected")
    assert inv.classify(50, "list", 502, "leaf", faults).startswith("unexpected")


def test_a_replacement_warms_up_until_it_reaches_its_roles_floor() -> None:
    # w0 and w1 settle at 200 MiB within the warm-up; w1 is killed at 600 s and its
    # replacement fills slowly towards the same floor, still below it at the end
    def procs(t: float, w1: tuple[int, int]) -> dict[str, tuple[int, int]]:
        return {"q-0.w0": (1, 200_000), "q-0.w1": w1}

    samples = [sample(t, procs(t, (2, 200_000))) for t in range(0, 600, 10)]
    slow = [sample(t, procs(t, (3, 160_000 + 20 * (t - 600)))) for t in range(600, 1800, 10)]
    out = inv.rss_flat(samples + slow, warmup_s=360)
    replacement = out["q-0.w1"]["series"][1]
    assert replacement["warming"] is True and replacement["judged"] is False
    assert replacement["sibling_floor_kib"] == 200_000
    assert replacement["fixed_warmup"]["flat"] is False  # what the warm-up alone judged
    assert out["q-0.w1"]["flat"] is True
    # one that passes its role's floor and keeps growing is judged from there: a leak
    leak = [sample(t, procs(t, (3, 160_000 + 60 * (t - 600)))) for t in range(600, 2400, 10)]
    out = inv.rss_flat(samples + leak, warmup_s=360)
    replacement = out["q-0.w1"]["series"][1]
    assert replacement["judged"] is True and replacement["flat"] is False
    assert 1260 <= replacement["warm_at_s"] <= 1400  # 160 + 0.06 * 670 s >= 200 MiB
    assert out["q-0.w1"]["flat"] is False


def test_a_replacement_is_held_to_the_floor_of_its_own_role_only() -> None:
    # a worker child at 50 MiB is no sibling of a query worker at 200 MiB
    samples = [sample(t, {"q-0.w0": (1, 200_000), "w-0.child0": (2, 50_000)})
               for t in range(0, 900, 10)]  # fmt: skip
    samples += [sample(t, {"q-0.w0": (1, 200_000), "w-0.child0": (3, 40_000 + 20 * (t - 900))})
                for t in range(900, 2400, 10)]  # fmt: skip
    child = inv.rss_flat(samples, warmup_s=120)["w-0.child0"]
    assert child["series"][1]["sibling_floor_kib"] == 50_000  # its own first pid's
    assert child["series"][1]["judged"] is True and child["flat"] is False
    assert inv.role("query-1.w1") == inv.role("query-0.w0") != inv.role("query-1")


def test_a_replacement_younger_than_the_warm_up_is_only_too_short() -> None:
    samples = [sample(t, {"q-0.w0": (1, 200_000), "q-0.w1": (2, 200_000)})
               for t in range(0, 1700, 10)]  # fmt: skip
    samples += [sample(t, {"q-0.w0": (1, 200_000), "q-0.w1": (3, 150_000)})
                for t in range(1700, 1800, 10)]  # fmt: skip
    late = inv.rss_flat(samples, warmup_s=360)["q-0.w1"]["series"][1]
    assert late["judged"] is False and "warming" not in late and "sibling_floor_kib" not in late
