"""The web view's version drift in headless Chromium, against kubesim, a real collection, Redis
and the query service: grouped by object, the "Drift only" toggle (held by the URL) lists the
API's drifting groups with their revisions, and an expanded group lists its clusters by
revision, as `GET /api/v1/groups?drift=true` answers them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.ui.stack import ADMIN, Stack, api_groups, shot

pytestmark = pytest.mark.browser


def test_drift_only_toggle_and_clusters_by_revision(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/?group=object&kind=Kustomization&limit=10")
    page.wait_for_selector("#groups > li")
    toggle = page.locator("#drift-toggle")
    expect(toggle).to_be_visible()
    toggle.check()
    expect(page).to_have_url(re.compile(r"drift=true"))
    want = api_groups(stack, ADMIN, kind="Kustomization", limit=10, drift="true")
    assert want and all(len(g["revisions"]) >= 2 for g in want)
    items = page.locator("#groups > li")
    expect(items).to_have_count(len(want))
    first = want[0]
    head = items.first.locator("summary")
    for r in first["revisions"]:
        expect(head).to_contain_text(f"{r['revision']} on {r['clusters']}")
    head.click()  # the clusters, by revision (most common first)
    sections = items.first.locator(".revision-section")
    expect(sections).to_have_count(len({m["revision"] for m in first["clusters"]}))
    shown = sections.evaluate_all(
        """ss => ss.map(s => [s.querySelector('.revision-head code')?.textContent || '',
             [...s.querySelectorAll('.revision-clusters > li')]
               .map(li => li.children[1].textContent)])"""
    )
    by_rev: dict[str, list[str]] = {}
    for m in first["clusters"]:
        by_rev.setdefault(m["revision"], []).append(m["cluster"])
    assert [rev for rev, _ in shown] == [r["revision"] for r in first["revisions"]][: len(shown)]
    assert {rev: clusters for rev, clusters in shown} == by_rev
    shot(page, "grouped-drift-only")
    page.reload()  # the URL holds it
    expect(page.locator("#drift-toggle")).to_be_checked()
    expect(items).to_have_count(len(want))
    page.select_option("#group-by", "namespace")  # no drift for namespaces: hidden, dropped
    expect(page.locator("#drift-toggle")).to_be_hidden()
    expect(page).not_to_have_url(re.compile(r"drift="))
