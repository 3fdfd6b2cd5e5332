"""The detail dialog's history in headless Chromium, against kubesim, real full syncs, Redis and
the query service: a Kustomization that recovered and failed again shows "failing since", its
transitions of the last day, the status bands of both timelines and the list of transitions,
all as the history API answers them; leaf text stays text."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.ui.stack import ADMIN, Stack, shot, view_as

pytestmark = pytest.mark.browser


def test_timeline_failing_since_and_transitions(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    cluster, namespace, name = stack.unhealthy[0]
    stack.sim.set_ready(cluster, "Kustomization", namespace, name, True, "Succeeded", "ok")
    assert all(o.ok for o in stack.collect([cluster]))
    stack.sim.set_ready(
        cluster, "Kustomization", namespace, name, False, "BuildFailed", "<b>not markup</b>"
    )
    assert all(o.ok for o in stack.collect([cluster]))
    url = f"{stack.base}/api/v1/objects/{cluster}/{namespace}/Kustomization/{name}/history"
    answer = requests.get(url, headers=ADMIN, timeout=10).json()
    assert [e["status"] for e in answer["items"]] == ["unhealthy", "healthy"]
    assert answer["object"]["failingSince"] and answer["object"]["transitions24h"] == 2

    page.goto(f"/?kind=Kustomization&namespace={namespace}&cluster={cluster}")
    view_as(page, "admin-0")
    page.get_by_role("button", name=f"{name}: show the live Kustomization").click()
    expect(page.locator("#detail")).to_be_visible()
    summary = page.locator("#history-summary")
    expect(summary).to_contain_text(f"Failing since {answer['object']['failingSince']}")
    expect(summary).to_contain_text("2 transition(s) in the last 24 h")
    day = page.locator("#timeline-day .band")
    statuses = day.evaluate_all("bs => bs.map(b => b.dataset.status)")
    # before the first transition of the day: nothing recorded (the first sync found it); a
    # band as wide as the time between the two transitions (none when in the same second)
    newest, older = answer["items"]
    bands = (
        ["none", "healthy", "unhealthy"] if newest["at"] != older["at"] else ["none", "unhealthy"]
    )
    assert statuses == bands
    shares = day.evaluate_all("bs => bs.map(b => parseFloat(b.style.flexGrow))")
    assert abs(sum(shares) - 1) < 1e-6  # the bands share the whole day
    widths = day.evaluate_all("bs => bs.map(b => b.getBoundingClientRect().width)")
    assert min(widths) >= 4  # the current status shows, however recent
    window = page.locator("#timeline-window .band").evaluate_all(
        "bs => bs.map(b => b.dataset.status)"
    )
    assert window == bands
    items = page.locator("#history-list li")
    expect(items).to_have_count(2)
    expect(items.first).to_contain_text("<b>not markup</b>")  # shown as text
    assert page.locator("#history-list b").count() == 0
    shot(page, "detail-history")
