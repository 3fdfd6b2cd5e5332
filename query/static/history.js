// The history section of the detail dialog: the object's recorded transitions from the index
// (`.../history`, visible when the row is), drawn as status bands over the last 24 hours and
// over the retention window, with "failing since", the transitions of the last day (and a
// flapping mark past the threshold) and the newest transitions as a list. Leaf text is only
// ever set as text (textContent), never as markup.

import { api, config, el, showError } from "./api.js";

const DAY_MS = 24 * 3600 * 1000;
const SHOWN = 20; // transitions listed under the timelines
let seq = 0;

function when(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 2 * 86400) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

// Bands over [start, end]: each transition starts a band of its status (a deletion: absent);
// before the first one the window holds, the status before it when an older entry says, else
// "none" (nothing recorded). No transitions at all: the row's status throughout.
export function bands(entries, start, end, current) {
  const points = entries
    .map((e) => ({ t: when(e.at), n: e.position, status: e.source === "deleted" ? "absent" : e.status }))
    .filter((p) => p.t !== null)
    .sort((a, b) => a.t - b.t || a.n - b.n); // within a second: in the order written
  if (!points.length) return [{ from: start, to: end, status: current || "none" }];
  let status = "none";
  for (const p of points) if (p.t <= start) status = p.status;
  const out = [];
  let cursor = start;
  for (const p of points) {
    if (p.t <= start || p.t > end) continue;
    if (p.t > cursor) out.push({ from: cursor, to: p.t, status });
    cursor = p.t;
    status = p.status;
  }
  if (end > cursor) out.push({ from: cursor, to: end, status });
  return out;
}

function drawTimeline(id, entries, start, end, current, span) {
  const node = document.getElementById(id);
  const parts = bands(entries, start, end, current).map((b) => {
    const band = el("div", null, `band band-${b.status}`);
    // grows with its share of the window; at least a few pixels (ui.css), so the current
    // status shows even when it began a second ago
    band.style.flex = `${(b.to - b.from) / (end - start)} 1 0px`;
    band.title = `${b.status === "none" ? "no record" : b.status} from ${new Date(b.from).toISOString()}`;
    band.dataset.status = b.status;
    return band;
  });
  node.replaceChildren(...parts);
  const changes = entries.filter((e) => (when(e.at) ?? 0) > start).length;
  node.setAttribute("aria-label", `Status over the last ${span}: ${changes} transition(s)`);
}

function entryItem(e) {
  const li = el("li");
  const status = e.source === "deleted" ? "deleted" : e.status;
  li.append(el("time", e.at), " ", el("span", status, `badge badge-${e.status}`));
  if (e.suspended) li.append(" ", el("span", "suspended", "badge badge-suspended"));
  li.append(" ", el("span", e.source, "muted"));
  if (e.reason) li.append(" ", el("span", e.reason, "kind"));
  if (e.revision) li.append(" ", el("span", e.revision, "muted"));
  if (e.message) li.append(" ", el("span", e.message));
  return li;
}

function summary(row, entries, now) {
  const out = [];
  if (row === null) out.push("Deleted; its history is kept for a while.");
  else if (row.failingSince) {
    const t = when(row.failingSince);
    out.push(`Failing since ${row.failingSince}${t ? ` (${age(now - t)})` : ""}.`);
  } else out.push(row.status === "healthy" ? "Healthy." : `${row.status}.`);
  const flaps = row ? row.transitions24h : entries.filter((e) => (when(e.at) ?? 0) > now - DAY_MS).length;
  out.push(`${flaps} transition(s) in the last 24 h.`);
  return out.join(" ");
}

export async function loadHistory(ref, objectPath) {
  const mine = ++seq;
  const node = document.getElementById("history-summary");
  showError("history-error", "");
  node.textContent = "Loading…";
  document.getElementById("history-list").replaceChildren();
  const days = Number(config.historyDays) || 14;
  document.getElementById("timeline-window-label").textContent = `${days} d`;
  try {
    const answer = await api(`/objects/${objectPath}/history`, new URLSearchParams({ limit: "500" }));
    if (mine !== seq) return;
    const now = Date.now();
    const row = answer.object;
    const entries = answer.items;
    const current = row ? row.status : "absent";
    node.replaceChildren(summary(row, entries, now));
    const flaps = row ? row.transitions24h : 0;
    if (flaps >= (Number(config.flappingThreshold) || 4)) {
      node.append(" ", el("span", "flapping", "badge badge-unknown"));
    }
    drawTimeline("timeline-day", entries, now - DAY_MS, now, current, "24 hours");
    drawTimeline("timeline-window", entries, now - days * DAY_MS, now, current, `${days} days`);
    const list = document.getElementById("history-list");
    list.replaceChildren(...entries.slice(0, SHOWN).map(entryItem));
    if (!entries.length) list.append(el("li", "No transitions recorded.", "muted"));
  } catch (e) {
    if (mine !== seq) return;
    node.textContent = "";
    showError("history-error", `No history to show: ${e.message}`);
  }
}
