"""k8s/monitoring's Prometheus alerting rules: `promtool check rules` accepts them (Debian's
`prometheus` package; .ci/run installs it), and every fleetscope metric they use is one that
fleetscope exports (a renamed metric would silently never fire)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.support.paths import REPO

ROOT = REPO
RULES = ROOT / "k8s" / "monitoring" / "fleetscope-rules.yaml"
SOURCES = ("collector", "query", "common")


def exported() -> set[str]:
    """Metric names defined in the code, with the suffixes prometheus-client adds."""
    names: set[str] = set()
    for pkg in SOURCES:
        for path in (ROOT / pkg).rglob("*.py"):
            for kind, name in re.findall(
                r'(Counter|Gauge|Histogram|GaugeMetricFamily|_per_cluster|gauge)\(\s*"(fleetscope_\w+)"',
                path.read_text(),
            ):
                counter = kind == "Counter" and not name.endswith("_total")
                names.add(name + "_total" if counter else name)
                if kind == "Histogram":
                    names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing (apt: prometheus)")
def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_rules_use_metrics_fleetscope_exports() -> None:
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    wanted = {
        "FleetscopeClusterSyncLagging",
        "FleetscopeWatchLeaseLost",
        "FleetscopeAlertmanagerDeliveryFailing",
        "FleetscopeIndexRebuildingTooLong",
    }
    assert wanted <= {r["alert"] for r in rules}
    have = exported()
    for r in rules:
        for name in re.findall(r"\bfleetscope_\w+", r["expr"]):
            assert name in have, f"{r['alert']}: {name} is not exported by fleetscope"
