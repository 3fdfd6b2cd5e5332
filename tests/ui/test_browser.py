"""The web view end to end in headless Chromium against kubesim, a real collection, Redis and
the query service: filtering, paging with continue tokens and bookmarks, the live detail and a
leaf's refusal, external links, the demo user switcher, and the degraded/rebuilding banners.

Every expectation on rows is checked against the API's own answer for the same user.
Screenshots of the main states go to artifacts/ui/.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import requests
import yaml

from common.index import keys
from kubesim.gen.users import fleet_users
from tests.support.http import make_app, serve
from tests.ui.stack import ADMIN, EXTERNAL_URL, LISTER, ROWS, Stack, api_groups, shot, view_as

pytestmark = pytest.mark.browser


def api_names(stack: Stack, headers: dict[str, str], **params: Any) -> list[str]:
    resp = requests.get(f"{stack.base}/api/v1/objects", params=params, headers=headers, timeout=10)
    resp.raise_for_status()
    return [
        f"{r['cluster']}/{r['namespace'] or '_'}/{r['kind']}/{r['name']}"
        for r in resp.json()["items"]
    ]


def api_pages(stack: Stack, headers: dict[str, str], limit: int, pages: int) -> list[list[str]]:
    out, token = [], None
    for _ in range(pages):
        params: dict[str, Any] = {"limit": limit, **({"continue": token} if token else {})}
        body = requests.get(
            f"{stack.base}/api/v1/objects", params=params, headers=headers, timeout=10
        ).json()
        out.append(
            [
                f"{r['cluster']}/{r['namespace'] or '_'}/{r['kind']}/{r['name']}"
                for r in body["items"]
            ]
        )
        token = body["continue"]
    return out


def shown_names(page: Any) -> list[str]:
    """The rows on the page as cluster/namespace/kind/name, once the table has settled."""
    page.wait_for_selector("#rows:not([aria-busy])")
    cells = page.locator(ROWS).evaluate_all(
        "rows => rows.map(r => [...r.cells].slice(0, 4).map(c => c.textContent).join('/'))"
    )
    # Cluster-scoped rows show "(cluster)" where the API's paths say `_`.
    return [c.replace("/(cluster)/", "/_/") for c in cells]


def expect_names(page: Any, names: list[str]) -> None:
    from playwright.sync_api import expect

    expect(page.locator(ROWS)).to_have_count(len(names))
    if names:
        expect(page.locator(f"{ROWS} >> nth=-1 >> td >> nth=3")).to_have_text(
            names[-1].rsplit("/", 1)[1]
        )
    assert shown_names(page) == names


def test_filter_page_and_bookmark(stack: Stack, page: Any, browser: Any) -> None:
    from playwright.sync_api import expect

    pages = api_pages(stack, ADMIN, limit=5, pages=3)
    page.goto("/?limit=5")
    expect(page.locator("#demo-user")).to_have_value("admin-0")
    expect_names(page, pages[0])
    total = requests.get(f"{stack.base}/api/v1/facets", headers=ADMIN, timeout=10).json()["total"]
    expect(page.locator("#summary")).to_have_text(f"{total:,} objects match")
    expect(page.locator("#prev")).to_be_disabled()
    shot(page, "list")

    # Filter by status: the URL says so, every row is unhealthy, and they are the API's rows.
    page.locator("#f-status input[value=unhealthy]").check()
    expect(page).to_have_url(re.compile(r"status=unhealthy"))
    unhealthy = api_names(stack, ADMIN, status="unhealthy", limit=5)
    assert len(unhealthy) >= 4
    expect_names(page, unhealthy)
    for badge in page.locator(f"{ROWS} .badge").all_text_contents():
        assert badge == "unhealthy"
    # facet counts: each status choice counts what it would add (its own filter ignored)
    expect(page.locator("#f-status label.choice", has_text="healthy").first).to_contain_text(
        re.compile(r"\d")
    )
    shot(page, "filtered-unhealthy")

    # Bad input comes back from the API as a message on the page.
    page.fill("#f-namespace", "Not_A_Namespace")
    page.press("#f-namespace", "Enter")
    expect(page.locator("#error")).to_contain_text("is not a namespace name")
    expect(page.locator(ROWS)).to_have_count(0)

    # Page forward and back with the API's continue tokens.
    page.click("#clear")
    expect(page).not_to_have_url(re.compile(r"status="))
    expect_names(page, pages[0])
    page.click("#next")
    expect(page).to_have_url(re.compile(r"continue="))
    expect_names(page, pages[1])
    expect(page.locator("#page-info")).to_contain_text("Page 2 · rows 6\u201310")
    page.click("#next")
    expect_names(page, pages[2])
    bookmark = page.url
    page.click("#prev")
    expect_names(page, pages[1])
    page.go_back()  # browser history follows the pages too
    expect_names(page, pages[2])
    page.click("#first")
    expect_names(page, pages[0])

    # A bookmarked position opens at the same rows in a fresh browser.
    other = browser.new_context(base_url=stack.base).new_page()
    other.goto(bookmark)
    expect_names(other, pages[2])
    expect(other.locator("#first")).to_be_enabled()
    other.context.close()


def test_sort_by_last_transition_in_one_click_held_by_the_url(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/?limit=10&status=unhealthy,healthy")
    header = page.locator("#th-transition")
    expect(header).to_have_attribute("aria-sort", "none")
    page.click("#sort-transition")  # one click: newest first
    expect(page).to_have_url(re.compile(r"sort=-lastTransitionTime"))
    expect(header).to_have_attribute("aria-sort", "descending")
    newest = api_names(
        stack, ADMIN, sort="-lastTransitionTime", status="unhealthy,healthy", limit=10
    )
    assert newest != api_names(stack, ADMIN, status="unhealthy,healthy", limit=10)
    expect_names(page, newest)
    times = page.locator(f"{ROWS} time").evaluate_all("ts => ts.map(t => t.dateTime)")
    assert times == sorted(times, reverse=True) and times
    shot(page, "sorted-newest-first")
    page.click("#next")  # pages go on in that order
    token = requests.get(
        f"{stack.base}/api/v1/objects",
        params={"sort": "-lastTransitionTime", "status": "unhealthy,healthy", "limit": 10},
        headers=ADMIN,
        timeout=10,
    ).json()["continue"]
    expect_names(
        page,
        api_names(
            stack,
            ADMIN,
            sort="-lastTransitionTime",
            status="unhealthy,healthy",
            limit=10,
            **{"continue": token},
        ),
    )
    page.reload()  # the URL holds the order
    expect(header).to_have_attribute("aria-sort", "descending")
    page.click("#sort-transition")  # then oldest first, then back to the default order
    expect(page).to_have_url(re.compile(r"sort=lastTransitionTime"))
    expect(header).to_have_attribute("aria-sort", "ascending")
    expect_names(
        page,
        api_names(stack, ADMIN, sort="lastTransitionTime", status="unhealthy,healthy", limit=10),
    )
    page.click("#sort-transition")
    expect(page).not_to_have_url(re.compile(r"sort="))
    expect(header).to_have_attribute("aria-sort", "none")


def test_group_across_clusters_toggle_expands_to_the_clusters(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/?limit=10")
    page.wait_for_selector("#rows:not([aria-busy])")
    page.check("#group-toggle")
    expect(page).to_have_url(re.compile(r"group=object"))
    want = api_groups(stack, ADMIN, limit=10)
    assert want and want[0]["statuses"]["unhealthy"] > 0
    items = page.locator("#groups > li")
    expect(items).to_have_count(len(want))
    expect(page.locator(".table-wrap")).to_be_hidden()
    first = want[0]
    where = f"in {first['namespace']}" if first["namespace"] else "(cluster-scoped)"
    head = items.first.locator("summary")
    expect(head).to_contain_text(f"{first['name']} {first['kind']} {where}")
    expect(head).to_contain_text(
        f"unhealthy in {first['statuses']['unhealthy']} of {first['total']} cluster"
    )
    head.click()  # expands to its clusters, worst first
    shown = items.first.locator(".group-clusters li").evaluate_all(
        "ls => ls.map(l => l.textContent)"
    )
    assert [t.split()[1] for t in shown] == [m["cluster"] for m in first["clusters"]]
    shot(page, "grouped-by-object")
    counts = group_facets(stack, "object")  # the counts are of groups, not rows
    expect(page.locator("#summary")).to_have_text(f"{counts['total']:,} objects match")
    page.select_option("#group-by", "namespace")  # by namespace, held by the URL
    expect(page).to_have_url(re.compile(r"group=namespace"))
    by_ns = api_groups(stack, ADMIN, limit=10, by="namespace")
    expect(items).to_have_count(len(by_ns))
    counts = group_facets(stack, "namespace")
    expect(page.locator("#summary")).to_have_text(f"{counts['total']:,} namespaces match")
    expect(items.first.locator("summary")).to_contain_text(
        f"namespace {by_ns[0]['namespace'] or '(cluster-scoped objects)'}"
    )
    page.reload()
    expect(page.locator("#group-toggle")).to_be_checked()
    page.uncheck("#group-toggle")  # back to the rows
    expect(page).not_to_have_url(re.compile(r"group="))
    expect(page.locator(".table-wrap")).to_be_visible()


def group_facets(stack: Stack, by: str) -> dict[str, Any]:
    url = f"{stack.base}/api/v1/facets"
    resp = requests.get(url, params={"by": by}, headers=ADMIN, timeout=10)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_detail_refusal_and_links(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    cluster, namespace, name = stack.unhealthy[0]
    page.goto(f"/?kind=Kustomization&namespace={namespace}&cluster={cluster}")
    button = page.get_by_role("button", name=f"{name}: show the live Kustomization")
    button.click()
    dialog = page.locator("#detail")
    expect(dialog).to_be_visible()
    body = page.locator("#detail-body")
    expect(body).to_contain_text("kind: Kustomization")
    expect(body).to_contain_text(f"name: {name}")
    expect(body).to_contain_text("kustomize build failed: missing resource")
    assert "managedFields" not in body.text_content()
    shot(page, "detail")
    # The YAML shown reads back as the very object the API returned.
    live = requests.get(
        f"{stack.base}/api/v1/objects/{cluster}/{namespace}/Kustomization/{name}",
        headers=ADMIN,
        timeout=10,
    ).json()["object"]
    assert yaml.safe_load(body.text_content()) == live
    tricky = {
        "a": "", "b": "true", "c": "1.5", "d": "two\nlines", "d2": "ends\n", "d3": " x\ny",
        "e": [], "f": {}, "g": [{"x": 1, "y": [1, "2"]}, [1, 2], None], "h": None, "i": "#x",
        "j": "- x", "k": "a: b", "key: colon": 1, "l": " lead", "m": ".5", "n": "y", "o": "~",
        "p": "main@sha1:abc", "q": "trail ", "r": "tab\there", "s": 1e21, "t": False,
        "u": "ünïcode ✓", "v": "a\n\nb\n\n", "0": "zero", "w": "@at", "x": "%pct",
    }  # fmt: skip
    dumped = page.evaluate("async (v) => (await import('/ui/yaml.js')).toYaml(v)", tricky)
    assert yaml.safe_load(dumped) == tricky, dumped
    page.get_by_label("JSON").check()
    expect(body).to_contain_text('"kind": "Kustomization"')
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(button).to_be_focused()

    # A user who may list but not get: the leaf refuses, and the page says so plainly.
    view_as(page, LISTER)
    expect_names(page, api_names(stack, {"X-Remote-User": LISTER}, kind="Kustomization",
                                 namespace=namespace, cluster=cluster))  # fmt: skip
    page.get_by_role("button", name=f"{name}: show the live Kustomization").click()
    error = page.locator("#detail-error")
    expect(error).to_contain_text(f"{cluster} refused to show you Kustomization")
    expect(body).to_be_hidden()
    shot(page, "detail-refused")
    page.click("#detail-close")

    # External links: the annotation's https URL is a link; a javascript: URL never is.
    view_as(page, "admin-0")
    page.goto(f"/?kind=GitRepository&cluster={stack.sim.clusters[0]}&limit=200")
    links = page.locator(f"{ROWS} a.external")
    expect(links).to_have_count(1)
    assert links.get_attribute("href") == EXTERNAL_URL
    assert links.get_attribute("rel") == "noopener noreferrer"
    templated = page.evaluate(
        """async () => {
            const m = await import('/ui/links.js');
            const row = {cluster: 'c 1', namespace: 'ns', kind: 'Route', name: 'web', uiUrl: null};
            return [
              m.externalUrl(row, {Route: 'https://argo.example/{cluster}/{namespace}/{name}'}),
              m.externalUrl(row, {Route: 'javascript:alert({name})'}),
              m.externalUrl({...row, uiUrl: 'ftp://x/'}, {}),
            ];
        }"""
    )
    assert templated == ["https://argo.example/c%201/ns/web", None, None]


def test_demo_users_see_their_own_rows(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/?limit=200")
    admin = api_names(stack, ADMIN, limit=200)
    expect_names(page, admin)
    assert {n.split("/")[0] for n in admin} == set(stack.sim.clusters)

    view_as(page, "solo")
    solo = api_names(stack, {"X-Remote-User": "solo"}, limit=200)
    expect_names(page, solo)
    assert solo and len({tuple(n.split("/")[:2]) for n in solo}) == 1 and len(solo) < len(admin)
    shot(page, "demo-solo")

    view_as(page, "nobody")
    expect(page.locator(ROWS)).to_have_count(0)
    expect(page.locator("#empty")).to_have_text(
        "No objects to show: none collected yet, or none you may list."
    )
    page.reload()  # the choice survives a reload
    expect(page.locator("#demo-user")).to_have_value("nobody")
    view_as(page, "admin-0")
    expect_names(page, admin)
    page.goto("/?limit=12")
    expect(page.locator(ROWS)).to_have_count(12)
    shot(page, "list-view", full_page=False)  # the README's picture


def test_degraded_and_rebuilding_banners(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    banner = page.locator("#banner")
    page.goto("/")
    expect(page.locator(ROWS).first).to_be_visible()
    expect(banner).to_be_hidden()

    stack.r.hset(keys.CLUSTERS, "cluster-new", '{"source": "dir"}')
    page.reload()
    expect(banner).to_contain_text("Rebuilding index: 2 of 3 clusters collected")
    stack.r.hdel(keys.CLUSTERS, "cluster-new")

    down = stack.sim.clusters[1]
    stack.sim.set_fault(down, down=True)
    try:
        assert not any(o.ok for o in stack.collect([down]))
        page.reload()
        expect(banner).to_contain_text(f"Stale data from {down} (last good sync ")
        expect(banner).to_contain_text("Degraded: 2 of 2 clusters collected; 1 stale")
        assert {n.split("/")[0] for n in shown_names(page)} >= {down}  # last good rows stay
        shot(page, "degraded")
        page.click("#banner a")
        expect(page).to_have_url(re.compile(r"/status$"))
        row = page.locator("#clusters tbody tr", has_text=down)
        expect(row).to_contain_text("stale")
        expect(row).to_contain_text("connection failed")
        expect(page.locator("#state")).to_contain_text("degraded")
        shot(page, "status-degraded")
    finally:
        stack.sim.set_fault(down, down=False)
        assert all(o.ok for o in stack.collect([down]))
    page.reload()
    expect(banner).to_be_hidden()
    expect(page.locator("#clusters tbody tr", has_text=down)).to_contain_text("ok")


CONTRAST_JS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const worst = [];
  const selector = 'td, th, label, legend, button, a, .badge, .summary, .count, small, #page-info';
  for (const el of document.querySelectorAll(selector)) {
    if (!el.offsetParent || !el.textContent.trim()) continue;
    const style = getComputedStyle(el);
    if (el.disabled) continue;  // WCAG exempts inactive controls
    const a = lum(rgb(style.color)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) worst.push(`${el.tagName}.${el.className} "${el.textContent.trim()}" ${ratio.toFixed(2)}`);
  }
  return worst;
}"""

