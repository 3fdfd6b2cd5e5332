// The object list: filters and position live in the URL (bookmarkable); one page of rows from
// /api/v1/objects at a time (or, grouped across clusters, of groups from /api/v1/groups),
// counts from /api/v1/facets, the live object in a dialog.

import {
  api,
  config,
  downloadCsv,
  el,
  setUpIdentity,
  showBanner,
  showError,
  timeElement,
} from "./api.js";
import { describe, openDetail, refElement, setUpDetail } from "./detail.js";
import { externalUrl } from "./links.js";
import { follow, stop as stopLive } from "./live.js";

const DIMENSIONS = { status: "f-status", suspended: "f-suspended", kind: "f-kind", cluster: "f-cluster" };
const FILTERS = ["cluster", "namespace", "kind", "status", "suspended", "name", "labelSelector"];
const SUSPENSION = { true: "suspended", false: "not suspended" };
const SORTS = ["-lastTransitionTime", "lastTransitionTime"]; // newest first, oldest first
// The header cycles: the default order, newest first, oldest first, back to the default.
const NEXT_SORT = { "": SORTS[0], [SORTS[0]]: SORTS[1], [SORTS[1]]: "" };
const GROUPINGS = ["object", "namespace"]; // `group=` in the URL: /api/v1/groups?by=
const RANKED = ["unhealthy", "progressing", "unknown", "healthy"]; // worst first, as groups list
const MAX_PREV = 100; // pages remembered for "Previous" (history state); beyond, "First"

const NO_COUNTS = { total: null, status: {}, suspended: {}, kind: {}, cluster: {} };

let sequence = 0;
let facetCache = { key: null, counts: null };

function split(values) {
  return values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean);
}

function readState() {
  const q = new URLSearchParams(location.search);
  const state = { name: (q.get("name") || "").trim(), cont: q.get("continue") || "" };
  state.labelSelector = (q.get("labelSelector") || "").trim();
  for (const f of ["cluster", "namespace", "kind", "status"]) state[f] = split(q.getAll(f));
  state.suspended = ["true", "false"].includes(q.get("suspended")) ? [q.get("suspended")] : [];
  state.sort = SORTS.includes(q.get("sort")) ? q.get("sort") : "";
  state.group = GROUPINGS.includes(q.get("group")) ? q.get("group") : "";
  // `drift=true`: only object groups whose clusters run two or more revisions.
  state.drift = state.group === "object" && q.get("drift") === "true";
  const limit = Number.parseInt(q.get("limit") || "", 10);
  state.limit = limit >= 1 && limit <= config.maxLimit ? limit : config.defaultLimit;
  return state;
}

function filterParams(state, without) {
  const p = new URLSearchParams();
  for (const f of ["cluster", "namespace", "kind", "status"]) {
    if (f !== without && state[f].length) p.set(f, state[f].join(","));
  }
  // One value filters; both (or none) chosen means either.
  if (without !== "suspended" && state.suspended.length === 1) p.set("suspended", state.suspended[0]);
  if (state.name) p.set("name", state.name);
  if (state.labelSelector) p.set("labelSelector", state.labelSelector);
  return p;
}

function pageUrl(state, cont) {
  const p = filterParams(state);
  if (state.group) p.set("group", state.group);
  else if (state.sort) p.set("sort", state.sort);
  if (state.drift && state.group === "object") p.set("drift", "true");
  if (state.limit !== config.defaultLimit) p.set("limit", String(state.limit));
  if (cont) p.set("continue", cont);
  return p.toString() ? `/?${p}` : "/";
}

function navigate(state, cont, prev) {
  history.pushState({ prev }, "", pageUrl(state, cont));
  load();
}

// -- loading ------------------------------------------------------------------------------

