// The status page: the fleet state and, for each cluster the caller can see, its sync state.

import { api, el, setUpIdentity, showBanner, showError, timeElement } from "./api.js";

function cell(child) {
  const td = document.createElement("td");
  if (child) td.append(child);
  return td;
}

function stateBadge(c) {
  if (c.ready === false) return el("span", "not ready", "badge badge-progressing");
  const word = c.stale ? "stale" : c.state;
  const cls = c.stale || c.state === "error" ? "unhealthy" : c.state === "ok" ? "healthy" : "progressing";
  return el("span", word, `badge badge-${cls}`);
}

function access(c) {
  if (c.rbacAgeS === null) return el("span", "none yet", "muted");
  const age = `${Math.round(c.rbacAgeS)}s old`;
  return el("span", c.rbacFresh ? `fresh (${age})` : `${age}: too old, rows hidden`, c.rbacFresh ? "" : "warn");
}

function row(c) {
  const tr = document.createElement("tr");
  tr.append(
    el("td", c.cluster),
    cell(stateBadge(c)),
    el("td", c.objects.toLocaleString()),
    cell(timeElement(c.lastSuccess)),
    cell(timeElement(c.lastAttempt)),
    cell(access(c)),
    el("td", [c.notReadyReason, c.registryError, c.lastError].filter(Boolean).join("; "), "message"),
  );
  return tr;
}

async function load() {
  showError("error", "");
  try {
    const s = await api("/status");
    document.getElementById("state").textContent = `${s.state}: ${s.message}`;
    const stale = s.clusters.filter((c) => c.stale).map((c) => ({ cluster: c.cluster, lastSuccess: c.lastSuccess }));
    const pending = s.clusters.filter((c) => !c.collected).map((c) => ({ cluster: c.cluster, state: c.state }));
    showBanner({ state: s.state, degraded: s.state !== "ready", message: s.message, stale, notCollected: pending, hiddenStaleRbac: [] });
    document.querySelector("#clusters tbody").replaceChildren(...s.clusters.map(row));
    document.getElementById("empty").hidden = s.clusters.length > 0;
  } catch (e) {
    showError("error", e.message);
  }
}

setUpIdentity(load);
load();