UNLABELLED_JS = """() => [...document.querySelectorAll('input, select, button, textarea')]
  .filter((el) => el.offsetParent || el.closest('dialog[open]'))
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                  && !el.textContent.trim())
  .map((el) => el.outerHTML)"""


def test_accessible_and_never_more_than_a_page(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    calls: list[str] = []
    page.on(
        "request",
        lambda req: (
            calls.append(req.url)
            if "/api/v1/" in req.url and "/api/v1/alerts" not in req.url  # the header's count
            else None
        ),
    )
    page.goto("/?limit=10")
    expect(page.locator(ROWS)).to_have_count(10)
    # One page and one set of counts per view: the cost does not grow with the fleet (and at
    # most one live stream, docs/ui.md#live, which replaces the previous view's).
    asked = [u.split("/api/v1/")[1] for u in calls]
    assert sorted(a for a in asked if not a.startswith("watch?")) == ["facets", "objects?limit=10"]
    assert sum(a.startswith("watch?") for a in asked) <= 1
    calls.clear()
    page.click("#next")
    expect(page).to_have_url(re.compile(r"continue="))
    page.wait_for_selector("#rows:not([aria-busy])")
    asked = [u.split("/api/v1/")[1].split("&")[0] for u in calls]
    assert [a for a in asked if not a.startswith("watch?")] == ["objects?limit=10"]
    assert sum(a.startswith("watch?") for a in asked) <= 1

    assert page.evaluate(UNLABELLED_JS) == []
    assert page.evaluate(CONTRAST_JS) == []

    # Keyboard only: skip link, then Tab reaches the rows; Enter opens the live object and
    # Escape returns focus to the row's button.
    page.goto("/?limit=10")
    expect(page.locator(ROWS)).to_have_count(10)
    page.keyboard.press("Tab")
    expect(page.locator("a.skip")).to_be_focused()
    first = page.locator(f"{ROWS} button.linkish").first
    for _ in range(80):
        if first.evaluate("el => el === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-body")).to_contain_text("apiVersion:")
    assert page.evaluate(UNLABELLED_JS) == []
    page.keyboard.press("Escape")
    expect(first).to_be_focused()


