// The alerts page: the firing fleet alerts the caller may see (GET /api/v1/alerts), each
// opening its rows in the list view (a cross-cluster alert: the object grouped across clusters).

import { api, el, setUpIdentity, showError, timeElement } from "./api.js";

export function rowsUrl(a) {
  const p = new URLSearchParams();
  if (a.cluster) p.set("cluster", a.cluster);
  p.set("namespace", a.namespace || "_");
  p.set("kind", a.kind);
  p.set("name", a.name);
  if (!a.cluster) p.set("group", "object");
  return `/?${p}`;
}

function cell(child) {
  const td = document.createElement("td");
  if (child) td.append(child);
  return td;
}

function row(a) {
  const tr = document.createElement("tr");
  const link = el("a", a.name);
  link.href = rowsUrl(a);
  const where = a.cluster || `${(a.clusters || []).length} clusters`;
  const summary = (a.annotations && a.annotations.summary) || a.message || "";
  tr.append(
    el("td", a.rule),
    cell(el("span", a.severity, `badge badge-${a.severity === "critical" ? "unhealthy" : "progressing"}`)),
    el("td", where),
    el("td", a.namespace || "(cluster)"),
    el("td", a.kind),
    cell(link),
    cell(timeElement(a.startsAt)),
    el("td", summary, "message"),
  );
  return tr;
}

async function load() {
  showError("error", "");
  try {
    const body = await api("/alerts");
    const n = body.items.length;
    document.getElementById("summary").textContent =
      n === 1 ? "1 firing alert" : `${n} firing alerts`;
    showError("rules-error", body.rules.error ? `Alert rules refused (the previous rules keep running): ${body.rules.error}` : "");
    document.querySelector("#alerts tbody").replaceChildren(...body.items.map(row));
    document.getElementById("empty").hidden = n > 0;
  } catch (e) {
    showError("error", e.message);
  }
}

setUpIdentity(load);
load();