async function facets(state) {
  // Grouped across clusters, the counts are of groups (`by`), as the list shows them.
  const counted = (without) => {
    const p = filterParams(state, without);
    if (state.group) p.set("by", state.group);
    return p;
  };
  const key = counted().toString();
  if (facetCache.key === key) return facetCache.counts;
  // Each dimension's counts ignore that dimension's own filter, so every choice shows how
  // many rows (or groups) it would add; one extra call per filtered dimension.
  const calls = [api("/facets", counted())];
  for (const dim of Object.keys(DIMENSIONS)) {
    if (state[dim].length) calls.push(api("/facets", counted(dim)).then((f) => [dim, f]));
  }
  const [base, ...others] = await Promise.all(calls);
  const pick = (f) => ({ status: f.statuses, suspended: f.suspended || {}, kind: f.kinds, cluster: f.clusters });
  const counts = { total: base.total, ...pick(base) };
  for (const [dim, f] of others) counts[dim] = pick(f)[dim];
  facetCache = { key, counts };
  return counts;
}

async function load() {
  const mine = ++sequence;
  const state = readState();
  fillForm(state);
  showError("error", "");
  document.getElementById("rows").setAttribute("aria-busy", "true");
  const params = filterParams(state);
  if (state.group) params.set("by", state.group);
  else if (state.sort) params.set("sort", state.sort);
  if (state.drift) params.set("drift", "true");
  params.set("limit", String(state.limit));
  if (state.cont) params.set("continue", state.cont);
  try {
    // Counts are a convenience: without them the page still lists its rows.
    const counting = facets(state).catch(() => NO_COUNTS);
    const listing = api(state.group ? "/groups" : "/objects", params);
    const [page, counts] = await Promise.all([listing, counting]);
    if (mine !== sequence) return;
    showBanner(page.freshness);
    renderChoices(state, counts);
    if (state.group) renderGroups(page.items, state);
    else renderRows(page.items, state);
    renderPager(state, page, state.drift ? null : counts.total); // facets count every group
    // Rows on this page change in place as the stream says (no polling); groups do not.
    if (state.group) stopLive();
    else follow(filterParams(state), page.resourceVersion, updateRow, load);
  } catch (e) {
    if (mine !== sequence) return;
    if (state.group) renderGroups([], state);
    else renderRows([], state);
    renderPager(state, { items: [], continue: null }, null);
    showError("error", errorText(e));
  } finally {
    if (mine === sequence) document.getElementById("rows").removeAttribute("aria-busy");
  }
}

function errorText(e) {
  if (e.status === 400 && e.message.includes("continue")) {
    return `This page link no longer works (${e.message}). Use "First" to start over.`;
  }
  return e.message;
}

// -- filters ------------------------------------------------------------------------------

function fillForm(state) {
  renderSort(state);
  document.getElementById("group-toggle").checked = Boolean(state.group);
  const by = document.getElementById("group-by");
  by.hidden = !state.group;
  by.value = state.group || "object";
  const drift = document.getElementById("drift-toggle");
  drift.checked = state.drift;
  drift.closest("label").hidden = state.group !== "object";
  document.getElementById("f-name").value = state.name;
  document.getElementById("f-namespace").value = state.namespace.join(", ");
  document.getElementById("f-labels").value = state.labelSelector;
  const limit = document.getElementById("limit");
  if (![...limit.options].some((o) => o.value === String(state.limit))) {
    limit.add(new Option(String(state.limit)));
  }
  limit.value = String(state.limit);
}

function renderChoices(state, counts) {
  const all = {
    status: config.statuses,
    suspended: ["true", "false"],
    kind: config.kinds,
    cluster: Object.keys(counts.cluster),
  };
  for (const [dim, id] of Object.entries(DIMENSIONS)) {
    const box = document.querySelector(`#${id} .choices`);
    const chosen = new Set(state[dim]);
    const fixed = dim === "status" || dim === "suspended";
    const values = all[dim].filter((v) => fixed || chosen.has(v) || counts[dim][v]);
    for (const v of chosen) if (!values.includes(v)) values.push(v);
    box.replaceChildren(
      ...values.map((v) => choice(dim, v, counts[dim][v] || 0, chosen.has(v))),
    );
    if (!values.length) box.append(el("span", "none visible", "muted"));
  }
}