def test_oidc_mode_sends_the_pasted_bearer_token(stack: Stack, page: Any, tmp_path: Any) -> None:
    """Without an authenticating proxy the page asks for an ID token and then sends it."""
    import dataclasses
    import json
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec
    from playwright.sync_api import expect

    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}]}))
    issuer = "https://issuer.example"
    settings = dataclasses.replace(
        stack.settings,
        auth_mode="oidc",
        ui_demo_mode=False,
        oidc_issuer_url=issuer,
        oidc_client_id="fleetscope",
        oidc_jwks_file=str(tmp_path / "jwks.json"),
    )
    held: list[Any] = []  # the header's first (tokenless) alert count, answered only later

    def hold_first(route: Any) -> None:
        if held or "authorization" in route.request.headers:
            route.continue_()
        else:
            held.append(route)

    page.route("**/api/v1/alerts", hold_first)
    with serve(make_app(settings)) as host:
        base = f"http://{host}"
        page.goto(f"{base}/?limit=5")
        expect(page.locator("#signin")).to_be_visible()
        expect(page.locator("#demo-user")).to_have_count(0)
        expect(page.locator(ROWS)).to_have_count(0)
        deadline = time.monotonic() + 10
        while not held and time.monotonic() < deadline:
            page.wait_for_timeout(20)  # lets Playwright dispatch the route to hold_first
        assert len(held) == 1
        now = int(time.time())
        claims = {"iss": issuer, "aud": "fleetscope", "sub": "admin-0", "iat": now,
                  "exp": now + 300, "groups": ["fleet-admins"]}  # fmt: skip
        token = jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})
        page.fill("#signin-token", token)
        page.click("#signin-form button")
        expect(page.locator("#signin")).to_be_hidden()
        expect_names(page, api_names(stack, ADMIN, limit=5))
        # The 401 to the request sent before the token arrives late: it must not ask again.
        with page.expect_response("**/api/v1/alerts") as late:
            held[0].continue_()
        assert late.value.status == 401
        # A negative check: give the page's handler of that answer time to run, then look.
        page.wait_for_timeout(500)
        assert page.locator("#signin").is_hidden()
        page.reload()  # the token stays with the tab
        expect_names(page, api_names(stack, ADMIN, limit=5))


