"""The list's live feed in headless Chromium against kubesim, a real full sync, Redis and the
query service: a row's status badge changes colour in place when its object recovers (no
reload, no polling: the page keeps its own state), the "live" state is shown, and the stream
pauses while the tab is hidden and resumes when it is shown again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ui.stack import Stack, shot

pytestmark = pytest.mark.browser

ADMIN = "admin-0"


def test_a_row_changes_colour_without_a_reload(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    cluster, namespace, name = stack.unhealthy[-1]
    # The page opens as the admin (the demo user it remembers): switching users after it
    # opened lists again, and that second list's requests could land after `requests_before`
    # below and read as polling (CI's failure twice, whichever list's stream was waited for).
    page.add_init_script(f"localStorage.setItem('fleetscope.demoUser', {ADMIN!r})")
    with page.expect_response(
        lambda r: "/api/v1/watch" in r.url and r.request.headers.get("x-remote-user") == ADMIN
    ):
        page.goto(f"/?kind=Kustomization&namespace={namespace}&cluster={cluster}&name={name}")
    assert page.locator("#demo-user").input_value() == ADMIN
    badge = page.locator("#rows tbody tr", has_text=name).locator(".badge").first
    expect(badge).to_have_text("unhealthy")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    page.evaluate("window.__sameDocument = true")
    requests_before = page.evaluate("performance.getEntriesByType('resource').length")
    try:
        stack.sim.set_ready(cluster, "Kustomization", namespace, name, True, "Succeeded", "ok")
        assert all(o.ok for o in stack.collect([cluster]))
        expect(badge).to_have_text("healthy")  # waits for the event, no reload
        expect(badge).to_have_class("badge badge-healthy")
        assert page.evaluate("window.__sameDocument") is True
        # nothing asked again: the page made no request after the stream (no polling)
        names = page.evaluate(
            f"performance.getEntriesByType('resource').slice({requests_before}).map(e => e.name)"
        )
        assert not [n for n in names if "/api/v1/objects" in n or "/api/v1/facets" in n]
        shot(page, "live-row-changed")
        # hidden tab: the stream stops and says so; shown again: live again
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        expect(page.locator("#live")).to_have_attribute("data-state", "paused")
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        expect(page.locator("#live")).to_have_attribute("data-state", "live")
    finally:
        stack.sim.set_ready(cluster, "Kustomization", namespace, name, False, "BuildFailed", "x")
        assert all(o.ok for o in stack.collect([cluster]))