function choice(dim, value, count, checked) {
  const label = el("label", null, "choice");
  label.title = value;
  const box = document.createElement("input");
  box.type = "checkbox";
  box.name = dim;
  box.value = value;
  box.checked = checked;
  box.addEventListener("change", applyForm);
  let text = el("span", value);
  if (dim === "status") text = el("span", value, `badge badge-${value}`);
  if (dim === "suspended") text = el("span", SUSPENSION[value]);
  label.append(box, text, el("span", count.toLocaleString(), "count"));
  return label;
}

function applyForm(ev) {
  if (ev) ev.preventDefault();
  const form = document.getElementById("filters");
  if (!form.reportValidity()) return;
  const state = readState();
  for (const dim of Object.keys(DIMENSIONS)) {
    state[dim] = [...form.querySelectorAll(`input[name=${dim}]:checked`)].map((b) => b.value);
  }
  state.namespace = split([document.getElementById("f-namespace").value]);
  state.name = document.getElementById("f-name").value.trim().toLowerCase();
  state.labelSelector = document.getElementById("f-labels").value.trim();
  navigate(state, "", []);
}

function renderSort(state) {
  const th = document.getElementById("th-transition");
  document.getElementById("sort-transition").disabled = Boolean(state.group);
  const button = document.getElementById("sort-transition");
  th.setAttribute("aria-sort", { "": "none", [SORTS[0]]: "descending", [SORTS[1]]: "ascending" }[state.sort]);
  button.textContent = { "": "Last transition", [SORTS[0]]: "Last transition ↓", [SORTS[1]]: "Last transition ↑" }[state.sort];
  button.title = {
    "": "Sort by last transition, newest first",
    [SORTS[0]]: "Newest first; click for oldest first",
    [SORTS[1]]: "Oldest first; click for the default order (cluster, namespace, kind, name)",
  }[state.sort];
}

// -- rows ---------------------------------------------------------------------------------

function shortRevision(rev) {
  const m = /^(.*[@:])([0-9a-f]{12,})$/.exec(rev);
  return m ? `${m[1]}${m[2].slice(0, 7)}…` : rev;
}

function renderRows(items, state) {
  document.querySelector(".table-wrap").hidden = false;
  document.getElementById("groups").hidden = true;
  const body = document.querySelector("#rows tbody");
  body.replaceChildren(...items.map(rowElement));
  renderEmpty(items.length, state);
}

function renderEmpty(shown, state) {
  const empty = document.getElementById("empty");
  empty.hidden = shown > 0;
  const filtered = FILTERS.some((f) => (Array.isArray(state[f]) ? state[f].length : state[f]));
  empty.textContent = filtered
    ? "No object you can see matches these filters."
    : "No objects to show: none collected yet, or none you may list.";
}

function rowKey(row) {
  return [row.cluster, row.namespace, row.kind, row.name].join("/");
}

// A change from the live feed: the row on this page is replaced (its status badge and message
// change colour and text in place) or, DELETED, marked gone; rows not on this page are left to
// the pages that hold them.
function updateRow(type, row) {
  const body = document.querySelector("#rows tbody");
  const old = [...body.children].find((tr) => tr.dataset.key === rowKey(row));
  if (!old) return;
  if (type === "DELETED") {
    old.classList.add("gone");
    old.title = "No longer listed under these filters";
    return;
  }
  old.replaceWith(rowElement(row));
}

