// The detail of a row: its relations from the index (what it depends on, what depends on it,
// as far as the caller may list), its history (history.js) and the live object, read through the detail proxy as the
// caller (the leaf's RBAC decides), shown read-only as YAML or JSON; a refusal is shown as a
// plain explanation. Related objects open their own detail in the same dialog.

import { api, config, el, showError } from "./api.js";
import { loadHistory } from "./history.js";
import { toYaml } from "./yaml.js";

let shown = null; // the object on display
let current = null; // the row on display
let opener = null; // the element focused before the dialog opened
let liveSeq = 0; // answers to requests older than the newest are dropped
let relSeq = 0;

export function describe(ref) {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
}

// `_` stands for the namespace of cluster-scoped objects in the API's paths.
function objectPath(ref) {
  return [ref.cluster, ref.namespace || "_", ref.kind, ref.name].map(encodeURIComponent).join("/");
}

function refusal(row, e) {
  const where = `${describe(row)} on ${row.cluster}`;
  switch (e.status) {
    case 403:
      return `${row.cluster} refused to show you ${where}: ${e.message}`;
    case 404:
      return `${where} was not found (deleted since the last sync?): ${e.message}`;
    case 502:
    case 503:
      return `${row.cluster} could not answer: ${e.message}`;
    case 504:
      return `${row.cluster} did not answer in time: ${e.message}`;
    default:
      return e.message;
  }
}

function format() {
  return document.querySelector("#detail input[name=format]:checked").value;
}

function render() {
  const body = document.getElementById("detail-body");
  body.hidden = shown === null;
  document.querySelector("#detail .format").hidden = shown === null;
  body.textContent = shown === null ? "" : format() === "json" ? JSON.stringify(shown, null, 2) : toYaml(shown);
}

// -- relations ----------------------------------------------------------------------------

// A link to a related object's detail, or plain text when there is none to open (a missing
// object, a Service backend: not a collected kind).
export function refElement(ref, label, ariaLabel) {
  if (!ref.exists || !config.kinds.includes(ref.kind)) return el("span", label);
  const open = el("button", label, "linkish");
  open.type = "button";
  open.setAttribute("aria-label", ariaLabel);
  open.addEventListener("click", () => openDetail(ref));
  return open;
}

function edgeItem(edge) {
  const li = el("li", null, `edge depth-${Math.min(edge.depth, 5)}`);
  const name = edge.namespace ? `${edge.namespace}/${edge.name}` : edge.name;
  li.append(
    el("span", edge.relation, "relation"),
    " ",
    el("span", edge.kind, "kind"),
    " ",
    refElement(edge, name, `${describe(edge)}: show its detail`),
  );
  if (edge.sectionName) li.append(" ", el("span", `listener ${edge.sectionName}`, "muted"));
  li.append(" ");
  if (!edge.exists) li.append(el("span", "missing", "marker-missing"));
  else if (edge.status) li.append(el("span", edge.status, `badge badge-${edge.status}`));
  else li.append(el("span", "external", "muted"));
  if (edge.depth > 1) li.title = `${edge.depth} levels away`;
  return li;
}

function renderEdges(id, edges, none) {
  const list = document.getElementById(id);
  list.replaceChildren(...edges.map(edgeItem));
  if (!edges.length) list.append(el("li", none, "muted"));
}

// The object's own row: its health, and its root cause when it has one you may see.
function renderSelf(row) {
  const self = document.getElementById("relations-self");
  const health = el("span", row.status, `badge badge-${row.status}`);
  self.replaceChildren("This object: ", health);
  if (row.suspended) self.append(" ", el("span", "suspended", "badge badge-suspended"));
  const b = row.blockedBy;
  if (b) {
    const label = describe(b);
    self.append(" blocked by ", refElement(b, label, `blocked by ${label}: show its detail`));
    if (!b.exists) self.append(" ", el("span", "missing", "marker-missing"));
  }
  self.hidden = false;
}

async function loadRelations() {
  const mine = ++relSeq;
  const row = current;
  const hidden = document.getElementById("relations-hidden");
  showError("relations-error", "");
  hidden.hidden = true;
  document.getElementById("relations-self").hidden = true;
  document.getElementById("upstream").replaceChildren(el("li", "Loading…", "muted"));
  document.getElementById("downstream").replaceChildren();
  const depth = document.getElementById("relations-depth").value;
  try {
    const answer = await api(`/objects/${objectPath(row)}/relations`, new URLSearchParams({ depth }));
    if (mine !== relSeq) return;
    const none = answer.hidden ? "none you may list" : "none";
    renderEdges("upstream", answer.upstream, none);
    renderEdges("downstream", answer.downstream, none);
    renderSelf(answer.object);
    hidden.hidden = answer.hidden === 0;
    hidden.textContent = `+${answer.hidden} hidden: related objects you may not list`;
  } catch (e) {
    if (mine !== relSeq) return;
    document.getElementById("upstream").replaceChildren();
    showError("relations-error", `No relations to show: ${e.message}`);
  }
}

// -- the dialog ---------------------------------------------------------------------------

// The row's labels, as the index holds them (text only: leaf data).
function renderLabels(row) {
  const list = document.getElementById("labels-list");
  const labels = Object.entries(row.labels || {});
  list.replaceChildren(...labels.map(([k, v]) => el("li", `${k}=${v}`, "label-chip")));
  if (!labels.length) list.append(el("li", row.labels ? "none" : "not in this view", "muted"));
  document.getElementById("labels-cut").hidden = !row.labelsTruncated;
}

export async function openDetail(row) {
  const dialog = document.getElementById("detail");
  if (!dialog.open) opener = document.activeElement; // a related object keeps the first opener
  const mine = ++liveSeq;
  current = row;
  shown = null;
  document.getElementById("detail-title").textContent = `${describe(row)} · ${row.cluster}`;
  showError("detail-error", "");
  document.getElementById("detail-body").textContent = "Loading…";
  document.getElementById("detail-body").hidden = false;
  document.querySelector("#detail .format").hidden = true;
  if (!dialog.open) dialog.showModal();
  renderLabels(row);
  loadRelations();
  loadHistory(row, objectPath(row));
  try {
    const answer = await api(`/objects/${objectPath(row)}`);
    if (mine !== liveSeq) return;
    shown = answer.object;
    render();
  } catch (e) {
    if (mine !== liveSeq) return;
    render();
    showError("detail-error", refusal(row, e));
  }
}

export function setUpDetail() {
  const dialog = document.getElementById("detail");
  document.getElementById("detail-close").addEventListener("click", () => dialog.close());
  for (const radio of dialog.querySelectorAll("input[name=format]")) {
    radio.addEventListener("change", render);
  }
  document.getElementById("relations-depth").addEventListener("change", () => {
    if (current) loadRelations();
  });
  dialog.addEventListener("close", () => {
    if (opener && document.contains(opener)) opener.focus();
  });
}
