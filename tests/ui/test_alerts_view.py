"""The web view's alerts: every page's header counts the firing alerts the viewer may see (the
API's count for that user, re-counted when the demo user changes), and the count opens the
alerts page, whose lines open the alerting rows in the list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests

from common.alerts.evaluate import Evaluator
from common.alerts.source import RulesSource
from common.kinds.registry import builtin_registry
from tests.ui.stack import ADMIN, ROWS, Stack, view_as

RULES = """
rules:
  - name: KustomizationFailing
    match: {kind: Kustomization, status: unhealthy}
    annotations: {summary: "{{ .name }} is failing"}
"""


def api_alerts(stack: Stack, headers: dict[str, str]) -> list[dict]:
    resp = requests.get(f"{stack.base}/api/v1/alerts", headers=headers, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]


def test_header_count_opens_the_alerting_rows(stack: Stack, page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    reg = builtin_registry()
    evaluator = Evaluator(stack.r, reg.keys(), stack.base)
    evaluator.run(RulesSource(str(rules), reg).current(stack.r), None)
    admin = api_alerts(stack, ADMIN)
    assert len(admin) == len(stack.unhealthy) > 0

    page.goto("/status")
    view_as(page, "admin-0")
    expect(page.locator("#alerts-count")).to_have_text(str(len(admin)))
    solo = api_alerts(stack, {"X-Remote-User": "solo"})
    view_as(page, "solo")
    expect(page.locator("#alerts-count")).to_have_text(str(len(solo)))
    view_as(page, "admin-0")
    expect(page.locator("#alerts-count")).to_have_text(str(len(admin)))

    page.click("#alerts-nav")
    expect(page).to_have_url(f"{stack.base}/alerts")
    lines = page.locator("#alerts tbody tr")
    expect(lines).to_have_count(len(admin))
    first = sorted(admin, key=lambda a: (a["cluster"], a["namespace"], a["name"]))[0]
    link = page.locator("#alerts tbody a", has_text=first["name"]).first
    link.click()
    expect(page).to_have_url(
        f"{stack.base}/?cluster={first['cluster']}&namespace={first['namespace']}&kind=Kustomization&name={first['name']}"
    )
    expect(page.locator(ROWS).first).to_contain_text(first["name"])