function rowElement(row) {
  const tr = document.createElement("tr");
  tr.dataset.key = rowKey(row);
  const open = el("button", row.name, "linkish");
  open.type = "button";
  open.setAttribute("aria-label", `${row.name}: show the live ${row.kind}`);
  open.addEventListener("click", () => openDetail(row));
  const status = document.createElement("span");
  const health = el("span", row.status, `badge badge-${row.status}`);
  if (row.reason) health.title = row.reason;
  status.append(health);
  // Suspension is shown beside the health, never instead of it (as `flux get` does).
  if (row.suspended) status.append(" ", el("span", "suspended", "badge badge-suspended"));
  const blocked = blockedElement(row);
  if (blocked) status.append(blocked);
  const message = el("span", row.message, "message");
  message.title = row.message;
  if (row.warnings) {
    const n = row.warnings;
    message.prepend(el("span", `⚠ ${n}`, "warnings"), " ");
    message.title = `${n} warning${n === 1 ? "" : "s"}: ${row.message}`;
  }
  // Cluster-scoped objects (GatewayClass) have no namespace.
  const namespace = row.namespace ? el("td", row.namespace) : td(el("span", "(cluster)", "muted"));
  const revision = el("span", shortRevision(row.revision), "revision");
  revision.title = row.revision;
  const cells = [
    el("td", row.cluster),
    namespace,
    el("td", row.kind),
    td(open),
    td(status),
    td(message),
    td(timeElement(row.lastTransitionTime)),
    td(revision),
    td(linkElement(row)),
  ];
  tr.append(...cells);
  tr.addEventListener("click", (ev) => {
    if (!ev.target.closest("a, button")) openDetail(row);
  });
  return tr;
}

// The root cause: the nearest failing or missing object upstream (only when the caller may
// list it: the API leaves it out otherwise).
function blockedElement(row) {
  const b = row.blockedBy;
  if (!b) return null;
  const box = el("div", "blocked by ", "blocked");
  const label = describe(b);
  box.append(refElement(b, label, `${row.name} is blocked by ${label}: show its detail`));
  if (!b.exists) box.append(" ", el("span", "missing", "marker-missing"));
  return box;
}

function td(child) {
  const cell = document.createElement("td");
  if (child) cell.append(child);
  return cell;
}

function linkElement(row) {
  const url = externalUrl(row, config.uiUrlTemplates);
  if (!url) return null;
  const a = el("a", "↗", "external");
  a.title = url;
  a.href = url;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  a.setAttribute("aria-label", `Open ${row.name} in its external UI`);
  return a;
}

// -- groups across clusters ---------------------------------------------------------------

function renderGroups(items, state) {
  document.querySelector(".table-wrap").hidden = true;
  const list = document.getElementById("groups");
  list.hidden = false;
  list.replaceChildren(...items.map(groupElement));
  renderEmpty(items.length, state);
}

// "podinfo HelmRelease in apps: unhealthy in 20 of 200 clusters", expanding to the clusters.
function groupElement(g) {
  const li = document.createElement("li");
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  const where = g.namespace ? `in ${g.namespace}` : "(cluster-scoped)";
  const what = g.kind ? `${g.name} ${g.kind} ${where}` : `namespace ${g.namespace || "(cluster-scoped objects)"}`;
  summary.append(el("strong", what, "group-name"), ": ", statusLine(g));
  if (g.revisions && g.revisions.length) summary.append(" · ", revisionLine(g));
  details.append(summary, clusterList(g.clusters, g));
  if (g.total > g.clusters.length) {
    const more = el("button", `Show all ${g.total.toLocaleString()} clusters`, "linkish more");
    more.type = "button";
    more.addEventListener("click", () => showAll(g, details, more));
    details.append(more);
  }
  li.append(details);
  return li;
}

function statusLine(g) {
  const line = el("span", null, "group-statuses");
  const present = RANKED.filter((s) => g.statuses[s]);
  const shown = present.some((s) => s !== "healthy") ? present.filter((s) => s !== "healthy") : present;
  shown.forEach((s, i) => {
    if (i) line.append(", ");
    line.append(el("span", s, `badge badge-${s}`), ` in ${g.statuses[s].toLocaleString()}`);
  });
  line.append(` of ${g.total.toLocaleString()} cluster${g.total === 1 ? "" : "s"}`);
  if (g.suspended) line.append(" · ", el("span", `suspended in ${g.suspended}`, "badge badge-suspended"));
  return line;
}