def test_suspension_beside_health_and_cluster_scoped_rows(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    cluster, namespace, name = stack.unhealthy[0]
    stack.sim.patch(cluster, "Kustomization", namespace, name, {"spec": {"suspend": True}})
    assert all(o.ok for o in stack.collect([cluster]))
    page.goto("/?suspended=true")
    suspended = api_names(stack, ADMIN, suspended="true")
    assert f"{cluster}/{namespace}/Kustomization/{name}" in suspended
    expect_names(page, suspended)
    index = suspended.index(f"{cluster}/{namespace}/Kustomization/{name}")
    row = page.locator(f"{ROWS} >> nth={index}")
    # The health and the suspension, side by side: failing and suspended.
    expect(row.locator(".badge-unhealthy")).to_have_text("unhealthy")
    expect(row.locator(".badge-suspended")).to_have_text("suspended")
    expect(page.locator("#f-suspended input[value=true]")).to_be_checked()
    shot(page, "suspended")
    page.locator("#f-suspended input[value=true]").uncheck()
    page.locator("#f-suspended input[value=false]").check()
    expect(page).to_have_url(re.compile(r"suspended=false"))
    expect_names(page, api_names(stack, ADMIN, suspended="false"))

    # GatewayClass is cluster-scoped: no namespace on the row, `_` in the detail path.
    page.goto("/?namespace=_&kind=GatewayClass")
    classes = api_names(stack, ADMIN, namespace="_", kind="GatewayClass")
    assert classes and all("/_/GatewayClass/" in n for n in classes)
    expect_names(page, classes)
    expect(page.locator(f"{ROWS} >> nth=0 >> td >> nth=1")).to_have_text("(cluster)")
    gc = classes[0].rsplit("/", 1)[1]
    page.get_by_role("button", name=f"{gc}: show the live GatewayClass").first.click()
    expect(page.locator("#detail-body")).to_contain_text("kind: GatewayClass")
    expect(page.locator("#detail-title")).to_have_text(re.compile(rf"^GatewayClass {gc} · "))
    page.click("#detail-close")
    # A team member bound by RoleBindings sees no cluster-scoped row.
    member = next(u for u in fleet_users(stack.sim.fleet) if u.name.startswith("dev-team"))
    view_as(page, member.name)
    expect_names(page, [])


def relations(stack: Stack, headers: dict[str, str], ref: dict[str, Any], depth: int = 1) -> Any:
    path = f"{ref['cluster']}/{ref['namespace'] or '_'}/{ref['kind']}/{ref['name']}"
    resp = requests.get(
        f"{stack.base}/api/v1/objects/{path}/relations",
        params={"depth": depth},
        headers=headers,
        timeout=10,
    )
    resp.raise_for_status()
    return resp.json()


def edge_texts(edges: list[dict[str, Any]]) -> list[str]:
    """What the dialog shows for each edge, as the API describes it."""
    out = []
    for e in edges:
        name = f"{e['namespace']}/{e['name']}" if e["namespace"] else e["name"]
        section = f" listener {e['sectionName']}" if e.get("sectionName") else ""
        mark = "missing" if not e["exists"] else e["status"] or "external"
        out.append(f"{e['relation']} {e['kind']} {name}{section} {mark}")
    return out


def self_text(row: dict[str, Any]) -> str:
    """The dialog's line about the object itself, for its row as the API returns it."""
    out = f"This object: {row['status']}" + (" suspended" if row["suspended"] else "")
    b = row.get("blockedBy")
    if b:
        where = f"{b['namespace']}/{b['name']}" if b["namespace"] else b["name"]
        out += f" blocked by {b['kind']} {where}" + ("" if b["exists"] else " missing")
    return out


def test_relations_and_blocked_by(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    items = requests.get(
        f"{stack.base}/api/v1/objects", params={"limit": 500}, headers=ADMIN, timeout=10
    ).json()["items"]
    row = next(r for r in items if r.get("blockedBy", {}).get("exists"))
    cause = row["blockedBy"]
    label = f"{cause['kind']} {cause['namespace']}/{cause['name']}"
    page.goto(f"/?cluster={row['cluster']}&namespace={row['namespace']}&kind={row['kind']}")
    line = page.locator(f"{ROWS} .blocked").first
    expect(line).to_have_text(f"blocked by {label}")
    shot(page, "blocked-by")

    # The cause opens in the dialog with its relations, as the API answers them.
    line.get_by_role("button").click()
    expect(page.locator("#detail-title")).to_have_text(f"{label} · {row['cluster']}")
    answer = relations(stack, ADMIN, cause)
    up, down = page.locator("#upstream li"), page.locator("#downstream li")
    expect(up).to_have_text(edge_texts(answer["upstream"]) or ["none"])
    expect(down).to_have_text(edge_texts(answer["downstream"]) or ["none"])
    expect(page.locator("#relations-self")).to_have_text(
        f"This object: {answer['object']['status']}"
    )
    assert f"{row['kind']} {row['namespace']}/{row['name']}" in " ".join(down.all_text_contents())
    expect(page.locator("#relations-hidden")).to_be_hidden()
    expect(page.locator("#downstream .badge").first).to_be_visible()
    shot(page, "relations")
    page.select_option("#relations-depth", "3")
    deeper = relations(stack, ADMIN, cause, 3)
    expect(up).to_have_text(edge_texts(deeper["upstream"]) or ["none"])
    expect(down).to_have_text(edge_texts(deeper["downstream"]) or ["none"])
    page.select_option("#relations-depth", "1")
    assert page.evaluate(UNLABELLED_JS) == []

    # A related row opens its own detail in place; Escape returns to where the user started.
    page.get_by_role(
        "button", name=f"{row['kind']} {row['namespace']}/{row['name']}: show its detail"
    ).click()
    expect(page.locator("#detail-title")).to_contain_text(
        f"{row['kind']} {row['namespace']}/{row['name']}"
    )
    expect(page.locator("#relations-self")).to_have_text(self_text(row))
    expect(page.locator("#upstream li", has_text=label).locator(".badge")).to_have_text(
        relations(stack, ADMIN, cause)["object"]["status"]
    )
    page.keyboard.press("Escape")
    expect(line.get_by_role("button")).to_be_focused()

    # A dangling reference: "missing", on the row's blocked-by line and in its relations.
    cluster, namespace = row["cluster"], row["namespace"]
    orphan = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "orphan", "namespace": namespace},
        "spec": {
            "dependsOn": [{"name": "ghost"}],
            "sourceRef": {"kind": "GitRepository", "name": "nope"},
        },
    }
    stack.sim.apply(cluster, orphan)
    try:
        assert all(o.ok for o in stack.collect([cluster]))
        page.goto(f"/?cluster={cluster}&namespace={namespace}&kind=Kustomization&name=orphan")
        blocked = page.locator(f"{ROWS} .blocked")
        expect(blocked).to_have_text(f"blocked by GitRepository {namespace}/nope missing")
        expect(blocked.get_by_role("button")).to_have_count(0)  # nothing to open
        page.get_by_role("button", name="orphan: show the live Kustomization").click()
        expect(page.locator("#upstream li")).to_have_text(
            [
                f"source GitRepository {namespace}/nope missing",
                f"dependsOn Kustomization {namespace}/ghost missing",
            ]
        )
        expect(page.locator("#upstream .marker-missing")).to_have_count(2)
        page.keyboard.press("Escape")
    finally:
        stack.sim.delete(cluster, "Kustomization", namespace, "orphan")
        assert all(o.ok for o in stack.collect([cluster]))

    # A user who may list only their namespace: related objects elsewhere are only counted.
    view_as(page, "solo")
    mine = requests.get(
        f"{stack.base}/api/v1/objects",
        params={"kind": "Kustomization"},
        headers={"X-Remote-User": "solo"},
        timeout=10,
    ).json()["items"]
    target = next(r for r in mine if relations(stack, {"X-Remote-User": "solo"}, r)["hidden"])
    theirs = relations(stack, {"X-Remote-User": "solo"}, target)
    everything = relations(stack, ADMIN, target)
    unseen = {e["name"] for e in everything["upstream"] + everything["downstream"]} - {
        e["name"] for e in theirs["upstream"] + theirs["downstream"]
    }
    assert unseen
    page.goto(f"/?kind=Kustomization&namespace={target['namespace']}")
    page.get_by_role("button", name=f"{target['name']}: show the live Kustomization").click()
    hidden = page.locator("#relations-hidden")
    expect(hidden).to_have_text(f"+{theirs['hidden']} hidden: related objects you may not list")
    expect(page.locator("#upstream li")).to_have_text(
        edge_texts(theirs["upstream"]) or ["none you may list"]
    )
    text = page.locator("#relations").text_content()
    for name in unseen:
        assert name not in text
    shot(page, "relations-hidden")