// "6.5.0 on 180, 6.4.1 on 20 clusters": the revisions its clusters run, most first.
function revisionLine(g) {
  const line = el("span", null, "group-revisions");
  g.revisions.forEach((r, i) => {
    if (i) line.append(", ");
    line.append(el("code", r.revision, "revision"), ` on ${r.clusters.toLocaleString()}`);
  });
  const other = g.otherRevisions || { revisions: 0 };
  let last = g.revisions[g.revisions.length - 1].clusters;
  if (other.revisions) {
    line.append(`, ${other.revisions} more on ${other.clusters.toLocaleString()}`);
    last = other.clusters;
  }
  line.append(` cluster${last === 1 ? "" : "s"}`);
  return line;
}

function clusterList(members, g) {
  // Drift only: the clusters by revision (most common first), each revision under its heading.
  if (readState().drift && g.kind) return revisionSections(members, g);
  const list = el("ul", null, "group-clusters");
  for (const m of members) list.append(clusterItem(m, g));
  return list;
}

function revisionSections(members, g) {
  const order = (g.revisions || []).map((r) => r.revision);
  const by = new Map(order.map((r) => [r, []]));
  for (const m of members) {
    const rev = m.revision || "";
    if (!by.has(rev)) by.set(rev, []);
    by.get(rev).push(m);
  }
  const list = el("ul", null, "group-clusters group-by-revision");
  for (const [rev, ms] of by) {
    if (!ms.length) continue;
    const section = el("li", null, "revision-section");
    const head = el("span", null, "revision-head");
    head.append(rev ? el("code", rev, "revision") : el("span", "(no revision)", "muted"));
    head.append(` on ${ms.length.toLocaleString()} cluster${ms.length === 1 ? "" : "s"}`);
    const items = el("ul", null, "revision-clusters");
    for (const m of ms) items.append(clusterItem(m, g, false));
    section.append(head, items);
    list.append(section);
  }
  return list;
}

function clusterItem(m, g, withRevision = true) {
  const item = el("li");
  item.append(el("span", m.status, `badge badge-${m.status}`), " ");
  if (g.kind) {
    const ref = { cluster: m.cluster, namespace: g.namespace, kind: g.kind, name: g.name };
    item.append(refElement(ref, m.cluster, `${g.name} on ${m.cluster}: show its detail`));
  } else {
    item.append(m.cluster);
    if (m.objects) item.append(" ", el("span", `(${m.objects} objects)`, "muted"));
  }
  if (m.suspended) item.append(" ", el("span", "suspended", "badge badge-suspended"));
  if (g.kind && m.revision && withRevision) item.append(" ", el("code", m.revision, "revision muted"));
  return item;
}

// Every cluster of a group, from its own route, page by page.
async function showAll(g, details, button) {
  const state = readState();
  const path = g.kind
    ? `/groups/${g.namespace || "_"}/${encodeURIComponent(g.kind)}/${encodeURIComponent(g.name)}`
    : `/groups/${g.namespace || "_"}`;
  const members = [];
  button.disabled = true;
  try {
    let cont = "";
    do {
      const p = filterParams(state);
      p.delete("namespace");
      p.delete("name");
      if (g.kind) p.delete("kind");
      p.delete("drift");
      p.set("limit", String(config.maxLimit));
      if (cont) p.set("continue", cont);
      const page = await api(path, p);
      members.push(...page.items);
      cont = page.continue;
    } while (cont);
    details.querySelector(".group-clusters").replaceWith(clusterList(members, g));
    button.remove();
  } catch (e) {
    button.disabled = false;
    showError("error", e.message);
  }
}

// -- paging -------------------------------------------------------------------------------

function prevStack() {
  return (history.state && Array.isArray(history.state.prev) && history.state.prev) || [];
}

function renderPager(state, page, total) {
  const prev = prevStack();
  const first = !state.cont;
  const number = first ? 1 : prev.length ? prev.length + 1 : null;
  document.getElementById("first").disabled = first;
  document.getElementById("prev").disabled = first || prev.length === 0;
  document.getElementById("next").disabled = !page.continue;
  document.getElementById("next").dataset.token = page.continue || "";
  let info = number ? `Page ${number}` : "A later page";
  if (number && page.items.length) {
    const start = (number - 1) * state.limit + 1;
    info += ` · ${state.group ? "groups" : "rows"} ${start.toLocaleString()}–${(start + page.items.length - 1).toLocaleString()}`;
  }
  document.getElementById("page-info").textContent = info;
  const noun = state.group === "namespace" ? "namespace" : "object";
  const match = total === 1 ? `${noun} matches` : `${noun}s match`;
  document.getElementById("summary").textContent =
    total === null ? "" : `${total.toLocaleString()} ${match}`;
}

function setUpPager() {
  document.getElementById("next").addEventListener("click", (ev) => {
    const state = readState();
    const prev = [...prevStack(), state.cont].slice(-MAX_PREV);
    navigate(state, ev.currentTarget.dataset.token, prev);
  });
  document.getElementById("prev").addEventListener("click", () => {
    const prev = [...prevStack()];
    const cont = prev.pop();
    navigate(readState(), cont, prev);
  });
  document.getElementById("first").addEventListener("click", () => navigate(readState(), "", []));
  document.getElementById("limit").addEventListener("change", (ev) => {
    const state = readState();
    state.limit = Number.parseInt(ev.currentTarget.value, 10);
    navigate(state, "", []);
  });
}

// Every page of the current filters (and grouping or sort) as one CSV file.
async function exportCsv(ev) {
  const state = readState();
  const params = filterParams(state);
  if (state.group) params.set("by", state.group);
  else if (state.sort) params.set("sort", state.sort);
  if (state.drift) params.set("drift", "true");
  const button = ev.currentTarget;
  button.disabled = true;
  showError("error", "");
  try {
    const name = state.group ? `fleetscope-groups-${state.group}.csv` : "fleetscope-objects.csv";
    await downloadCsv(state.group ? "/groups" : "/objects", params, name);
  } catch (e) {
    showError("error", errorText(e));
  } finally {
    button.disabled = false;
  }
}

function setUp() {
  document.getElementById("filters").addEventListener("submit", applyForm);
  document.getElementById("clear").addEventListener("click", () => {
    navigate(
      { ...readState(), cluster: [], namespace: [], kind: [], status: [], name: "", labelSelector: "" },
      "",
      [],
    );
  });
  document.getElementById("sort-transition").addEventListener("click", () => {
    const state = readState();
    navigate({ ...state, sort: NEXT_SORT[state.sort] }, "", []);
  });
  document.getElementById("group-toggle").addEventListener("change", (ev) => {
    const by = document.getElementById("group-by").value || "object";
    navigate({ ...readState(), group: ev.currentTarget.checked ? by : "" }, "", []);
  });
  document.getElementById("group-by").addEventListener("change", (ev) => {
    navigate({ ...readState(), group: ev.currentTarget.value }, "", []);
  });
  document.getElementById("drift-toggle").addEventListener("change", (ev) => {
    navigate({ ...readState(), group: "object", drift: ev.currentTarget.checked }, "", []);
  });
  document.getElementById("download-csv").addEventListener("click", exportCsv);
  setUpPager();
  setUpDetail();
  setUpIdentity(() => {
    facetCache = { key: null, counts: null };
    navigate(readState(), "", []);
  });
  window.addEventListener("popstate", load);
  load();
}

setUp();