def test_download_csv_holds_every_row_of_the_current_filters(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto("/?limit=2&status=unhealthy,progressing")
    expect(page.locator("#demo-user")).to_have_value("admin-0")
    expect(page.locator(ROWS)).to_have_count(2)
    with page.expect_download() as got:
        page.locator("#download-csv").click()
    download = got.value
    assert download.suggested_filename == "fleetscope-objects.csv"
    with open(download.path(), "rb") as f:
        saved = f.read()
    want = requests.get(
        f"{stack.base}/api/v1/objects",
        params={"status": "unhealthy,progressing"},
        headers={**ADMIN, "Accept": "text/csv"},
        timeout=10,
    )
    assert saved == want.content  # every page, not the two rows shown
    assert (
        saved.count(b"\r\n") - 1
        == len(api_names(stack, ADMIN, status="unhealthy,progressing", limit=500))
        > 2
    )


def test_label_selector_field_and_labels_in_the_detail(stack: Stack, page: Any) -> None:
    from playwright.sync_api import expect

    selector = "app.kubernetes.io/component=mesh,app.kubernetes.io/managed-by!=kubectl"
    want = api_names(stack, ADMIN, labelSelector=selector, limit=10)
    assert want, "the fleet should hold objects with these labels"
    page.goto("/?limit=10")
    page.fill("#f-labels", selector)
    page.press("#f-labels", "Enter")
    expect(page).to_have_url(re.compile(r"labelSelector=app.kubernetes.io%2Fcomponent%3Dmesh"))
    expect_names(page, want)
    total = requests.get(
        f"{stack.base}/api/v1/facets", params={"labelSelector": selector}, headers=ADMIN, timeout=10
    ).json()["total"]
    expect(page.locator("#summary")).to_have_text(f"{total:,} objects match")
    shot(page, "label-selector")

    # The URL holds the selector: a fresh load shows the same rows and fills the field.
    page.goto(page.url)
    expect(page.locator("#f-labels")).to_have_value(selector)
    expect_names(page, want)

    # The detail shows the row's labels.
    row = requests.get(
        f"{stack.base}/api/v1/objects",
        params={"labelSelector": selector, "limit": 1},
        headers=ADMIN,
        timeout=10,
    ).json()["items"][0]
    page.locator(f"{ROWS} >> nth=0").get_by_role("button").first.click()
    chips = page.locator("#labels-list li")
    expect(chips).to_have_count(len(row["labels"]))
    assert chips.all_text_contents() == [f"{k}={v}" for k, v in row["labels"].items()]
    shot(page, "detail-labels")
    page.click("#detail-close")

    # A malformed selector is the API's message, on the page.
    page.fill("#f-labels", "app in (web")
    page.press("#f-labels", "Enter")
    expect(page.locator("#error")).to_contain_text("unable to parse requirement")
    expect(page.locator("#error")).to_contain_text("position 11")
    page.click("#clear")
    expect(page).not_to_have_url(re.compile(r"labelSelector="))
    expect(page.locator("#f-labels")).to_have_value("")
